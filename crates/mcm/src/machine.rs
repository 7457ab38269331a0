//! The machine controller's decisions, as pure functions of observed objects
//! and the clock: settings with per-machine overrides, the bootstrap token
//! and userData substitution, the create-error handler, whether the class
//! allows a VM to be created and the record of it a machine keeps, the
//! status a health verdict leads to, node template sync as a patch, the
//! deletion state machine (S1–S6) with its progress kept in an annotation
//! and the class it calls the driver with, one round of a level-triggered
//! drain, and the hot-update check. Where running without
//! a target cluster changes a decision, "has target" is an input.
//!
//! Nothing here does I/O; `controllers::machine` gathers the facts, calls
//! these functions and applies what they return.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use api::{
    CurrentStatus, LastOperation, Machine, MachineClass, MachineOperationType, MachinePhase,
    MachineState, MachineStatus, NodeTemplateSpec, format_duration, labels, parse_duration,
};
use chrono::{DateTime, Utc};
use driver::{Code, LONG_RETRY, MEDIUM_RETRY, Outcome, SHORT_RETRY, Step};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, Pod, Secret, SecretReference, Taint,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::drain::{self, DrainPlan, EVICTION_RETRY_INTERVAL, ForceInput, PodInfo};
use crate::health::{self, Condition, Verdict};
use crate::time::{to_chrono, to_time};

// --- Settings -----------------------------------------------------------------

/// The machine controller's flags (spec §7), before per-machine overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// `--machine-creation-timeout`: how long a machine may take to join.
    pub creation_timeout: Duration,
    /// `--machine-health-timeout`: how long a machine may stay `Unknown`.
    pub health_timeout: Duration,
    /// `--machine-drain-timeout`: how long a normal drain may take, counted
    /// from the deletion timestamp, before it is forced.
    pub drain_timeout: Duration,
    /// `--machine-max-evict-retries`.
    pub max_evict_retries: u32,
    /// `--machine-pv-detach-timeout`: how long a drain waits for the volumes
    /// of an evicted pod to detach.
    pub pv_detach_timeout: Duration,
    /// `--node-conditions`: condition types that must be `False`.
    pub node_conditions: Vec<String>,
    /// `--resource-exhausted-retry`.
    pub resource_exhausted_retry: Duration,
    /// `--bootstrap-token-auth-extra-groups`, written to the token secret.
    pub bootstrap_token_auth_extra_groups: String,
    /// Never fail an `Unknown` machine for health (machine spec only).
    pub disable_health_timeout: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            creation_timeout: Duration::from_secs(20 * 60),
            health_timeout: Duration::from_secs(10 * 60),
            drain_timeout: Duration::from_secs(2 * 3600),
            max_evict_retries: 360,
            pv_detach_timeout: Duration::from_secs(2 * 60),
            node_conditions: health::DEFAULT_NODE_CONDITIONS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            resource_exhausted_retry: driver::DEFAULT_RESOURCE_EXHAUSTED_RETRY,
            bootstrap_token_auth_extra_groups: String::new(),
            disable_health_timeout: false,
        }
    }
}

impl Settings {
    /// The settings in effect for one machine: its spec's overrides win,
    /// then (for the creation timeout) the effective-creation-timeout
    /// annotation passed down from the deployment, then the flags.
    /// Unparsable overrides are ignored (admission rejects them anyway).
    pub fn for_machine(&self, m: &Machine) -> Settings {
        let c = &m.spec.configuration;
        let annotated_creation =
            annotation(&m.metadata, labels::EFFECTIVE_CREATION_TIMEOUT).and_then(parse_duration);
        Settings {
            creation_timeout: c
                .creation_timeout()
                .or(annotated_creation)
                .unwrap_or(self.creation_timeout),
            health_timeout: c.health_timeout().unwrap_or(self.health_timeout),
            drain_timeout: c.drain_timeout().unwrap_or(self.drain_timeout),
            max_evict_retries: c
                .max_evict_retries
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(self.max_evict_retries),
            pv_detach_timeout: self.pv_detach_timeout,
            node_conditions: c
                .node_condition_types()
                .unwrap_or_else(|| self.node_conditions.clone()),
            resource_exhausted_retry: self.resource_exhausted_retry,
            bootstrap_token_auth_extra_groups: self.bootstrap_token_auth_extra_groups.clone(),
            disable_health_timeout: c
                .disable_health_timeout
                .unwrap_or(self.disable_health_timeout),
        }
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The machine's node name (label `node`), if set and non-empty.
pub fn node_name(m: &Machine) -> Option<&str> {
    label(&m.metadata, labels::NODE).filter(|n| !n.is_empty())
}

/// Time since the machine was created (zero without a creation timestamp).
pub fn age(m: &Machine, now: DateTime<Utc>) -> Duration {
    m.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| (now - to_chrono(t)).to_std().unwrap_or_default())
        .unwrap_or_default()
}

/// Go's `strconv.ParseBool` truth values, which the `force-deletion` label
/// is read with.
pub fn parse_bool(v: &str) -> bool {
    matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True")
}

/// A last operation stamped `now`.
pub fn last_op(
    type_: MachineOperationType,
    state: MachineState,
    description: impl Into<String>,
    error_code: Option<Code>,
    now: DateTime<Utc>,
) -> LastOperation {
    LastOperation {
        description: description.into(),
        error_code: error_code.map(|c| c.name().to_string()).unwrap_or_default(),
        last_update_time: Some(to_time(now)),
        state: Some(state),
        type_: Some(type_),
    }
}

/// The machine's status with a new phase: `lastUpdateTime` moves only when
/// the phase changes, because the health timeout counts from it (upstream
/// bumps it on every write, which restarts the clock while conditions keep
/// changing, weak point #811).
pub fn with_phase(
    status: &MachineStatus,
    phase: MachinePhase,
    timeout_active: bool,
    now: DateTime<Utc>,
) -> MachineStatus {
    let mut s = status.clone();
    if s.current_status.phase != Some(phase) {
        s.current_status = CurrentStatus {
            phase: Some(phase),
            timeout_active,
            last_update_time: Some(to_time(now)),
            preserve_expiry_time: s.current_status.preserve_expiry_time.clone(),
        };
    } else {
        s.current_status.timeout_active = timeout_active;
    }
    s
}

// --- Bootstrap token and userData -------------------------------------------------

/// Placeholder in userData replaced by the bootstrap token.
pub const BOOTSTRAP_TOKEN_PLACEHOLDER: &str = "<<BOOTSTRAP_TOKEN>>";
/// Placeholder in userData replaced by the machine name.
pub const MACHINE_NAME_PLACEHOLDER: &str = "<<MACHINE_NAME>>";
/// Namespace of bootstrap token secrets in the target cluster.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kube-system";
/// Secret type of bootstrap tokens.
pub const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

/// The placeholders as `url.QueryEscape` writes them, for userData that
/// carries them inside a URL.
const BOOTSTRAP_TOKEN_ESCAPED: &str = "%3C%3CBOOTSTRAP_TOKEN%3E%3E";
const MACHINE_NAME_ESCAPED: &str = "%3C%3CMACHINE_NAME%3E%3E";

/// The bootstrap token ID of a machine: the first 6 hex digits of the hex
/// encoding of the name's last 5 bytes. Upstream slices without a length
/// check; names shorter than 3 bytes are left-padded with zeros here so the
/// ID is always 6 characters of `[0-9a-f]`.
pub fn bootstrap_token_id(machine_name: &str) -> String {
    let bytes = machine_name.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(5)..];
    let hex: String = tail.iter().map(|b| format!("{b:02x}")).collect();
    let padded = format!("{hex:0>6}");
    padded[..6].to_string()
}

/// Name of the bootstrap token secret with `id`.
pub fn bootstrap_token_secret_name(id: &str) -> String {
    format!("bootstrap-token-{id}")
}

/// A 16-character token secret of `[0-9a-z]`, as bootstrap tokens require.
pub fn generate_token_secret(rng: &mut impl rand::Rng) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..16)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// The bootstrap token secret for a machine's node to join with.
pub fn bootstrap_token_secret(
    id: &str,
    token_secret: &str,
    expiration: DateTime<Utc>,
    auth_extra_groups: &str,
) -> Secret {
    let mut data = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        data.insert(k.to_string(), ByteString(v.as_bytes().to_vec()));
    };
    put(
        "description",
        "A bootstrap token generated by the machine controller.",
    );
    put("token-id", id);
    put("token-secret", token_secret);
    put(
        "expiration",
        &expiration.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    );
    put("usage-bootstrap-authentication", "true");
    put("usage-bootstrap-signing", "true");
    if !auth_extra_groups.is_empty() {
        put("auth-extra-groups", auth_extra_groups);
    }
    Secret {
        metadata: ObjectMeta {
            name: Some(bootstrap_token_secret_name(id)),
            namespace: Some(BOOTSTRAP_TOKEN_NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        type_: Some(BOOTSTRAP_TOKEN_TYPE.to_string()),
        data: Some(data),
        ..Secret::default()
    }
}

/// A secret value as text, from `data` or `stringData`.
pub fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .cloned()
        })
}

/// The token (`<id>.<secret>`) an existing bootstrap token secret holds.
pub fn token_of(secret: &Secret) -> Option<String> {
    let id = secret_value(secret, "token-id")?;
    let s = secret_value(secret, "token-secret")?;
    (!id.is_empty() && !s.is_empty()).then(|| format!("{id}.{s}"))
}

/// userData with the token and machine name filled in, in both the plain
/// and the URL-escaped form of the placeholders.
pub fn substitute_user_data(user_data: &str, token: &str, machine_name: &str) -> String {
    user_data
        .replace(BOOTSTRAP_TOKEN_PLACEHOLDER, token)
        .replace(BOOTSTRAP_TOKEN_ESCAPED, token)
        .replace(MACHINE_NAME_PLACEHOLDER, machine_name)
        .replace(MACHINE_NAME_ESCAPED, machine_name)
}

/// The class's secrets merged (the credentials secret's keys win); either
/// may be missing, which counts as empty (spec §1).
pub fn merge_secrets(secret_ref: Option<&Secret>, credentials: Option<&Secret>) -> Secret {
    let mut data: BTreeMap<String, ByteString> = BTreeMap::new();
    for s in [secret_ref, credentials].into_iter().flatten() {
        for (k, v) in s.data.iter().flatten() {
            data.insert(k.clone(), v.clone());
        }
        for (k, v) in s.string_data.iter().flatten() {
            data.insert(k.clone(), ByteString(v.as_bytes().to_vec()));
        }
    }
    let meta = secret_ref
        .or(credentials)
        .map(|s| ObjectMeta {
            name: s.metadata.name.clone(),
            namespace: s.metadata.namespace.clone(),
            ..ObjectMeta::default()
        })
        .unwrap_or_default();
    Secret {
        metadata: meta,
        data: Some(data),
        ..Secret::default()
    }
}

/// The secret with `userData` replaced, as handed to the driver.
pub fn with_user_data(secret: &Secret, user_data: &str) -> Secret {
    let mut s = secret.clone();
    s.data.get_or_insert_with(BTreeMap::new).insert(
        labels::USER_DATA_KEY.to_string(),
        ByteString(user_data.as_bytes().to_vec()),
    );
    s
}

// --- Creation -----------------------------------------------------------------

/// lastOperation description of a machine whose VM was created.
pub const CREATING_DESCRIPTION: &str = "Creating machine on cloud provider";
/// lastOperation description after the stale-node check deleted a new VM.
pub const STALE_NODE_DESCRIPTION: &str = "VM using old node obj";

/// What the create-error handler writes and when it tries again.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateFailure {
    pub phase: MachinePhase,
    pub last_operation: LastOperation,
    pub retry: Duration,
}

/// The create-error handler (spec §2.1): `Failed` once the machine is older
/// than its creation timeout, else `CrashLoopBackOff`; the error code's name
/// goes to `errorCode` (the cluster autoscaler backs off on it). The retry
/// period comes from [`Code::outcome`] at `step`, but is cut to the time
/// left until the creation timeout, so `Failed` is written on time rather
/// than up to a retry period late.
pub fn create_failure(
    code: Code,
    message: &str,
    step: Step,
    age: Duration,
    settings: &Settings,
    now: DateTime<Utc>,
) -> CreateFailure {
    let timed_out = age > settings.creation_timeout;
    let phase = if timed_out {
        MachinePhase::Failed
    } else {
        MachinePhase::CrashLoopBackOff
    };
    let mut retry = match code.outcome(step) {
        Outcome::Retry(r) => r.period(settings.resource_exhausted_retry),
        _ => MEDIUM_RETRY,
    };
    if !timed_out {
        let left = settings.creation_timeout - age + Duration::from_secs(1);
        retry = retry.min(left);
    }
    CreateFailure {
        phase,
        last_operation: last_op(
            MachineOperationType::Create,
            MachineState::Failed,
            format!("Cloud provider message - {message}"),
            Some(code),
            now,
        ),
        retry,
    }
}

/// The one metadata/spec update after the VM is known (spec §2.1.3): label
/// `node`, priority `3` if missing, `spec.providerID`, and the provider spec
/// the VM was created with (for hot updates) if not recorded yet. `None`
/// when the machine already carries all of it.
pub fn creation_patch(
    m: &Machine,
    provider_id: &str,
    node_name: &str,
    provider_spec: &Value,
) -> Option<Value> {
    let mut patch = json!({});
    if label(&m.metadata, labels::NODE) != Some(node_name) && !node_name.is_empty() {
        patch["metadata"]["labels"] = json!({ labels::NODE: node_name });
    }
    let mut ann = Map::new();
    if annotation(&m.metadata, labels::MACHINE_PRIORITY).is_none() {
        ann.insert(
            labels::MACHINE_PRIORITY.into(),
            labels::DEFAULT_MACHINE_PRIORITY.into(),
        );
    }
    if annotation(&m.metadata, LAST_APPLIED_PROVIDER_SPEC).is_none() {
        ann.insert(
            LAST_APPLIED_PROVIDER_SPEC.into(),
            Value::String(provider_spec.to_string()),
        );
    }
    if !ann.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann);
    }
    if m.spec.provider_id != provider_id && !provider_id.is_empty() {
        patch["spec"] = json!({ "providerID": provider_id });
    }
    (patch != json!({})).then_some(patch)
}

/// lastOperation description of a machine that is `Available` right after
/// its VM was created, because there is no target cluster for it to join.
pub const AVAILABLE_DESCRIPTION: &str =
    "Created machine on cloud provider; no target cluster to join";

/// Whether the provider told enough about a VM to record it: a providerID
/// always, and a node name only where there is a target cluster whose Node
/// it names (spec §2.1.3).
pub fn vm_ids_complete(provider_id: &str, node_name: &str, has_target: bool) -> bool {
    !provider_id.is_empty() && (!has_target || !node_name.is_empty())
}

/// Status of a machine whose VM now exists (only from no phase or
/// `CrashLoopBackOff`). With a target cluster: `Pending` with lastOp
/// Create/Processing, until its node joins. Without one there is nothing to
/// join: `Available` with lastOp Create/Successful, and the provider's
/// addresses recorded, since there is no Node to read them from.
pub fn created_status(
    m: &Machine,
    has_target: bool,
    addresses: &[NodeAddress],
    now: DateTime<Utc>,
) -> Option<MachineStatus> {
    let status = m.status.clone().unwrap_or_default();
    if !matches!(
        status.current_status.phase,
        None | Some(MachinePhase::CrashLoopBackOff)
    ) {
        return None;
    }
    Some(if has_target {
        let mut s = with_phase(&status, MachinePhase::Pending, true, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Processing,
            CREATING_DESCRIPTION,
            None,
            now,
        );
        s
    } else {
        let mut s = with_phase(&status, MachinePhase::Available, false, now);
        s.last_operation = last_op(
            MachineOperationType::Create,
            MachineState::Successful,
            AVAILABLE_DESCRIPTION,
            None,
            now,
        );
        s.addresses = addresses.to_vec();
        s
    })
}

/// When to look at a machine again after its creation flow went through:
/// with a target cluster at the creation timeout (for the health check
/// to fail a machine that never joined), at most a health recheck away;
/// without one nothing is pending, so only the steady-state resync.
pub fn recheck_after_creation(
    m: &Machine,
    has_target: bool,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Duration {
    if !has_target {
        return LONG_RETRY;
    }
    settings
        .creation_timeout
        .saturating_sub(age(m, now))
        .min(health::HEALTH_RECHECK)
}

/// Which parts of a live machine's pass run (spec §2, "Order").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveSteps {
    /// Health, node sync and the "node deleted → delete the machine" rule:
    /// only with a target cluster, once the machine names its node and has
    /// a phase.
    pub node: bool,
    /// Hot update of the VM: it exists and the machine is neither new,
    /// crash-looping nor failed.
    pub hot_update: bool,
    /// The creation flow: no VM recorded yet, or a phase that says the
    /// creation has not gone through; never for a Failed machine, which is
    /// about to be replaced (a new VM would only be deleted again).
    pub create: bool,
}

/// The parts of a live machine's pass, from the machine as it is now. The
/// executor asks again after the node checks, which may change the phase.
pub fn live_steps(m: &Machine, has_target: bool) -> LiveSteps {
    let phase = m.phase();
    let created = !m.spec.provider_id.is_empty();
    let early = matches!(phase, None | Some(MachinePhase::CrashLoopBackOff));
    LiveSteps {
        node: has_target && node_name(m).is_some() && phase.is_some(),
        hot_update: created && !early && phase != Some(MachinePhase::Failed),
        create: (!created || early) && phase != Some(MachinePhase::Failed),
    }
}

// --- The machine's class ----------------------------------------------------------

/// Annotation on a machine recording the class its VM is (to be) created
/// with, as JSON [`KnownClass`]: provider, provider spec and secret
/// references. It is written on a live pass before the driver is first
/// asked to create the VM, and kept up to date while the class exists, so
/// a machine without it and without a providerID never had a VM, and a VM
/// whose class is gone can still be deleted with what the class was.
pub const LAST_KNOWN_CLASS: &str = "machine.sapcloud.io/last-known-class";

/// What a machine remembers of its class: what the driver needs to find
/// and delete the VM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KnownClass {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(default)]
    pub provider_spec: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretReference>,
}

impl KnownClass {
    /// The parts of `class` worth remembering.
    pub fn of(class: &MachineClass) -> KnownClass {
        KnownClass {
            provider: class.provider.clone(),
            provider_spec: class.provider_spec.clone(),
            secret_ref: class.secret_ref.clone(),
            credentials_secret_ref: class.credentials_secret_ref.clone(),
        }
    }

    /// The record on `m`: `None` without one, `Some(None)` for one that
    /// cannot be read.
    pub fn recorded(m: &Machine) -> Option<Option<KnownClass>> {
        annotation(&m.metadata, LAST_KNOWN_CLASS).map(|v| serde_json::from_str(v).ok())
    }

    /// A class named `name` in `ns` made from the record, to hand the
    /// driver in place of one that is gone.
    pub fn to_class(&self, name: &str, ns: &str) -> MachineClass {
        MachineClass {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(ns.to_string()),
                ..ObjectMeta::default()
            },
            provider: self.provider.clone(),
            provider_spec: self.provider_spec.clone(),
            secret_ref: self.secret_ref.clone(),
            credentials_secret_ref: self.credentials_secret_ref.clone(),
            node_template: None,
        }
    }
}

/// The annotation patch that records `class` on `m`; `None` when the
/// record is current.
pub fn known_class_patch(m: &Machine, class: &MachineClass) -> Option<Value> {
    let want = KnownClass::of(class);
    if KnownClass::recorded(m) == Some(Some(want.clone())) {
        return None;
    }
    let text = serde_json::to_string(&want).ok()?;
    Some(json!({"metadata": {"annotations": {LAST_KNOWN_CLASS: text}}}))
}

/// How a live machine's class stands for creating a VM from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassState {
    /// It exists, carries the class finalizer, is not being deleted, and
    /// its secrets hold `userData`.
    Ready,
    /// It does not exist (not yet, not any more, or a misspelt name).
    Missing,
    /// It is being deleted.
    Deleting,
    /// Its secrets hold no `userData`.
    NoUserData,
    /// The class controller has not put the class finalizer on it yet.
    NoFinalizer,
}

/// The state of `class` (`None`: not found) whose merged secrets do or do
/// not hold `userData`.
pub fn class_state(class: Option<&MachineClass>, has_user_data: bool) -> ClassState {
    let Some(class) = class else {
        return ClassState::Missing;
    };
    if class.metadata.deletion_timestamp.is_some() {
        ClassState::Deleting
    } else if !has_user_data {
        ClassState::NoUserData
    } else if !crate::machineclass::has_class_finalizer(class) {
        ClassState::NoFinalizer
    } else {
        ClassState::Ready
    }
}

/// What keeps a VM from being created from the class, in words that say
/// what to do; `None` when nothing does, or only the class finalizer is
/// missing (the class controller adds it at once, and the class's update
/// brings the machine back).
pub fn class_problem(state: ClassState, ns: &str, class_name: &str) -> Option<String> {
    match state {
        ClassState::Ready | ClassState::NoFinalizer => None,
        ClassState::Missing => Some(format!(
            "MachineClass {ns}/{class_name} not found: create it (or correct the class name) \
             and the VM is created"
        )),
        ClassState::Deleting => Some(format!(
            "MachineClass {ns}/{class_name} is being deleted: no new VM is created from it"
        )),
        ClassState::NoUserData => Some(format!(
            "the secrets of MachineClass {ns}/{class_name} have no {}",
            labels::USER_DATA_KEY
        )),
    }
}

/// Every lastOperation description a class problem of this machine's
/// class was written with, including the one earlier versions wrote for
/// every machine, running or not.
fn class_problem_descriptions(ns: &str, class_name: &str) -> Vec<String> {
    let mut out: Vec<String> = [
        ClassState::Missing,
        ClassState::Deleting,
        ClassState::NoUserData,
    ]
    .into_iter()
    .filter_map(|s| class_problem(s, ns, class_name))
    .collect();
    out.push(format!("MachineClass {ns}/{class_name} not found"));
    out.push(format!(
        "the secrets of MachineClass {class_name} have no {}",
        labels::USER_DATA_KEY
    ));
    out
}

/// lastOperation description of a machine whose class problem is gone.
pub fn class_available_description(ns: &str, class_name: &str) -> String {
    format!("MachineClass {ns}/{class_name} is available again")
}

/// The status of a machine with a VM whose lastOperation still reports a
/// class problem that is gone (written before the class came back, or by
/// an earlier version, which wrote it onto running machines too): the
/// lastOperation of the phase it is in. `None` when there is nothing to
/// clear, or when the creation flow is about to overwrite it anyway.
pub fn class_recovered_status(m: &Machine, now: DateTime<Utc>) -> Option<MachineStatus> {
    let status = m.status.as_ref()?;
    let op = &status.last_operation;
    let ns = m.metadata.namespace.as_deref().unwrap_or_default();
    let class_name = &m.spec.class.name;
    let phase = status.current_status.phase;
    let creating = m.spec.provider_id.is_empty()
        || matches!(phase, None | Some(MachinePhase::CrashLoopBackOff));
    if creating
        || op.type_ != Some(MachineOperationType::Create)
        || op.state != Some(MachineState::Failed)
        || !class_problem_descriptions(ns, class_name).contains(&op.description)
    {
        return None;
    }
    let mut s = status.clone();
    s.last_operation = match phase {
        Some(MachinePhase::Pending) => last_op(
            MachineOperationType::Create,
            MachineState::Processing,
            CREATING_DESCRIPTION,
            None,
            now,
        ),
        Some(MachinePhase::Available) => last_op(
            MachineOperationType::Create,
            MachineState::Successful,
            AVAILABLE_DESCRIPTION,
            None,
            now,
        ),
        _ => last_op(
            MachineOperationType::HealthCheck,
            MachineState::Successful,
            class_available_description(ns, class_name),
            None,
            now,
        ),
    };
    Some(s)
}

// --- Health ---------------------------------------------------------------------

/// A node condition in the planners' form.
fn condition(c: &NodeCondition) -> Condition {
    Condition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        since: c.last_transition_time.as_ref().map(to_chrono),
    }
}

fn node_conditions(node: &Node) -> &[NodeCondition] {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or(&[])
}

/// Whether the node carries a taint with `key`.
pub fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == key))
}

/// The facts [`health::decide`] needs about a machine and its node.
pub fn observe_health(
    m: &Machine,
    node: Option<&Node>,
    settings: &Settings,
    now: DateTime<Utc>,
) -> health::Observed {
    let conditions: Vec<Condition> = node
        .map(|n| node_conditions(n).iter().map(condition).collect())
        .unwrap_or_default();
    let created = m
        .metadata
        .creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(now);
    let phase_since = m
        .status
        .as_ref()
        .and_then(|s| s.current_status.last_update_time.as_ref())
        .map(to_chrono)
        .unwrap_or(created);
    health::Observed {
        phase: m.phase(),
        node_exists: node.is_some(),
        healthy: health::is_healthy(&conditions, &settings.node_conditions),
        critical_components_not_ready: node
            .is_some_and(|n| has_taint(n, labels::CRITICAL_COMPONENTS_NOT_READY_TAINT)),
        created,
        phase_since,
        creation_timeout: settings.creation_timeout,
        health_timeout: settings.health_timeout,
        disable_health_timeout: settings.disable_health_timeout,
    }
}

/// Conditions compared without their heartbeat times, so a heartbeat alone
/// never causes a machine status write.
fn same_conditions(a: &[NodeCondition], b: &[NodeCondition]) -> bool {
    let key = |c: &NodeCondition| (c.type_.clone(), c.status.clone(), c.reason.clone());
    a.len() == b.len() && a.iter().map(key).eq(b.iter().map(key))
}

fn describe_conditions(conditions: &[NodeCondition]) -> String {
    conditions
        .iter()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The status a health verdict leads to, with the node's conditions copied
/// in; `None` when nothing changes. A `FailedHealthTimeout` verdict is only
/// applied by the caller once the meltdown limit allows it.
pub fn health_status(
    m: &Machine,
    verdict: &Verdict,
    node: Option<&Node>,
    settings: &Settings,
    now: DateTime<Utc>,
) -> Option<MachineStatus> {
    let old = m.status.clone().unwrap_or_default();
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let conditions = node.map(node_conditions).unwrap_or(&[]);
    let mut s = match verdict {
        Verdict::Running { first_join } => {
            let mut s = with_phase(&old, MachinePhase::Running, false, now);
            s.last_operation = if *first_join {
                last_op(
                    MachineOperationType::Create,
                    MachineState::Successful,
                    format!(
                        "Machine {name} successfully joined the cluster in {}",
                        format_duration(Duration::from_secs(age(m, now).as_secs()))
                    ),
                    None,
                    now,
                )
            } else {
                last_op(
                    MachineOperationType::HealthCheck,
                    MachineState::Successful,
                    format!("Machine {name} successfully re-joined the cluster"),
                    None,
                    now,
                )
            };
            s
        }
        Verdict::Unknown { node_gone } => {
            let mut s = with_phase(&old, MachinePhase::Unknown, true, now);
            let why = if *node_gone {
                "its node is gone".to_string()
            } else {
                format!(
                    "node conditions: {}",
                    describe_conditions(conditions).as_str()
                )
            };
            s.last_operation = last_op(
                MachineOperationType::HealthCheck,
                MachineState::Processing,
                format!("Machine {name} is unhealthy - changing MachineState to Unknown: {why}"),
                None,
                now,
            );
            s
        }
        Verdict::FailedCreationTimeout => {
            let mut s = with_phase(&old, MachinePhase::Failed, false, now);
            s.last_operation = last_op(
                MachineOperationType::Create,
                MachineState::Failed,
                format!(
                    "Machine {name} failed to join the cluster in {}",
                    format_duration(settings.creation_timeout)
                ),
                None,
                now,
            );
            s
        }
        Verdict::FailedHealthTimeout => {
            let mut s = with_phase(&old, MachinePhase::Failed, false, now);
            s.last_operation = last_op(
                MachineOperationType::HealthCheck,
                MachineState::Failed,
                format!(
                    "Machine {name} is not healthy since {}; changing MachineState to Failed. \
                     Node conditions: {}",
                    format_duration(settings.health_timeout),
                    describe_conditions(conditions)
                ),
                None,
                now,
            );
            s
        }
        Verdict::Wait(_) => old.clone(),
    };
    if node.is_some() && !same_conditions(&s.conditions, conditions) {
        s.conditions = conditions.to_vec();
    }
    (s != old).then_some(s)
}

// --- Node template sync -----------------------------------------------------------

/// The node template as recorded in the node's last-applied annotation:
/// only labels, annotations and taints, the parts that are synchronized.
fn applied_template(t: &NodeTemplateSpec) -> NodeTemplateSpec {
    let mut out = NodeTemplateSpec::default();
    out.metadata.labels = t.metadata.labels.clone().filter(|l| !l.is_empty());
    out.metadata.annotations = t.metadata.annotations.clone().filter(|a| !a.is_empty());
    out.spec.taints = t.spec.taints.clone().filter(|t| !t.is_empty());
    out
}

/// The node template last applied to `node`, from its annotation. An
/// unreadable annotation counts as none: foreign keys are then never
/// removed, only desired ones added, which is the safe direction.
pub fn last_applied_template(node: &Node) -> Option<NodeTemplateSpec> {
    annotation(&node.metadata, labels::LAST_APPLIED_ANNO_LABELS_TAINTS)
        .and_then(|v| serde_json::from_str(v).ok())
}

/// Desired values for a string map: set what differs, null what was applied
/// before and is no longer desired (and is still present).
fn map_patch(
    have: Option<&BTreeMap<String, String>>,
    want: Option<&BTreeMap<String, String>>,
    applied: Option<&BTreeMap<String, String>>,
    out: &mut Map<String, Value>,
) {
    let empty = BTreeMap::new();
    let have = have.unwrap_or(&empty);
    let want = want.unwrap_or(&empty);
    for (k, v) in want {
        if have.get(k) != Some(v) {
            out.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in applied.unwrap_or(&empty).keys() {
        if !want.contains_key(k) && have.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
}

/// The node's taints after sync: taints last applied and no longer desired
/// are removed (by key and effect), desired ones added or updated, others
/// kept in place.
fn synced_taints(have: &[Taint], want: &[Taint], applied: &[Taint]) -> Vec<Taint> {
    let same = |a: &Taint, b: &Taint| a.key == b.key && a.effect == b.effect;
    let mut out: Vec<Taint> = have
        .iter()
        // Kept unless we applied it and no longer want it.
        .filter(|t| !applied.iter().any(|a| same(a, t)) || want.iter().any(|w| same(w, t)))
        .cloned()
        .collect();
    for w in want {
        match out.iter_mut().find(|t| same(t, w)) {
            Some(t) if t.value == w.value => {}
            Some(t) => *t = w.clone(),
            None => out.push(w.clone()),
        }
    }
    out
}

/// The merge patch that brings `node` in line with the machine's node
/// template (spec §2.3), given what was applied last time; `None` when the
/// node already matches. The taint list is written whole, so the caller
/// must guard the patch with the node's resourceVersion.
pub fn node_template_patch(
    node: &Node,
    template: &NodeTemplateSpec,
    last_applied: Option<&NodeTemplateSpec>,
) -> Option<Value> {
    let want = applied_template(template);
    let mut labels_out = Map::new();
    map_patch(
        node.metadata.labels.as_ref(),
        want.metadata.labels.as_ref(),
        last_applied.and_then(|a| a.metadata.labels.as_ref()),
        &mut labels_out,
    );
    let mut ann_out = Map::new();
    map_patch(
        node.metadata.annotations.as_ref(),
        want.metadata.annotations.as_ref(),
        last_applied.and_then(|a| a.metadata.annotations.as_ref()),
        &mut ann_out,
    );
    // The record itself is ours, whatever the template says.
    ann_out.remove(labels::LAST_APPLIED_ANNO_LABELS_TAINTS);
    let have_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let taints = synced_taints(
        &have_taints,
        want.spec.taints.as_deref().unwrap_or(&[]),
        last_applied
            .and_then(|a| a.spec.taints.as_deref())
            .unwrap_or(&[]),
    );
    let record_current = last_applied.map(applied_template).as_ref() == Some(&want)
        || (last_applied.is_none() && want == NodeTemplateSpec::default());
    if !record_current {
        let record = serde_json::to_string(&want).unwrap_or_default();
        ann_out.insert(
            labels::LAST_APPLIED_ANNO_LABELS_TAINTS.to_string(),
            Value::String(record),
        );
    }
    let mut patch = json!({});
    if !labels_out.is_empty() {
        patch["metadata"]["labels"] = Value::Object(labels_out);
    }
    if !ann_out.is_empty() {
        patch["metadata"]["annotations"] = Value::Object(ann_out);
    }
    if taints != have_taints {
        patch["spec"] = json!({ "taints": taints });
    }
    (patch != json!({})).then_some(patch)
}

/// Everything the machine controller keeps on a healthy machine's node, as
/// one merge patch: the node template, the `machine-name` label, and the
/// node finalizer (only when `finalizer` — the node maps to exactly one
/// non-deleting machine). `None` when the node already has it all.
pub fn node_sync_patch(
    node: &Node,
    machine_name: &str,
    template: &NodeTemplateSpec,
    finalizer: bool,
) -> Option<Value> {
    let last = last_applied_template(node);
    let mut patch = node_template_patch(node, template, last.as_ref()).unwrap_or(json!({}));
    if label(&node.metadata, labels::NODE_MACHINE_NAME) != Some(machine_name) {
        patch["metadata"]["labels"][labels::NODE_MACHINE_NAME] =
            Value::String(machine_name.to_string());
    }
    let fins = node.metadata.finalizers.clone().unwrap_or_default();
    if finalizer && !fins.iter().any(|f| f == labels::NODE_FINALIZER) {
        let mut f = fins;
        f.push(labels::NODE_FINALIZER.to_string());
        patch["metadata"]["finalizers"] = json!(f);
    }
    if patch == json!({}) {
        return None;
    }
    patch["metadata"]["resourceVersion"] = json!(node.metadata.resource_version);
    Some(patch)
}

// --- Deletion ---------------------------------------------------------------------

/// Annotation on a deleting machine holding its [`DeletionStep`]. The flow
/// resumes from it after a restart; `lastOperation.description` is for
/// people only and is never parsed (spec §8.18).
pub const DELETION_STEP: &str = "machine.sapcloud.io/deletion-step";

/// The steps of the deletion flow (spec §2.4). Each is recorded before it
/// acts, and each action is idempotent, so a crash anywhere resumes at the
/// recorded step without losing the machine or its VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeletionStep {
    /// S1: find the node (label, node label, or the VM's status).
    GetVmStatus,
    /// S2: cordon and drain the node.
    DrainNode,
    /// S3: delete the node's VolumeAttachments (after a forced drain).
    DeleteVolumeAttachments,
    /// S4: delete the VM.
    DeleteVm,
    /// S5: delete the Node object.
    DeleteNode,
    /// S6: remove the machine's finalizer.
    RemoveFinalizer,
}

impl DeletionStep {
    /// Every step, in order.
    pub const ALL: [DeletionStep; 6] = [
        DeletionStep::GetVmStatus,
        DeletionStep::DrainNode,
        DeletionStep::DeleteVolumeAttachments,
        DeletionStep::DeleteVm,
        DeletionStep::DeleteNode,
        DeletionStep::RemoveFinalizer,
    ];

    /// The annotation value.
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionStep::GetVmStatus => "S1",
            DeletionStep::DrainNode => "S2",
            DeletionStep::DeleteVolumeAttachments => "S3",
            DeletionStep::DeleteVm => "S4",
            DeletionStep::DeleteNode => "S5",
            DeletionStep::RemoveFinalizer => "S6",
        }
    }

    /// Upstream's lastOperation description of the step (contract for
    /// operators and tools that read it).
    pub fn description(self) -> &'static str {
        match self {
            DeletionStep::GetVmStatus => {
                "Set machine status to termination. Now, getting VM Status"
            }
            DeletionStep::DrainNode => "Initiate node drain",
            DeletionStep::DeleteVolumeAttachments => "Delete Volume Attachments",
            DeletionStep::DeleteVm => "Initiate VM deletion",
            DeletionStep::DeleteNode => "Initiate node object deletion",
            DeletionStep::RemoveFinalizer => "Initiate machine object finalizer removal",
        }
    }

    /// Parses an annotation value.
    pub fn parse(s: &str) -> Option<DeletionStep> {
        DeletionStep::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// The step recorded on a machine; `None` for a deletion that has not
    /// started (or an unreadable value, which restarts the flow at S1 —
    /// every step is safe to repeat).
    pub fn of(m: &Machine) -> Option<DeletionStep> {
        annotation(&m.metadata, DELETION_STEP).and_then(DeletionStep::parse)
    }
}

/// What the executor observed or got back at the current step.
#[derive(Clone, Debug, PartialEq)]
pub enum StepFact {
    /// S1: the node is known (label, node label, or the VM's status said).
    NodeKnown,
    /// S1: `GetMachineStatus` failed.
    StatusFailed { code: Code, message: String },
    /// S2, S3: the node does not exist (any more).
    NodeGone,
    /// S2: the drain finished.
    Drained { forced: bool },
    /// S2: the drain failed.
    DrainFailed { forced: bool, message: String },
    /// S2: the drain is under way; look again after this long.
    Draining(Duration),
    /// S3: no VolumeAttachment of the node is left (or no volume attached).
    VolumesDetached,
    /// S3: this many VolumeAttachments were being deleted.
    VolumeAttachmentsLeft(usize),
    /// S4: `DeleteMachine` answered (`Ok` for success).
    VmDeleteAnswered { code: Code, message: String },
    /// S5: the node is deleted (or there was none).
    NodeDeleted,
    /// S6: the finalizer is gone.
    FinalizerRemoved,
    /// S1, S4: the class is gone and the driver was never asked to create
    /// a VM (no providerID, no [`LAST_KNOWN_CLASS`]): there is no VM to
    /// look for or delete.
    NoVm,
    /// S1, S4: the driver would have to be called, and there is no class
    /// to call it with; the message says what is missing and what to do.
    ClassMissing { message: String },
}

/// The class a deletion hands the driver (at S1 and S4).
#[derive(Clone, Debug, PartialEq)]
pub enum DeletionClass {
    /// Call the driver with this class: the machine's own (being deleted
    /// or not), or, with `last_known`, what the machine recorded of it.
    Use {
        class: Box<MachineClass>,
        last_known: bool,
    },
    /// The class is gone and the driver was never asked to create a VM.
    NoVm,
    /// The class is gone, a VM may exist, and there is nothing to delete it
    /// with; the message says what the user can do.
    Missing(String),
}

/// Which class a deletion calls the driver with; `class` is the machine's
/// class if it exists. A VM is never assumed away while the machine names
/// one (providerID) or recorded a class before creating one: only a
/// machine with neither never had a VM.
pub fn deletion_class(m: &Machine, class: Option<MachineClass>) -> DeletionClass {
    if let Some(class) = class {
        return DeletionClass::Use {
            class: Box::new(class),
            last_known: false,
        };
    }
    let ns = m.metadata.namespace.as_deref().unwrap_or_default();
    let name = m.metadata.name.as_deref().unwrap_or_default();
    let class_name = &m.spec.class.name;
    let vm = if m.spec.provider_id.is_empty() {
        "the VM".to_string()
    } else {
        format!("VM {}", m.spec.provider_id)
    };
    match KnownClass::recorded(m) {
        Some(Some(known)) => DeletionClass::Use {
            class: Box::new(known.to_class(class_name, ns)),
            last_known: true,
        },
        Some(None) => DeletionClass::Missing(format!(
            "Cannot delete {vm} of machine {name}: MachineClass {ns}/{class_name} not found \
             and the machine's record of it ({LAST_KNOWN_CLASS}) is unreadable; \
             re-create MachineClass {class_name} as the VM was created with it \
             and the deletion continues"
        )),
        None if m.spec.provider_id.is_empty() => DeletionClass::NoVm,
        None => DeletionClass::Missing(format!(
            "Cannot delete {vm} of machine {name}: MachineClass {ns}/{class_name} not found \
             and the machine has no record of the class the VM was created with; \
             re-create MachineClass {class_name} (its provider spec and secrets as the VM \
             was created with) and the deletion continues"
        )),
    }
}

/// What happens after a step.
#[derive(Clone, Debug, PartialEq)]
pub enum Transition {
    /// Record `step` and go on with it; `note` prefixes its description.
    Next {
        step: DeletionStep,
        note: Option<&'static str>,
    },
    /// Stay at the step and look again after `after`; with a failure, the
    /// lastOperation turns `Failed` with that message and code.
    Stay {
        after: Duration,
        failure: Option<(String, Option<Code>)>,
    },
    /// The machine is gone.
    Finished,
}

/// How often a running drain or VolumeAttachment cleanup is looked at.
pub const DELETION_POLL: Duration = Duration::from_secs(1);

fn next(step: DeletionStep) -> Transition {
    Transition::Next { step, note: None }
}

fn stay_failed(after: Duration, message: String, code: Option<Code>) -> Transition {
    Transition::Stay {
        after,
        failure: Some((message, code)),
    }
}

/// The deletion state machine (spec §2.4): from a step and what was
/// observed there to the next step or a retry. A fact that does not belong
/// to the step leaves the machine where it is and looks again soon.
pub fn deletion_transition(
    step: DeletionStep,
    fact: &StepFact,
    resource_exhausted_retry: Duration,
) -> Transition {
    use DeletionStep::*;
    use StepFact::*;
    let retry = |code: Code, s: Step, what: &str, message: &str| match code.outcome(s) {
        Outcome::Retry(r) => stay_failed(
            r.period(resource_exhausted_retry),
            format!("{what}: {message}"),
            Some(code),
        ),
        _ => stay_failed(MEDIUM_RETRY, format!("{what}: {message}"), Some(code)),
    };
    match (step, fact) {
        (GetVmStatus, NodeKnown) => next(DrainNode),
        (GetVmStatus, StatusFailed { code, message }) => {
            match code.outcome(Step::DeletionStatus) {
                // No VM, or the driver cannot tell: still drain and delete,
                // so that NICs and disks are cleaned up (weak point #850).
                Outcome::Proceed => next(DrainNode),
                _ => retry(
                    *code,
                    Step::DeletionStatus,
                    "Getting the VM status failed",
                    message,
                ),
            }
        }
        (DrainNode | DeleteVolumeAttachments, NodeGone) => next(DeleteVm),
        (DrainNode, Drained { forced: true }) => Transition::Next {
            step: DeleteVolumeAttachments,
            note: Some("Force Drain successful."),
        },
        (DrainNode, Drained { forced: false }) => Transition::Next {
            step: DeleteVm,
            note: Some("Drain successful."),
        },
        // A forced drain does not wait for anything, so its failures (a pod
        // that could not be deleted) do not hold the deletion up; S3 makes
        // sure the volumes are released before the VM goes.
        (DrainNode, DrainFailed { forced: true, .. }) => next(DeleteVolumeAttachments),
        (DrainNode, DrainFailed { message, .. }) => stay_failed(
            SHORT_RETRY,
            format!("Drain failed due to - {message}. Will retry in next sync"),
            None,
        ),
        (DrainNode, Draining(after)) => Transition::Stay {
            after: *after,
            failure: None,
        },
        (DeleteVolumeAttachments, VolumesDetached) => next(DeleteVm),
        (DeleteVolumeAttachments, VolumeAttachmentsLeft(_)) => Transition::Stay {
            after: DELETION_POLL,
            failure: None,
        },
        (DeleteVm, VmDeleteAnswered { code, message }) => match code.outcome(Step::Delete) {
            Outcome::Proceed => next(DeleteNode),
            _ => retry(*code, Step::Delete, "Deleting the VM failed", message),
        },
        (DeleteNode, NodeDeleted) => next(RemoveFinalizer),
        // No VM: nothing to look up. The drain still runs, and finds no
        // node unless someone labelled one for this machine.
        (GetVmStatus, NoVm) => next(DrainNode),
        (DeleteVm, NoVm) => Transition::Next {
            step: DeleteNode,
            note: Some("No VM to delete."),
        },
        // Never skip a VM that may exist: stay, say why, look again when
        // the class comes back (its creation requeues the machine) or
        // after the medium period.
        (GetVmStatus | DeleteVm, ClassMissing { message }) => {
            stay_failed(MEDIUM_RETRY, message.clone(), None)
        }
        (RemoveFinalizer, FinalizerRemoved) => Transition::Finished,
        _ => Transition::Stay {
            after: SHORT_RETRY,
            failure: None,
        },
    }
}

/// Where a deletion goes without a target cluster (spec §2.4, "S1: no
/// target → S4"): the steps that work on the machine's Node, its pods and
/// volumes are passed over — S1, S2 and S3 go to S4, S5 to S6 — without
/// looking at anything. `None`: the step runs as usual.
pub fn skip_without_target(step: DeletionStep, has_target: bool) -> Option<Transition> {
    use DeletionStep::*;
    if has_target {
        return None;
    }
    match step {
        GetVmStatus | DrainNode | DeleteVolumeAttachments => Some(next(DeleteVm)),
        DeleteNode => Some(next(RemoveFinalizer)),
        DeleteVm | RemoveFinalizer => None,
    }
}

/// The lastOperation of a deletion at `step`: Processing with the step's
/// description (after `note`), or Failed with the failure before it.
pub fn deletion_last_op(
    step: DeletionStep,
    note: Option<&str>,
    failure: Option<(&str, Option<Code>)>,
    now: DateTime<Utc>,
) -> LastOperation {
    match failure {
        Some((message, code)) => last_op(
            MachineOperationType::Delete,
            MachineState::Failed,
            format!("{message}. {}", step.description()),
            code,
            now,
        ),
        None => last_op(
            MachineOperationType::Delete,
            MachineState::Processing,
            match note {
                Some(n) => format!("{n} {}", step.description()),
                None => step.description().to_string(),
            },
            None,
            now,
        ),
    }
}

/// S0: the status of a machine whose deletion starts — `Terminating`,
/// lastOp Delete/Processing at S1, preservation cleared. After this the
/// phase stays frozen until the machine is gone.
pub fn terminating_status(m: &Machine, now: DateTime<Utc>) -> MachineStatus {
    let old = m.status.clone().unwrap_or_default();
    let mut s = with_phase(&old, MachinePhase::Terminating, false, now);
    s.current_status.preserve_expiry_time = None;
    s.last_operation = deletion_last_op(DeletionStep::GetVmStatus, None, None, now);
    s
}

/// The node condition set when a drain starts: `Terminating`, with reason
/// `Unhealthy` for a failed machine and `ScaleDown` otherwise. `None` when
/// the node has it already (an earlier reason is kept).
pub fn terminating_condition(
    node: &Node,
    machine_failed: bool,
    now: DateTime<Utc>,
) -> Option<NodeCondition> {
    if node_conditions(node)
        .iter()
        .any(|c| c.type_ == labels::NODE_TERMINATING)
    {
        return None;
    }
    let reason = if machine_failed {
        labels::TERMINATING_UNHEALTHY
    } else {
        labels::TERMINATING_SCALE_DOWN
    };
    Some(NodeCondition {
        type_: labels::NODE_TERMINATING.to_string(),
        status: "True".to_string(),
        reason: Some(reason.to_string()),
        message: Some("The machine controller is deleting this node's machine".to_string()),
        last_transition_time: Some(to_time(now)),
        last_heartbeat_time: Some(to_time(now)),
    })
}

// --- Drain ----------------------------------------------------------------------------

/// The facts behind the force decision of a drain.
pub fn force_input(m: &Machine, node: &Node, settings: &Settings) -> ForceInput {
    let since = |ty: &str, healthy: &str| {
        node_conditions(node)
            .iter()
            .find(|c| c.type_ == ty && c.status != healthy)
            .map(|c| {
                c.last_transition_time
                    .as_ref()
                    .map(to_chrono)
                    .unwrap_or(DateTime::<Utc>::MIN_UTC)
            })
    };
    ForceInput {
        force_label: label(&m.metadata, labels::FORCE_DELETION).is_some_and(parse_bool),
        deletion_started: m
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(to_chrono)
            .unwrap_or_else(Utc::now),
        drain_timeout: settings.drain_timeout,
        not_ready_since: since("Ready", "True"),
        readonly_since: since("ReadonlyFilesystem", "False"),
    }
}

/// The part of a pod a drain round needs.
#[derive(Clone, Debug, PartialEq)]
pub struct DrainPod {
    pub info: PodInfo,
    pub uid: String,
    /// When the pod started terminating, if it has.
    pub deleting_since: Option<DateTime<Utc>>,
    /// Its termination grace period.
    pub grace: Duration,
}

/// Default grace period of a pod that names none.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Extra time a terminating pod gets beyond its grace period before the
/// drain reports it stuck (upstream: 30s).
pub const TERMINATION_SLACK: Duration = Duration::from_secs(30);

/// A pod in the drain's form. Pods whose metadata lacks a name or UID are
/// left out (they cannot be evicted by name anyway).
pub fn drain_pod(pod: &Pod) -> Option<DrainPod> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    Some(DrainPod {
        info: PodInfo {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
            mirror: annotation(meta, "kubernetes.io/config.mirror").is_some(),
            daemonset: meta
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.controller == Some(true) && o.kind == "DaemonSet"),
            has_volumes: !pvc_names(pod).is_empty(),
            // A nil priority is 0 (upstream dereferenced it, weak point).
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
        },
        uid: meta.uid.clone()?,
        deleting_since: meta.deletion_timestamp.as_ref().map(to_chrono),
        grace: spec
            .and_then(|s| s.termination_grace_period_seconds)
            .and_then(|g| u64::try_from(g).ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_GRACE),
    })
}

/// The PersistentVolumeClaims a pod mounts.
pub fn pvc_names(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_ref())
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(|c| c.claim_name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// What the drain remembers about one pod between rounds. Kept in memory:
/// after a restart the counts start over, which only makes that drain
/// slower, never wrong (the drain timeout still forces it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EvictRecord {
    /// Evictions refused so far (429 or errors).
    pub attempts: u32,
    /// When eviction was last tried.
    pub last_attempt: Option<DateTime<Utc>>,
    /// When the eviction (or deletion) was accepted.
    pub evicted_at: Option<DateTime<Utc>>,
    /// Volume IDs to wait for after an accepted eviction (serial pods).
    pub volume_ids: Vec<String>,
    /// Grace period of the pod when it was evicted.
    pub grace: Duration,
}

/// What a drain round asks the executor to do to one pod, by UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodAction {
    /// Evict through the eviction subresource.
    Evict(String),
    /// Delete with the pod's grace period: evictions were refused too often.
    Delete(String),
    /// Delete with grace 0 (forced drain).
    ForceDelete(String),
}

/// The outcome of one drain round.
#[derive(Clone, Debug, PartialEq)]
pub enum DrainRound {
    /// Nothing is left to evict or wait for.
    Done,
    /// Act on these pods, then look again after the duration (a forced
    /// drain is done once its deletions are issued; `done` says so).
    Act {
        actions: Vec<PodAction>,
        recheck: Duration,
        done: bool,
    },
    /// Wait for terminating pods or detaching volumes.
    Wait(Duration),
    /// A pod did not go away in time.
    Failed(String),
}

/// Whether a volume ID shows up among `node.status.volumesAttached` names,
/// which carry a prefix (`kubernetes.io/csi/<driver>^<id>`). Matched as a
/// suffix after a separator, not as a regex (upstream's unescaped regex is
/// a listed weak point).
pub fn volume_attached(attached: &[String], id: &str) -> bool {
    !id.is_empty()
        && attached
            .iter()
            .any(|a| a == id || a.ends_with(&format!("^{id}")) || a.ends_with(&format!("/{id}")))
}

/// One round of a level-triggered drain (spec §2.5): evict pods without
/// volumes all at once; pods with volumes one at a time, highest priority
/// first, each waiting until its volumes leave the node's
/// `volumesAttached` (at most grace + `pv_detach_timeout`); a pod refused
/// `max_retries` times is deleted instead, after one try per
/// [`EVICTION_RETRY_INTERVAL`]; a forced drain deletes everything with
/// grace 0 and waits for nothing. Unlike upstream, no round blocks: the
/// executor acts and comes back, so a long drain never pins a worker.
pub fn drain_round(
    pods: &[DrainPod],
    records: &HashMap<String, EvictRecord>,
    attached: &[String],
    force: bool,
    max_retries: u32,
    pv_detach_timeout: Duration,
    now: DateTime<Utc>,
) -> DrainRound {
    let infos: Vec<PodInfo> = pods.iter().map(|p| p.info.clone()).collect();
    let plan: DrainPlan = drain::plan(&infos, force);
    let by_name = |i: &PodInfo| {
        pods.iter()
            .find(|p| p.info.name == i.name && p.info.namespace == i.namespace)
    };
    if force {
        let actions: Vec<PodAction> = plan
            .parallel
            .iter()
            .filter_map(by_name)
            .map(|p| PodAction::ForceDelete(p.uid.clone()))
            .collect();
        return if actions.is_empty() {
            DrainRound::Done
        } else {
            DrainRound::Act {
                actions,
                recheck: DELETION_POLL,
                done: true,
            }
        };
    }
    let elapsed = |t: DateTime<Utc>| (now - t).to_std().unwrap_or_default();
    let mut actions = Vec::new();
    let mut recheck = DELETION_POLL;
    let mut waiting = false;
    // Evicts (or, out of retries, deletes) one pod that is still there;
    // a terminating pod is waited for, and is an error once it is stuck.
    let handle = |p: &DrainPod,
                  actions: &mut Vec<PodAction>,
                  recheck: &mut Duration|
     -> Result<(), String> {
        if let Some(since) = p.deleting_since {
            if elapsed(since) > p.grace + TERMINATION_SLACK {
                return Err(format!(
                    "pod {}/{} did not terminate within {}",
                    p.info.namespace,
                    p.info.name,
                    format_duration(p.grace + TERMINATION_SLACK)
                ));
            }
            return Ok(());
        }
        let rec = records.get(&p.uid).cloned().unwrap_or_default();
        if rec.attempts >= max_retries {
            actions.push(PodAction::Delete(p.uid.clone()));
        } else {
            match rec.last_attempt.map(elapsed) {
                Some(e) if e < EVICTION_RETRY_INTERVAL => {
                    *recheck = (*recheck).max(EVICTION_RETRY_INTERVAL - e);
                }
                _ => actions.push(PodAction::Evict(p.uid.clone())),
            }
        }
        Ok(())
    };
    for i in &plan.parallel {
        if let Some(p) = by_name(i) {
            waiting = true;
            if let Err(e) = handle(p, &mut actions, &mut recheck) {
                return DrainRound::Failed(e);
            }
        }
    }
    // Serial pods: first wait for the volumes of pods already evicted.
    let present: BTreeSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
    let detaching = records.iter().any(|(uid, r)| {
        !present.contains(uid.as_str())
            && r.evicted_at
                .is_some_and(|t| elapsed(t) < r.grace + pv_detach_timeout)
            && r.volume_ids.iter().any(|v| volume_attached(attached, v))
    });
    if detaching {
        waiting = true;
    } else if let Some(p) = plan.serial.first().and_then(by_name) {
        waiting = true;
        let rec = records.get(&p.uid);
        let evicted = rec.and_then(|r| r.evicted_at);
        if p.deleting_since.is_some() || evicted.is_some() {
            // Evicted and still there: wait for it, then for its volumes.
            if let Some(since) = p.deleting_since
                && elapsed(since) > p.grace + pv_detach_timeout + TERMINATION_SLACK
            {
                return DrainRound::Failed(format!(
                    "pod {}/{} with volumes did not terminate in time",
                    p.info.namespace, p.info.name
                ));
            }
        } else if let Err(e) = handle(p, &mut actions, &mut recheck) {
            return DrainRound::Failed(e);
        }
    }
    if !actions.is_empty() {
        DrainRound::Act {
            actions,
            recheck: DELETION_POLL,
            done: false,
        }
    } else if waiting {
        DrainRound::Wait(recheck)
    } else {
        DrainRound::Done
    }
}

/// A PodDisruptionBudget that can never allow an eviction: observed,
/// selecting pods, all of them healthy, none disrupted, and still zero
/// disruptions allowed. Evictions it refuses fail the drain at once instead
/// of being retried (spec §2.5).
pub fn pdb_misconfigured(pdb: &PodDisruptionBudget) -> bool {
    let Some(s) = pdb.status.as_ref() else {
        return false;
    };
    s.observed_generation.is_some()
        && s.observed_generation == pdb.metadata.generation
        && s.expected_pods > 0
        && s.current_healthy >= s.expected_pods
        && s.disrupted_pods.as_ref().is_none_or(|d| d.is_empty())
        && s.disruptions_allowed == 0
}

/// Whether a label selector (as in PodDisruptionBudgets) matches `labels`.
/// An empty selector matches everything (policy/v1 semantics); an operator
/// this code does not know matches nothing, the safe reading for a drain.
pub fn selector_matches(sel: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let exact = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    exact
        && sel.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or(&[]);
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| values.contains(v)),
                "NotIn" => have.is_none_or(|v| !values.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

/// A machine as the meltdown limit sees it: a machine being deleted counts
/// as `Terminating` even before the controller has written that phase.
pub fn sibling(m: &Machine) -> health::Sibling {
    health::Sibling {
        phase: if m.metadata.deletion_timestamp.is_some() {
            Some(MachinePhase::Terminating)
        } else {
            m.phase()
        },
        preserved: false,
    }
}

// --- Hot update ---------------------------------------------------------------------

/// Annotation on a machine with the class `providerSpec` (JSON) its VM was
/// created with or last hot-updated to.
pub const LAST_APPLIED_PROVIDER_SPEC: &str = "machine.sapcloud.io/last-applied-provider-spec";

/// Whether the class's provider spec differs from what the VM has, and if
/// so what was applied last (`None` inside for a machine that has no
/// record). Which fields can change without a new VM is the driver's call:
/// `UpdateMachine` applies them and refuses the rest; MCM itself never
/// rolls machines out for class changes.
pub fn hot_update_needed(m: &Machine, provider_spec: &Value) -> Option<Option<Value>> {
    let applied: Option<Value> = annotation(&m.metadata, LAST_APPLIED_PROVIDER_SPEC)
        .and_then(|s| serde_json::from_str(s).ok());
    match &applied {
        Some(a) if a == provider_spec => None,
        _ => Some(applied),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::Fixture;
    use chrono::TimeZone;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus;

    fn t(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn created_at(m: Machine, s: i64) -> Machine {
        let mut m = m;
        m.metadata.creation_timestamp = Some(to_time(t(s)));
        m
    }

    #[test]
    fn settings_overrides() {
        let base = Settings::default();
        let mut m = Machine::test("m1");
        assert_eq!(base.for_machine(&m), base);
        m.spec.configuration.health_timeout = Some("3s".into());
        m.spec.configuration.drain_timeout = Some("bogus".into());
        m.spec.configuration.max_evict_retries = Some(-1);
        m.spec.configuration.node_conditions = Some("A, B".into());
        m.spec.configuration.disable_health_timeout = Some(true);
        let m = m.annotation(labels::EFFECTIVE_CREATION_TIMEOUT, "5m");
        let s = base.for_machine(&m);
        assert_eq!(s.health_timeout, Duration::from_secs(3));
        assert_eq!(s.drain_timeout, base.drain_timeout);
        assert_eq!(s.max_evict_retries, 360);
        assert_eq!(s.node_conditions, ["A", "B"]);
        assert!(s.disable_health_timeout);
        assert_eq!(s.creation_timeout, Duration::from_secs(300));
        let mut m2 = m.clone();
        m2.spec.configuration.creation_timeout = Some("7s".into());
        assert_eq!(
            base.for_machine(&m2).creation_timeout,
            Duration::from_secs(7)
        );
    }

    #[test]
    fn token_ids() {
        // hex("abcde") = 6162636465 -> first 6.
        for (name, want) in [
            ("web-abcde", "616263"),
            ("abcde", "616263"),
            ("m-xyz12", "78797a"),
            ("ab", "006162"),
            ("", "000000"),
        ] {
            assert_eq!(bootstrap_token_id(name), want, "{name}");
        }
        assert_eq!(
            bootstrap_token_secret_name("616263"),
            "bootstrap-token-616263"
        );
    }

    #[test]
    fn token_secrets_are_16_lowercase_alphanumerics() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let a = generate_token_secret(&mut rng);
        let b = generate_token_secret(&mut rng);
        assert_ne!(a, b);
        for s in [a, b] {
            assert_eq!(s.len(), 16);
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
            );
        }
        let secret = bootstrap_token_secret("616263", "0123456789abcdef", t(0), "g1,g2");
        assert_eq!(secret.type_.as_deref(), Some(BOOTSTRAP_TOKEN_TYPE));
        assert_eq!(
            token_of(&secret).as_deref(),
            Some("616263.0123456789abcdef")
        );
        assert_eq!(
            secret_value(&secret, "auth-extra-groups").as_deref(),
            Some("g1,g2")
        );
        assert_eq!(
            secret_value(&secret, "expiration").as_deref(),
            Some("2023-11-14T22:13:20Z")
        );
    }

    #[test]
    fn user_data_substitution() {
        let cases = [
            ("token=<<BOOTSTRAP_TOKEN>>", "token=id.sec"),
            ("name=<<MACHINE_NAME>>", "name=m1"),
            (
                "url?t=%3C%3CBOOTSTRAP_TOKEN%3E%3E&n=%3C%3CMACHINE_NAME%3E%3E",
                "url?t=id.sec&n=m1",
            ),
            ("<<BOOTSTRAP_TOKEN>><<BOOTSTRAP_TOKEN>>", "id.secid.sec"),
            ("nothing", "nothing"),
        ];
        for (input, want) in cases {
            assert_eq!(substitute_user_data(input, "id.sec", "m1"), want);
        }
    }

    #[test]
    fn secrets_merge_with_credentials_winning() {
        let s = |name: &str, pairs: &[(&str, &str)]| Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        };
        let a = s("a", &[("userData", "ud"), ("key", "old")]);
        let b = s("b", &[("key", "new")]);
        let m = merge_secrets(Some(&a), Some(&b));
        assert_eq!(secret_value(&m, "userData").as_deref(), Some("ud"));
        assert_eq!(secret_value(&m, "key").as_deref(), Some("new"));
        let none = merge_secrets(None, None);
        assert_eq!(secret_value(&none, "userData"), None);
        let replaced = with_user_data(&m, "filled");
        assert_eq!(
            secret_value(&replaced, "userData").as_deref(),
            Some("filled")
        );
    }

    #[test]
    fn create_errors() {
        let s = Settings {
            creation_timeout: Duration::from_secs(1200),
            resource_exhausted_retry: Duration::from_secs(600),
            ..Settings::default()
        };
        // (code, age, phase, retry)
        let cases = [
            (
                Code::ResourceExhausted,
                60,
                MachinePhase::CrashLoopBackOff,
                600,
            ),
            (Code::Unavailable, 60, MachinePhase::CrashLoopBackOff, 5),
            (
                Code::InvalidArgument,
                60,
                MachinePhase::CrashLoopBackOff,
                180,
            ),
            // Cut to the time left until the creation timeout (+1s).
            (
                Code::ResourceExhausted,
                1100,
                MachinePhase::CrashLoopBackOff,
                101,
            ),
            (Code::ResourceExhausted, 1201, MachinePhase::Failed, 600),
            (Code::Internal, 1201, MachinePhase::Failed, 180),
        ];
        for (code, age, phase, retry) in cases {
            let f = create_failure(
                code,
                "quota",
                Step::Create,
                Duration::from_secs(age),
                &s,
                t(0),
            );
            assert_eq!(f.phase, phase, "{code} {age}");
            assert_eq!(f.retry, Duration::from_secs(retry), "{code} {age}");
            assert_eq!(
                f.last_operation.description,
                "Cloud provider message - quota"
            );
            assert_eq!(f.last_operation.error_code, code.name());
            assert_eq!(f.last_operation.state, Some(MachineState::Failed));
            assert_eq!(f.last_operation.type_, Some(MachineOperationType::Create));
        }
    }

    #[test]
    fn creation_patch_sets_only_what_is_missing() {
        let m = Machine::test("m1");
        let p = creation_patch(&m, "local:///a/1", "m1", &json!({"zone": "a"})).unwrap();
        assert_eq!(p["metadata"]["labels"]["node"], "m1");
        assert_eq!(p["metadata"]["annotations"][labels::MACHINE_PRIORITY], "3");
        assert_eq!(
            p["metadata"]["annotations"][LAST_APPLIED_PROVIDER_SPEC],
            r#"{"zone":"a"}"#
        );
        assert_eq!(p["spec"]["providerID"], "local:///a/1");
        let done = Machine::test("m1")
            .with_node("m1")
            .provider_id("local:///a/1")
            .annotation(labels::MACHINE_PRIORITY, "1")
            .annotation(LAST_APPLIED_PROVIDER_SPEC, "{}");
        assert_eq!(
            creation_patch(&done, "local:///a/1", "m1", &json!({})),
            None
        );
    }

    #[test]
    fn created_status_is_pending_with_a_target_and_available_without() {
        use MachinePhase::*;
        let addr = NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.7".into(),
        };
        // (phase before, has target, phase after or None, lastOp state)
        let table = [
            (None, true, Some(Pending), MachineState::Processing),
            (
                Some(CrashLoopBackOff),
                true,
                Some(Pending),
                MachineState::Processing,
            ),
            (Some(Pending), true, None, MachineState::Processing),
            (Some(Running), true, None, MachineState::Processing),
            (Some(Failed), true, None, MachineState::Processing),
            (None, false, Some(Available), MachineState::Successful),
            (
                Some(CrashLoopBackOff),
                false,
                Some(Available),
                MachineState::Successful,
            ),
            (Some(Available), false, None, MachineState::Successful),
            (Some(Failed), false, None, MachineState::Successful),
        ];
        for (before, has_target, after, state) in table {
            let mut m = Machine::test("m1");
            if let Some(p) = before {
                m = m.with_phase(p);
            }
            let s = created_status(&m, has_target, std::slice::from_ref(&addr), t(0));
            let case = format!("{before:?} target={has_target}");
            assert_eq!(
                s.as_ref().map(|s| s.current_status.phase),
                after.map(Some),
                "{case}"
            );
            let Some(s) = s else { continue };
            assert_eq!(s.last_operation.state, Some(state), "{case}");
            assert_eq!(
                s.last_operation.type_,
                Some(MachineOperationType::Create),
                "{case}"
            );
            if has_target {
                assert_eq!(s.last_operation.description, CREATING_DESCRIPTION);
                assert!(s.current_status.timeout_active, "the creation timeout runs");
                assert!(s.addresses.is_empty(), "a node carries the addresses");
            } else {
                assert_eq!(s.last_operation.description, AVAILABLE_DESCRIPTION);
                assert!(!s.current_status.timeout_active, "nothing to time out");
                assert_eq!(s.addresses, vec![addr.clone()], "{case}");
            }
        }
    }

    #[test]
    fn a_node_name_is_needed_only_with_a_target() {
        // (providerID, node name, has target, complete)
        let table = [
            ("local:///a/1", "m1", true, true),
            ("local:///a/1", "", true, false),
            ("", "m1", true, false),
            ("local:///a/1", "", false, true),
            ("local:///a/1", "m1", false, true),
            ("", "m1", false, false),
            ("", "", false, false),
        ];
        for (pid, node, has_target, want) in table {
            assert_eq!(
                vm_ids_complete(pid, node, has_target),
                want,
                "{pid:?} {node:?} target={has_target}"
            );
        }
    }

    #[test]
    fn recheck_after_creation_waits_for_the_join_only_with_a_target() {
        let settings = Settings {
            creation_timeout: Duration::from_secs(120),
            ..Settings::default()
        };
        let m = created_at(Machine::test("m1"), 0);
        // (seconds since creation, has target, wait)
        let table = [
            (0, true, Duration::from_secs(60)),
            (100, true, Duration::from_secs(20)),
            (500, true, Duration::ZERO),
            (0, false, LONG_RETRY),
            (500, false, LONG_RETRY),
        ];
        for (at, has_target, want) in table {
            assert_eq!(
                recheck_after_creation(&m, has_target, &settings, t(at)),
                want,
                "{at}s target={has_target}"
            );
        }
    }

    #[test]
    fn live_steps_leave_nodes_alone_without_a_target() {
        use MachinePhase::*;
        let vm = |phase: Option<MachinePhase>| {
            let m = Machine::test("m1")
                .with_node("m1")
                .provider_id("local:///a/1");
            match phase {
                Some(p) => m.with_phase(p),
                None => m,
            }
        };
        let steps = |node, hot_update, create| LiveSteps {
            node,
            hot_update,
            create,
        };
        let table = [
            // (machine, has target, want)
            (Machine::test("m1"), true, steps(false, false, true)),
            (Machine::test("m1"), false, steps(false, false, true)),
            (vm(None), true, steps(false, false, true)),
            (vm(Some(CrashLoopBackOff)), true, steps(true, false, true)),
            (vm(Some(Pending)), true, steps(true, true, false)),
            (vm(Some(Running)), true, steps(true, true, false)),
            (vm(Some(Unknown)), true, steps(true, true, false)),
            (vm(Some(Failed)), true, steps(true, false, false)),
            // Without a target no node is ever looked at.
            (vm(Some(Available)), false, steps(false, true, false)),
            (vm(Some(Running)), false, steps(false, true, false)),
            (vm(Some(Pending)), false, steps(false, true, false)),
            (vm(Some(CrashLoopBackOff)), false, steps(false, false, true)),
            (vm(Some(Failed)), false, steps(false, false, false)),
            // A machine with a phase but no VM yet (a failed creation).
            (
                Machine::test("m1").with_phase(CrashLoopBackOff),
                false,
                steps(false, false, true),
            ),
        ];
        for (m, has_target, want) in table {
            assert_eq!(
                live_steps(&m, has_target),
                want,
                "{:?} node={:?} target={has_target}",
                m.phase(),
                node_name(&m)
            );
        }
    }

    #[test]
    fn userdata_without_a_target_carries_no_token() {
        let out = substitute_user_data("t=<<BOOTSTRAP_TOKEN>> n=<<MACHINE_NAME>>", "", "m1");
        assert_eq!(out, "t= n=m1");
    }

    fn node(conds: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus {
                conditions: Some(
                    conds
                        .iter()
                        .map(|(ty, st)| NodeCondition {
                            type_: ty.to_string(),
                            status: st.to_string(),
                            last_transition_time: Some(to_time(t(0))),
                            ..NodeCondition::default()
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
        }
    }

    #[test]
    fn health_statuses() {
        use MachinePhase::*;
        let s = Settings::default();
        let ready = node(&[("Ready", "True")]);
        let m = created_at(Machine::test("m1").with_phase(Pending), 0);
        let st = health_status(
            &m,
            &Verdict::Running { first_join: true },
            Some(&ready),
            &s,
            t(90),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Running));
        assert_eq!(st.current_status.last_update_time, Some(to_time(t(90))));
        assert_eq!(
            st.last_operation.description,
            "Machine m1 successfully joined the cluster in 1m30s"
        );
        assert_eq!(st.conditions.len(), 1);

        // A wait only copies conditions, and only when they changed.
        let mut running = m.clone().with_phase(Running);
        running.status.as_mut().unwrap().conditions = st.conditions.clone();
        assert_eq!(
            health_status(
                &running,
                &Verdict::Wait(Duration::ZERO),
                Some(&ready),
                &s,
                t(99)
            ),
            None
        );
        let sick = node(&[("Ready", "False")]);
        let st = health_status(
            &running,
            &Verdict::Unknown { node_gone: false },
            Some(&sick),
            &s,
            t(100),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Unknown));
        assert!(st.current_status.timeout_active);
        assert!(st.last_operation.description.contains("Ready=False"));
        assert_eq!(st.conditions[0].status, "False");

        let st = health_status(
            &running,
            &Verdict::FailedHealthTimeout,
            Some(&sick),
            &s,
            t(1),
        )
        .unwrap();
        assert_eq!(st.current_status.phase, Some(Failed));
        assert_eq!(
            st.last_operation.type_,
            Some(MachineOperationType::HealthCheck)
        );
        let st = health_status(&m, &Verdict::FailedCreationTimeout, None, &s, t(1)).unwrap();
        assert_eq!(
            st.last_operation.description,
            "Machine m1 failed to join the cluster in 20m0s"
        );
    }

    #[test]
    fn phase_clock_moves_only_on_phase_change() {
        let mut m = Machine::test("m1").with_phase(MachinePhase::Unknown);
        m.status.as_mut().unwrap().current_status.last_update_time = Some(to_time(t(5)));
        let s = with_phase(
            m.status.as_ref().unwrap(),
            MachinePhase::Unknown,
            true,
            t(50),
        );
        assert_eq!(s.current_status.last_update_time, Some(to_time(t(5))));
        let s = with_phase(
            m.status.as_ref().unwrap(),
            MachinePhase::Failed,
            false,
            t(50),
        );
        assert_eq!(s.current_status.last_update_time, Some(to_time(t(50))));
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint {
            key: key.into(),
            value: Some(value.into()),
            effect: effect.into(),
            time_added: None,
        }
    }

    fn template(labels: &[(&str, &str)], taints: Vec<Taint>) -> NodeTemplateSpec {
        let mut t = NodeTemplateSpec::default();
        t.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        t.spec.taints = Some(taints);
        t
    }

    #[test]
    fn node_template_sync() {
        let mut n = node(&[]);
        n.metadata.labels = Some(BTreeMap::from([
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "1".to_string()),
            ("foreign".to_string(), "x".to_string()),
        ]));
        n.spec.as_mut().unwrap().taints = Some(vec![
            taint("t1", "v", "NoSchedule"),
            taint("t2", "v", "NoSchedule"),
            taint("foreign", "v", "NoExecute"),
        ]);
        let applied = template(
            &[("a", "1"), ("b", "1")],
            vec![
                taint("t1", "v", "NoSchedule"),
                taint("t2", "v", "NoSchedule"),
            ],
        );
        // b and t2 dropped from the template, a changed, c and t3 added.
        let want = template(
            &[("a", "2"), ("c", "3")],
            vec![
                taint("t1", "v", "NoSchedule"),
                taint("t3", "w", "NoExecute"),
            ],
        );
        let p = node_template_patch(&n, &want, Some(&applied)).unwrap();
        assert_eq!(
            p["metadata"]["labels"],
            json!({"a": "2", "b": null, "c": "3"})
        );
        let taints: Vec<Taint> = serde_json::from_value(p["spec"]["taints"].clone()).unwrap();
        let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["t1", "foreign", "t3"]);
        let record: NodeTemplateSpec = serde_json::from_str(
            p["metadata"]["annotations"][labels::LAST_APPLIED_ANNO_LABELS_TAINTS]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(record, applied_template(&want));

        // Without a record, nothing foreign is removed.
        let p = node_template_patch(&n, &want, None).unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"a": "2", "c": "3"}));

        // In sync: no patch.
        let mut synced = n.clone();
        synced.metadata.labels = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
        synced.spec.as_mut().unwrap().taints = Some(vec![taint("t1", "v", "NoSchedule")]);
        let t = template(&[("a", "1")], vec![taint("t1", "v", "NoSchedule")]);
        synced.metadata.annotations = Some(BTreeMap::from([(
            labels::LAST_APPLIED_ANNO_LABELS_TAINTS.to_string(),
            serde_json::to_string(&applied_template(&t)).unwrap(),
        )]));
        assert_eq!(
            node_template_patch(&synced, &t, last_applied_template(&synced).as_ref()),
            None
        );
        // An empty template on an untouched node needs nothing either.
        assert_eq!(
            node_template_patch(&node(&[]), &NodeTemplateSpec::default(), None),
            None
        );
    }

    #[test]
    fn node_sync_adds_finalizer_and_machine_label_guarded_by_version() {
        let n = node(&[]);
        let p = node_sync_patch(&n, "m1", &NodeTemplateSpec::default(), true).unwrap();
        assert_eq!(p["metadata"]["labels"][labels::NODE_MACHINE_NAME], "m1");
        assert_eq!(p["metadata"]["finalizers"], json!([labels::NODE_FINALIZER]));
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        let p = node_sync_patch(&n, "m1", &NodeTemplateSpec::default(), false).unwrap();
        assert!(p["metadata"].get("finalizers").is_none());
        let mut done = n.clone();
        done.metadata.labels = Some(BTreeMap::from([(
            labels::NODE_MACHINE_NAME.to_string(),
            "m1".to_string(),
        )]));
        done.metadata.finalizers = Some(vec![labels::NODE_FINALIZER.to_string()]);
        assert_eq!(
            node_sync_patch(&done, "m1", &NodeTemplateSpec::default(), true),
            None
        );
    }

    #[test]
    fn deletion_steps_round_trip() {
        for s in DeletionStep::ALL {
            assert_eq!(DeletionStep::parse(s.as_str()), Some(s));
        }
        assert_eq!(DeletionStep::parse("Initiate node drain"), None);
        let m = Machine::test("m1").annotation(DELETION_STEP, "S4");
        assert_eq!(DeletionStep::of(&m), Some(DeletionStep::DeleteVm));
        assert_eq!(DeletionStep::of(&Machine::test("m1")), None);
    }

    #[test]
    fn deletion_state_machine() {
        use DeletionStep::*;
        use StepFact::*;
        let rx = Duration::from_secs(600);
        let nx = |s| Transition::Next {
            step: s,
            note: None,
        };
        let failed = |secs: u64, code: Option<Code>| {
            move |t: &Transition| {
                matches!(t, Transition::Stay { after, failure: Some((_, c)) }
                    if *after == Duration::from_secs(secs) && *c == code)
            }
        };
        let status = |code| StatusFailed {
            code,
            message: "m".into(),
        };
        let delete = |code| VmDeleteAnswered {
            code,
            message: "m".into(),
        };
        // (step, fact, expected next)
        let table: Vec<(DeletionStep, StepFact, Transition)> = vec![
            (GetVmStatus, NodeKnown, nx(DrainNode)),
            (GetVmStatus, status(Code::NotFound), nx(DrainNode)),
            (GetVmStatus, status(Code::Unimplemented), nx(DrainNode)),
            (GetVmStatus, status(Code::Uninitialized), nx(DrainNode)),
            (DrainNode, NodeGone, nx(DeleteVm)),
            (
                DrainNode,
                Drained { forced: false },
                Transition::Next {
                    step: DeleteVm,
                    note: Some("Drain successful."),
                },
            ),
            (
                DrainNode,
                Drained { forced: true },
                Transition::Next {
                    step: DeleteVolumeAttachments,
                    note: Some("Force Drain successful."),
                },
            ),
            (
                DrainNode,
                DrainFailed {
                    forced: true,
                    message: "x".into(),
                },
                nx(DeleteVolumeAttachments),
            ),
            (
                DrainNode,
                Draining(Duration::from_secs(2)),
                Transition::Stay {
                    after: Duration::from_secs(2),
                    failure: None,
                },
            ),
            (DeleteVolumeAttachments, NodeGone, nx(DeleteVm)),
            (DeleteVolumeAttachments, VolumesDetached, nx(DeleteVm)),
            (
                DeleteVolumeAttachments,
                VolumeAttachmentsLeft(2),
                Transition::Stay {
                    after: DELETION_POLL,
                    failure: None,
                },
            ),
            (DeleteVm, delete(Code::Ok), nx(DeleteNode)),
            (DeleteVm, delete(Code::NotFound), nx(DeleteNode)),
            (DeleteNode, NodeDeleted, nx(RemoveFinalizer)),
            (RemoveFinalizer, FinalizerRemoved, Transition::Finished),
            // A fact from another step changes nothing.
            (
                DeleteVm,
                NodeKnown,
                Transition::Stay {
                    after: SHORT_RETRY,
                    failure: None,
                },
            ),
        ];
        for (step, fact, want) in table {
            assert_eq!(
                deletion_transition(step, &fact, rx),
                want,
                "{step:?} {fact:?}"
            );
        }
        // Failures: (step, fact, retry seconds, code)
        let failures: Vec<(DeletionStep, StepFact, u64, Option<Code>)> = vec![
            (
                GetVmStatus,
                status(Code::Unavailable),
                5,
                Some(Code::Unavailable),
            ),
            (
                GetVmStatus,
                status(Code::Internal),
                180,
                Some(Code::Internal),
            ),
            (
                DrainNode,
                DrainFailed {
                    forced: false,
                    message: "pdb".into(),
                },
                5,
                None,
            ),
            (
                DeleteVm,
                delete(Code::Unavailable),
                5,
                Some(Code::Unavailable),
            ),
            (DeleteVm, delete(Code::Aborted), 5, Some(Code::Aborted)),
            (
                DeleteVm,
                delete(Code::PermissionDenied),
                600,
                Some(Code::PermissionDenied),
            ),
        ];
        for (step, fact, secs, code) in failures {
            let got = deletion_transition(step, &fact, rx);
            assert!(failed(secs, code)(&got), "{step:?} {fact:?}: {got:?}");
        }
    }

    #[test]
    fn deletion_without_a_vm_or_a_class() {
        use DeletionStep::*;
        use StepFact::*;
        let rx = Duration::from_secs(600);
        // (step, fact, expected)
        let table = [
            (GetVmStatus, NoVm, next(DrainNode)),
            (
                DeleteVm,
                NoVm,
                Transition::Next {
                    step: DeleteNode,
                    note: Some("No VM to delete."),
                },
            ),
            // A fact that does not belong to the step changes nothing.
            (
                DrainNode,
                NoVm,
                Transition::Stay {
                    after: SHORT_RETRY,
                    failure: None,
                },
            ),
        ];
        for (step, fact, want) in table {
            assert_eq!(deletion_transition(step, &fact, rx), want, "{step:?}");
        }
        for step in [GetVmStatus, DeleteVm] {
            let fact = ClassMissing {
                message: "re-create it".into(),
            };
            assert_eq!(
                deletion_transition(step, &fact, rx),
                Transition::Stay {
                    after: MEDIUM_RETRY,
                    failure: Some(("re-create it".into(), None)),
                },
                "{step:?}"
            );
        }
    }

    #[test]
    fn deletion_classes() {
        let class = MachineClass::test("test-class").with_uid("c1");
        let known = KnownClass::of(&MachineClass {
            provider_spec: json!({"zone": "a"}),
            ..MachineClass::test("test-class")
        });
        let recorded =
            |m: Machine| m.annotation(LAST_KNOWN_CLASS, &serde_json::to_string(&known).unwrap());
        let use_ = |c: &MachineClass, last_known| DeletionClass::Use {
            class: Box::new(c.clone()),
            last_known,
        };
        let rebuilt = known.to_class("test-class", "default");
        assert_eq!(rebuilt.provider_spec, json!({"zone": "a"}));
        assert_eq!(rebuilt.secret_ref, class.secret_ref);
        let missing = |d: &DeletionClass, what: &str| {
            matches!(d, DeletionClass::Missing(m)
                if m.contains("MachineClass default/test-class not found")
                    && m.contains("re-create MachineClass test-class")
                    && m.contains(what))
        };
        let bare = Machine::test("m1");
        let with_vm = Machine::test("m1").provider_id("local:///a/1");
        // (machine, class exists, expected)
        type Check<'a> = Box<dyn Fn(&DeletionClass) -> bool + 'a>;
        let table: Vec<(Machine, bool, Check)> = vec![
            // The class is there: always the driver, VM or not.
            (bare.clone(), true, Box::new(|d| *d == use_(&class, false))),
            (
                with_vm.clone(),
                true,
                Box::new(|d| *d == use_(&class, false)),
            ),
            // Gone: the record, whether or not a providerID was written.
            (
                recorded(bare.clone()),
                false,
                Box::new(|d| *d == use_(&rebuilt, true)),
            ),
            (
                recorded(with_vm.clone()),
                false,
                Box::new(|d| *d == use_(&rebuilt, true)),
            ),
            // Never recorded and no providerID: the driver was never asked.
            (bare.clone(), false, Box::new(|d| *d == DeletionClass::NoVm)),
            // A VM and nothing to delete it with: say so.
            (
                with_vm.clone(),
                false,
                Box::new(|d| missing(d, "VM local:///a/1 of machine m1")),
            ),
            // An unreadable record means the driver was asked.
            (
                bare.annotation(LAST_KNOWN_CLASS, "{not json"),
                false,
                Box::new(|d| missing(d, "unreadable")),
            ),
        ];
        for (i, (m, exists, check)) in table.into_iter().enumerate() {
            let got = deletion_class(&m, exists.then(|| class.clone()));
            assert!(check(&got), "case {i}: {got:?}");
        }
    }

    #[test]
    fn the_class_is_recorded_once_and_when_it_changes() {
        let class = MachineClass::test("test-class");
        let m = Machine::test("m1");
        let p = known_class_patch(&m, &class).unwrap();
        let text = p["metadata"]["annotations"][LAST_KNOWN_CLASS]
            .as_str()
            .unwrap()
            .to_string();
        let recorded: KnownClass = serde_json::from_str(&text).unwrap();
        assert_eq!(recorded, KnownClass::of(&class));
        assert_eq!(recorded.provider, "local");
        let m = m.annotation(LAST_KNOWN_CLASS, &text);
        assert_eq!(known_class_patch(&m, &class), None);
        // Finalizers and other metadata are not part of the record.
        let with_meta = class.clone().finalizer(labels::MCM_FINALIZER);
        assert_eq!(known_class_patch(&m, &with_meta), None);
        let mut changed = class;
        changed.provider_spec = json!({"tags": {"a": "1"}});
        assert!(known_class_patch(&m, &changed).is_some());
    }

    #[test]
    fn class_states_and_problems() {
        let ready = MachineClass::test("c").finalizer(labels::MCM_FINALIZER);
        let mut deleting = ready.clone();
        deleting.metadata.deletion_timestamp = Some(to_time(t(0)));
        // (class, userData, state)
        let table = [
            (None, true, ClassState::Missing),
            (Some(&ready), true, ClassState::Ready),
            (Some(&ready), false, ClassState::NoUserData),
            (Some(&deleting), true, ClassState::Deleting),
            (
                Some(&MachineClass::test("c")),
                true,
                ClassState::NoFinalizer,
            ),
        ];
        for (class, user_data, want) in table {
            assert_eq!(class_state(class, user_data), want, "{want:?}");
        }
        assert_eq!(class_problem(ClassState::Ready, "ns", "c"), None);
        assert_eq!(class_problem(ClassState::NoFinalizer, "ns", "c"), None);
        let missing = class_problem(ClassState::Missing, "ns", "c").unwrap();
        assert!(
            missing.starts_with("MachineClass ns/c not found: create it"),
            "{missing}"
        );
        let deleting = class_problem(ClassState::Deleting, "ns", "c").unwrap();
        assert!(deleting.contains("is being deleted"), "{deleting}");
        let no_ud = class_problem(ClassState::NoUserData, "ns", "c").unwrap();
        assert!(no_ud.contains("have no userData"), "{no_ud}");
    }

    #[test]
    fn stale_class_problems_are_cleared_once_the_class_is_back() {
        let failed_op = |d: &str| LastOperation {
            description: d.into(),
            state: Some(MachineState::Failed),
            type_: Some(MachineOperationType::Create),
            ..LastOperation::default()
        };
        let with_op = |m: Machine, d: &str| {
            let mut m = m;
            m.status
                .get_or_insert_with(MachineStatus::default)
                .last_operation = failed_op(d);
            m
        };
        let legacy = "MachineClass default/test-class not found";
        let current = class_problem(ClassState::Missing, "default", "test-class").unwrap();
        let running = Machine::test("m1").provider_id("local:///a/1").running();
        let pending = Machine::test("m1")
            .provider_id("local:///a/1")
            .with_phase(MachinePhase::Pending);
        // (machine, expected lastOperation description and state)
        let table = [
            (
                with_op(running.clone(), legacy),
                Some((
                    "MachineClass default/test-class is available again".to_string(),
                    MachineState::Successful,
                )),
            ),
            (
                with_op(running.clone(), &current),
                Some((
                    class_available_description("default", "test-class"),
                    MachineState::Successful,
                )),
            ),
            (
                with_op(pending.clone(), legacy),
                Some((CREATING_DESCRIPTION.to_string(), MachineState::Processing)),
            ),
            // Not a class problem: left alone.
            (with_op(running.clone(), "Cloud provider message - x"), None),
            // Another class's problem: left alone.
            (
                with_op(running.clone(), "MachineClass default/other not found"),
                None,
            ),
            // No VM yet: the creation flow overwrites it.
            (
                with_op(Machine::test("m1").class("test-class"), legacy),
                None,
            ),
            (
                with_op(
                    Machine::test("m1")
                        .provider_id("local:///a/1")
                        .with_phase(MachinePhase::CrashLoopBackOff),
                    legacy,
                ),
                None,
            ),
            (running, None),
        ];
        for (i, (m, want)) in table.into_iter().enumerate() {
            let got = class_recovered_status(&m, t(5)).map(|s| {
                (
                    s.last_operation.description,
                    s.last_operation.state.unwrap(),
                )
            });
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn deletion_skips_target_steps_without_a_target() {
        use DeletionStep::*;
        let nx = |step| Some(Transition::Next { step, note: None });
        // (step, has target, transition)
        let table = [
            (GetVmStatus, false, nx(DeleteVm)),
            (DrainNode, false, nx(DeleteVm)),
            (DeleteVolumeAttachments, false, nx(DeleteVm)),
            (DeleteVm, false, None),
            (DeleteNode, false, nx(RemoveFinalizer)),
            (RemoveFinalizer, false, None),
        ];
        for (step, has_target, want) in table {
            assert_eq!(skip_without_target(step, has_target), want, "{step:?}");
        }
        for step in DeletionStep::ALL {
            assert_eq!(
                skip_without_target(step, true),
                None,
                "{step:?} with a target"
            );
        }
    }

    #[test]
    fn deletion_descriptions() {
        let op = deletion_last_op(
            DeletionStep::DeleteVm,
            Some("Drain successful."),
            None,
            t(0),
        );
        assert_eq!(op.description, "Drain successful. Initiate VM deletion");
        assert_eq!(op.state, Some(MachineState::Processing));
        let op = deletion_last_op(
            DeletionStep::DrainNode,
            None,
            Some(("Drain failed due to - x", None)),
            t(0),
        );
        assert_eq!(
            op.description,
            "Drain failed due to - x. Initiate node drain"
        );
        assert_eq!(op.state, Some(MachineState::Failed));
        let m = Machine::test("m1").running();
        let s = terminating_status(&m, t(3));
        assert_eq!(s.current_status.phase, Some(MachinePhase::Terminating));
        assert_eq!(
            s.last_operation.description,
            "Set machine status to termination. Now, getting VM Status"
        );
        assert_eq!(s.last_operation.type_, Some(MachineOperationType::Delete));
    }

    #[test]
    fn terminating_condition_reason_and_kept() {
        let n = node(&[("Ready", "True")]);
        let c = terminating_condition(&n, true, t(0)).unwrap();
        assert_eq!(c.reason.as_deref(), Some("Unhealthy"));
        let c = terminating_condition(&n, false, t(0)).unwrap();
        assert_eq!(c.reason.as_deref(), Some("ScaleDown"));
        let n = node(&[("Terminating", "True")]);
        assert_eq!(terminating_condition(&n, false, t(0)), None);
    }

    #[test]
    fn force_inputs_from_labels_and_conditions() {
        let mut m = Machine::test("m1").label(labels::FORCE_DELETION, "True");
        m.metadata.deletion_timestamp = Some(to_time(t(10)));
        let n = node(&[("Ready", "Unknown"), ("ReadonlyFilesystem", "False")]);
        let f = force_input(&m, &n, &Settings::default());
        assert!(f.force_label);
        assert_eq!(f.deletion_started, t(10));
        assert_eq!(f.not_ready_since, Some(t(0)));
        assert_eq!(f.readonly_since, None);
        for (v, want) in [
            ("1", true),
            ("true", true),
            ("yes", false),
            ("False", false),
        ] {
            assert_eq!(parse_bool(v), want, "{v}");
        }
    }

    fn dpod(name: &str, volumes: bool, priority: i32) -> DrainPod {
        DrainPod {
            info: PodInfo {
                namespace: "default".into(),
                name: name.into(),
                mirror: false,
                daemonset: false,
                has_volumes: volumes,
                priority,
            },
            uid: format!("uid-{name}"),
            deleting_since: None,
            grace: Duration::from_secs(30),
        }
    }

    #[test]
    fn drain_rounds() {
        let none = HashMap::new();
        let d = Duration::from_secs(120);
        let uid = |n: &str| format!("uid-{n}");
        // Nothing on the node.
        assert_eq!(
            drain_round(&[], &none, &[], false, 5, d, t(0)),
            DrainRound::Done
        );
        // Stateless pods together, the higher-priority volume pod first.
        let pods = vec![
            dpod("web", false, 0),
            dpod("db-low", true, 1),
            dpod("db-high", true, 9),
        ];
        assert_eq!(
            drain_round(&pods, &none, &[], false, 5, d, t(0)),
            DrainRound::Act {
                actions: vec![
                    PodAction::Evict(uid("web")),
                    PodAction::Evict(uid("db-high"))
                ],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // Refused 10s ago: wait out the retry interval.
        let refused = HashMap::from([(
            uid("web"),
            EvictRecord {
                attempts: 1,
                last_attempt: Some(t(0)),
                ..EvictRecord::default()
            },
        )]);
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 5, d, t(10)),
            DrainRound::Wait(Duration::from_secs(10))
        );
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 5, d, t(20)),
            DrainRound::Act {
                actions: vec![PodAction::Evict(uid("web"))],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // Out of retries: deleted.
        assert_eq!(
            drain_round(&pods[..1], &refused, &[], false, 1, d, t(20)),
            DrainRound::Act {
                actions: vec![PodAction::Delete(uid("web"))],
                recheck: DELETION_POLL,
                done: false
            }
        );
        // db-high evicted and gone, its volume still attached: db-low waits.
        let evicted = HashMap::from([(
            uid("db-high"),
            EvictRecord {
                evicted_at: Some(t(0)),
                volume_ids: vec!["vol-1".into()],
                grace: Duration::from_secs(30),
                ..EvictRecord::default()
            },
        )]);
        let attached = vec!["kubernetes.io/csi/local^vol-1".to_string()];
        let rest = vec![dpod("db-low", true, 1)];
        assert_eq!(
            drain_round(&rest, &evicted, &attached, false, 5, d, t(5)),
            DrainRound::Wait(DELETION_POLL)
        );
        // Detached, or the detach timeout passed: next.
        for (attached, now) in [(vec![], 5), (attached.clone(), 151)] {
            assert_eq!(
                drain_round(&rest, &evicted, &attached, false, 5, d, t(now)),
                DrainRound::Act {
                    actions: vec![PodAction::Evict(uid("db-low"))],
                    recheck: DELETION_POLL,
                    done: false
                }
            );
        }
        // A terminating pod is waited for, until it is stuck.
        let mut term = dpod("web", false, 0);
        term.deleting_since = Some(t(0));
        assert_eq!(
            drain_round(std::slice::from_ref(&term), &none, &[], false, 5, d, t(30)),
            DrainRound::Wait(DELETION_POLL)
        );
        assert!(matches!(
            drain_round(&[term], &none, &[], false, 5, d, t(61)),
            DrainRound::Failed(_)
        ));
        // Forced: everything deleted with grace 0, nothing waited for;
        // DaemonSet and mirror pods stay.
        let mut ds = dpod("ds", false, 0);
        ds.info.daemonset = true;
        let mut all = pods.clone();
        all.push(ds.clone());
        match drain_round(&all, &none, &attached, true, 5, d, t(0)) {
            DrainRound::Act { actions, done, .. } => {
                assert!(done);
                assert_eq!(actions.len(), 3);
                assert!(
                    actions
                        .iter()
                        .all(|a| matches!(a, PodAction::ForceDelete(_)))
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            drain_round(&[ds], &none, &[], false, 5, d, t(0)),
            DrainRound::Done
        );
    }

    #[test]
    fn volume_matching() {
        let attached = vec![
            "kubernetes.io/csi/ebs^vol-12".to_string(),
            "kubernetes.io/host-path//data/x".to_string(),
        ];
        for (id, want) in [
            ("vol-12", true),
            ("vol-1", false),
            ("/data/x", true),
            ("vol.12", false),
            ("", false),
        ] {
            assert_eq!(volume_attached(&attached, id), want, "{id}");
        }
    }

    #[test]
    fn misconfigured_pdbs() {
        let pdb = |gen_seen: i64, expected: i32, healthy: i32, allowed: i32| PodDisruptionBudget {
            metadata: ObjectMeta {
                generation: Some(2),
                ..ObjectMeta::default()
            },
            status: Some(PodDisruptionBudgetStatus {
                observed_generation: Some(gen_seen),
                expected_pods: expected,
                current_healthy: healthy,
                desired_healthy: expected,
                disruptions_allowed: allowed,
                ..PodDisruptionBudgetStatus::default()
            }),
            ..PodDisruptionBudget::default()
        };
        assert!(pdb_misconfigured(&pdb(2, 3, 3, 0)));
        assert!(!pdb_misconfigured(&pdb(1, 3, 3, 0)), "not observed yet");
        assert!(!pdb_misconfigured(&pdb(2, 3, 2, 0)), "a pod is unhealthy");
        assert!(!pdb_misconfigured(&pdb(2, 0, 0, 0)), "selects nothing");
        assert!(!pdb_misconfigured(&pdb(2, 3, 3, 1)), "allows one");
    }

    #[test]
    fn selectors() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let labels = BTreeMap::from([("app".to_string(), "db".to_string())]);
        let req = |op: &str, values: &[&str]| LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
        };
        assert!(selector_matches(&LabelSelector::default(), &labels));
        let exact = LabelSelector {
            match_labels: Some(labels.clone()),
            match_expressions: None,
        };
        assert!(selector_matches(&exact, &labels));
        assert!(!selector_matches(&exact, &BTreeMap::new()));
        for (op, values, want) in [
            ("In", &["db", "web"][..], true),
            ("In", &["web"][..], false),
            ("NotIn", &["web"][..], true),
            ("Exists", &[][..], true),
            ("DoesNotExist", &[][..], false),
            ("Bogus", &[][..], false),
        ] {
            assert_eq!(selector_matches(&req(op, values), &labels), want, "{op}");
        }
    }

    #[test]
    fn siblings_being_deleted_count_as_terminating() {
        let mut m = Machine::test("m1").with_phase(MachinePhase::Failed);
        assert_eq!(sibling(&m).phase, Some(MachinePhase::Failed));
        m.metadata.deletion_timestamp = Some(to_time(t(0)));
        assert_eq!(sibling(&m).phase, Some(MachinePhase::Terminating));
    }

    #[test]
    fn hot_updates() {
        let spec = json!({"tags": {"a": "1"}});
        let m = Machine::test("m1");
        assert_eq!(hot_update_needed(&m, &spec), Some(None));
        let m = m.annotation(LAST_APPLIED_PROVIDER_SPEC, r#"{"tags":{"a":"1"}}"#);
        assert_eq!(hot_update_needed(&m, &spec), None);
        let changed = json!({"tags": {"a": "2"}});
        assert_eq!(
            hot_update_needed(&m, &changed),
            Some(Some(json!({"tags": {"a": "1"}})))
        );
    }

    #[test]
    fn drain_pods_from_api_pods() {
        use k8s_openapi::api::core::v1::{PersistentVolumeClaimVolumeSource, PodSpec, Volume};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                owner_references: Some(vec![OwnerReference {
                    kind: "DaemonSet".into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                volumes: Some(vec![Volume {
                    name: "v".into(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: "c".into(),
                        read_only: None,
                    }),
                    ..Volume::default()
                }]),
                termination_grace_period_seconds: Some(5),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let d = drain_pod(&pod).unwrap();
        assert!(d.info.daemonset && d.info.has_volumes);
        assert_eq!(d.info.priority, 0);
        assert_eq!(d.grace, Duration::from_secs(5));
        assert_eq!(pvc_names(&pod), ["c"]);
        pod.metadata.uid = None;
        assert_eq!(drain_pod(&pod), None);
    }
}
