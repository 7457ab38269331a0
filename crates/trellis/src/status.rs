//! `trellis status` (alias `describe`): the machine objects of a namespace
//! as a tree in the style of `clusterctl describe cluster` —
//! MachineDeployments, their MachineSets, their Machines — with each
//! machine's phase, node, age and last operation, coloured on a terminal.
//!
//! Rendering is a pure function of a [`Snapshot`] and the time, so the tree
//! is tested without an API server; the command only lists the objects
//! (once, or every second with `--watch`).

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::io::{IsTerminal, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use api::{Machine, MachineDeployment, MachineSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    connection: Connection,
    /// The namespace of the machine objects.
    #[arg(short, long, default_value = "default")]
    namespace: String,
    /// Every namespace.
    #[arg(short = 'A', long)]
    all_namespaces: bool,
    /// Keep redrawing the tree every second until interrupted.
    #[arg(short, long)]
    watch: bool,
}

/// Which cluster a client command talks to, in this order: `--kubeconfig`,
/// else `$KUBECONFIG`, else the admin kubeconfig that `trellis up` writes
/// in its data directory (`--data-dir`, `TRELLIS_DATA_DIR`, or the same
/// default as `up`). Flatten it into any command that defaults to trellis's
/// own server.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct Connection {
    /// The kubeconfig to use; default `$KUBECONFIG`, else DIR/admin.kubeconfig
    /// of --data-dir.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The data directory of the `trellis up` (or `server`) to talk to, whose
    /// admin.kubeconfig is used when neither --kubeconfig nor $KUBECONFIG is
    /// set [default: $XDG_DATA_HOME/trellis or ~/.local/share/trellis].
    #[arg(long, env = "TRELLIS_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
}

/// Where the kubeconfig in use was named, for messages that say which file
/// was read and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    DataDir,
}

/// The kubeconfig a [`Connection`] resolved to: one file, or the list
/// `$KUBECONFIG` may hold (merged as kubectl does).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kubeconfig {
    pub paths: Vec<PathBuf>,
    pub origin: Origin,
}

impl Kubeconfig {
    /// "the kubeconfig FILE (from $KUBECONFIG)" and the like.
    pub fn describe(&self) -> String {
        let paths = self
            .paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        match self.origin {
            Origin::Flag => format!("the kubeconfig {paths}"),
            Origin::Env => format!("the kubeconfig {paths} (from $KUBECONFIG)"),
            Origin::DataDir => format!("the admin kubeconfig {paths}"),
        }
    }
}

impl Connection {
    /// The kubeconfig to use, given `$KUBECONFIG` and the default data
    /// directory. Empty values count as unset, as kubectl has it.
    pub fn resolve(
        &self,
        env_kubeconfig: Option<OsString>,
        default_data_dir: impl FnOnce() -> PathBuf,
    ) -> Kubeconfig {
        if let Some(path) = self
            .kubeconfig
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
        {
            return Kubeconfig {
                paths: vec![path],
                origin: Origin::Flag,
            };
        }
        let from_env: Vec<PathBuf> = env_kubeconfig
            .map(|v| {
                std::env::split_paths(&v)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !from_env.is_empty() {
            return Kubeconfig {
                paths: from_env,
                origin: Origin::Env,
            };
        }
        let dir = self
            .data_dir
            .clone()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(default_data_dir);
        Kubeconfig {
            paths: vec![dir.join("admin.kubeconfig")],
            origin: Origin::DataDir,
        }
    }

    /// A client for the resolved kubeconfig. Every error is one sentence
    /// naming the file and what to do; kube's own messages (which quote
    /// paths twice) are not shown.
    pub async fn connect(&self) -> anyhow::Result<Connected> {
        let kubeconfig = self.resolve(std::env::var_os("KUBECONFIG"), crate::default_data_dir);
        let config = read_kubeconfig(&kubeconfig)?;
        let unusable = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!("{} is not usable: {e}", kubeconfig.describe())
        };
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .map_err(|e| unusable(&e))?;
        let url = config.cluster_url.to_string();
        let url = url.trim_end_matches('/').to_string();
        let client = kube::Client::try_from(config).map_err(|e| unusable(&e))?;
        Ok(Connected {
            client,
            url,
            kubeconfig,
        })
    }
}

/// A client, with what its errors should name: the server's URL and the
/// kubeconfig that led there.
pub struct Connected {
    pub client: kube::Client,
    pub url: String,
    pub kubeconfig: Kubeconfig,
}

impl Connected {
    /// The one sentence [`unreachable`] says when `e` is a request that
    /// never got an answer from the server.
    pub fn unreachable(&self, e: &anyhow::Error) -> Option<String> {
        let reason = transport_failure(e)?;
        Some(unreachable(
            &self.kubeconfig,
            &self.url,
            &reason,
            &invocation(),
        ))
    }

    /// `e` as that sentence when the server did not answer (the library's
    /// error chain then only at debug level); any other error as it is.
    pub fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        tracing::debug!(error = format!("{e:#}"), "request failed");
        match self.unreachable(&e) {
            Some(sentence) => anyhow::anyhow!(sentence),
            None => e,
        }
    }
}

/// Reads (and merges) the kubeconfig files. Missing files of a
/// `$KUBECONFIG` list are skipped as kubectl skips them; a missing single
/// file says how to get one.
fn read_kubeconfig(kc: &Kubeconfig) -> anyhow::Result<kube::config::Kubeconfig> {
    use kube::config::KubeconfigError;
    let mut merged: Option<kube::config::Kubeconfig> = None;
    for path in &kc.paths {
        let one = match kube::config::Kubeconfig::read_from(path) {
            Ok(one) => one,
            Err(KubeconfigError::ReadConfig(e, _))
                if e.kind() == std::io::ErrorKind::NotFound && kc.paths.len() > 1 =>
            {
                continue;
            }
            Err(KubeconfigError::ReadConfig(e, _)) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("{}", missing_kubeconfig(kc, &invocation()))
            }
            Err(KubeconfigError::ReadConfig(e, _)) => {
                anyhow::bail!("cannot read {}: {}", kc.describe(), io_reason(&e))
            }
            Err(e) => anyhow::bail!("{} is not a valid kubeconfig: {e}", kc.describe()),
        };
        merged = Some(match merged {
            None => one,
            Some(m) => m
                .merge(one)
                .map_err(|e| anyhow::anyhow!("cannot merge {}: {e}", kc.describe()))?,
        });
    }
    merged.ok_or_else(|| anyhow::anyhow!("{}", missing_kubeconfig(kc, &invocation())))
}

/// What to say when the kubeconfig does not exist; `cmd` runs trellis.
pub fn missing_kubeconfig(kc: &Kubeconfig, cmd: &str) -> String {
    let paths = kc
        .paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    match kc.origin {
        Origin::Flag => format!("there is no kubeconfig {paths} (given with --kubeconfig)"),
        Origin::Env => format!(
            "there is no kubeconfig {paths} (named by $KUBECONFIG): correct or unset KUBECONFIG, or pass --kubeconfig"
        ),
        Origin::DataDir => format!(
            "there is no admin kubeconfig {paths}: start trellis with `{cmd} up`, which writes it, or pass --data-dir or --kubeconfig"
        ),
    }
}

/// What to say when the server named by `kc` does not answer at all.
pub fn unreachable(kc: &Kubeconfig, url: &str, reason: &str, cmd: &str) -> String {
    format!(
        "cannot reach the API server at {url} ({reason}) named by {}: start trellis with `{cmd} up`, or choose another cluster with --kubeconfig or --data-dir",
        kc.describe()
    )
}

/// An I/O error's message without the `(os error N)` suffix, starting
/// lower-case to read inside a sentence.
fn io_reason(e: &dyn std::error::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// The innermost cause of a transport error (connection refused, a TLS
/// failure, an unknown host), when `e` is one: the request never got an
/// HTTP answer. API errors (a status from the server) are not.
pub fn transport_failure(e: &anyhow::Error) -> Option<String> {
    let kube_error = e.chain().find_map(|c| c.downcast_ref::<kube::Error>())?;
    if !matches!(
        kube_error,
        kube::Error::HyperError(_) | kube::Error::Service(_)
    ) {
        return None;
    }
    let mut innermost: &dyn std::error::Error = kube_error;
    while let Some(next) = innermost.source() {
        innermost = next;
    }
    Some(io_reason(innermost))
}

/// The command that runs this trellis binary, for hints that must work as
/// printed: `trellis` when that name on PATH is this very binary, `cargo
/// run [--release] -p trellis --` when it was built in the Cargo workspace
/// the user is in (the README's way), else its absolute path.
pub fn invocation() -> String {
    let Ok(exe) = std::env::current_exe().and_then(|e| e.canonicalize()) else {
        return "trellis".to_string();
    };
    let on_path = std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("trellis"))
                .find(|p| p.is_file())
        })
        .and_then(|p| p.canonicalize().ok())
        .is_some_and(|p| p == exe);
    let cwd = std::env::current_dir().and_then(|d| d.canonicalize()).ok();
    invocation_of(&exe, on_path, cwd.as_deref(), |root| {
        root.join("Cargo.toml").is_file()
    })
}

/// [`invocation`] as a function of what it looks at.
pub fn invocation_of(
    exe: &Path,
    on_path: bool,
    cwd: Option<&Path>,
    is_workspace: impl Fn(&Path) -> bool,
) -> String {
    if on_path {
        return "trellis".to_string();
    }
    let profile = exe.parent();
    let target = profile.and_then(Path::parent);
    let root = target.and_then(Path::parent);
    if let (Some(profile), Some(target), Some(root)) = (profile, target, root)
        && target.file_name().is_some_and(|n| n == "target")
        && is_workspace(root)
        && cwd.is_some_and(|c| c.starts_with(root))
    {
        match profile.file_name().and_then(|n| n.to_str()) {
            Some("release") => return "cargo run --release -p trellis --".to_string(),
            Some("debug") => return "cargo run -p trellis --".to_string(),
            _ => {}
        }
    }
    shell_quote(&exe.display().to_string())
}

/// `s` as one shell word: as it is when that is safe, else single-quoted.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:=,@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Terminal colours, or none (pipes, files, `NO_COLOR`).
#[derive(Clone, Copy, Debug)]
pub struct Paint {
    enabled: bool,
}

impl Paint {
    /// No colour at all.
    pub fn none() -> Paint {
        Paint { enabled: false }
    }

    /// Colour when stdout is a terminal and `NO_COLOR` is unset.
    pub fn for_stdout() -> Paint {
        Paint {
            enabled: std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn wrap(self, code: &str, s: &str) -> String {
        if self.enabled && !s.is_empty() {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    pub fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn yellow(self, s: &str) -> String {
        self.wrap("33", s)
    }
    pub fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }

    /// A phase name padded to `width` and coloured by how healthy it is.
    pub fn phase(self, phase: &str, width: usize) -> String {
        let padded = format!("{phase:width$}");
        match Tone::of_phase(phase) {
            Tone::Good => self.green(&padded),
            Tone::Busy => self.yellow(&padded),
            Tone::Bad => self.red(&padded),
            Tone::Plain => padded,
        }
    }

    fn tone(self, tone: Tone, s: &str) -> String {
        match tone {
            Tone::Good => self.green(s),
            Tone::Busy => self.yellow(s),
            Tone::Bad => self.red(s),
            Tone::Plain => s.to_string(),
        }
    }
}

/// How a cell should be coloured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tone {
    Good,
    Busy,
    Bad,
    Plain,
}

impl Tone {
    fn of_phase(phase: &str) -> Tone {
        match phase {
            "Running" | "Available" | "InPlaceUpdateSuccessful" => Tone::Good,
            "Failed" | "CrashLoopBackOff" | "InPlaceUpdateFailed" => Tone::Bad,
            "" => Tone::Plain,
            _ => Tone::Busy,
        }
    }
}

/// A machine's phase as shown: `Terminating` while it is being deleted,
/// `New` before the controller first touched it.
pub fn phase_name(m: &Machine) -> String {
    if m.metadata.deletion_timestamp.is_some() {
        return "Terminating".into();
    }
    match m.phase() {
        Some(p) => format!("{p:?}"),
        None => "New".into(),
    }
}

/// `s` cut to `max` characters with an ellipsis.
pub fn truncate(s: &str, max: usize) -> String {
    let s = s.trim();
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// An age as kubectl prints it (`45s`, `3m12s`, `5h`, `2d3h`).
pub fn human_age(d: Duration) -> String {
    let s = d.as_secs();
    let (m, h, days) = (s / 60, s / 3600, s / 86_400);
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 && !s.is_multiple_of(60) => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 && !m.is_multiple_of(60) => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 && !h.is_multiple_of(24) => format!("{days}d{}h", h % 24),
        _ if days < 365 * 2 => format!("{days}d"),
        _ => format!("{}y", days / 365),
    }
}

/// Everything the tree shows, as listed from the API.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub deployments: Vec<MachineDeployment>,
    pub sets: Vec<MachineSet>,
    pub machines: Vec<Machine>,
    /// Nodes by name with their readiness, when the machines' target
    /// cluster is known (a shoot's API): shown under their machines.
    pub nodes: BTreeMap<String, bool>,
}

/// A Shoot with what trellis made of it: its Worker and the machine objects
/// of its control namespace.
#[derive(Clone, Debug, Default)]
pub struct ShootView {
    pub shoot: gardener::Shoot,
    pub worker: Option<worker::Worker>,
    pub snap: Snapshot,
}

/// One line of the tree before alignment.
struct Line {
    namespace: String,
    name: String,
    state: (String, Tone),
    node: String,
    age: String,
    message: (String, Tone),
}

fn age(meta: &ObjectMeta, now: Timestamp) -> String {
    meta.creation_timestamp
        .as_ref()
        .map(|Time(t)| {
            let secs = now.as_second().saturating_sub(t.as_second()).max(0);
            human_age(Duration::from_secs(secs as u64))
        })
        .unwrap_or_default()
}

fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or("")
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn deployment_line(md: &MachineDeployment, now: Timestamp) -> Line {
    let st = md.status.clone().unwrap_or_default();
    let mut state = format!("{}/{} ready", st.ready_replicas, md.spec.replicas);
    if md.spec.paused {
        state.push_str(", paused");
    }
    let healthy = st.ready_replicas >= md.spec.replicas && st.updated_replicas >= md.spec.replicas;
    // The first condition that needs attention: a failure, a freeze, or
    // one that does not hold (e.g. a rollout past its deadline).
    let attention = st.conditions.iter().find(|c| {
        let ty = c.type_.as_str();
        let holds = c.status.as_str() == "True";
        matches!(ty, "ReplicaFailure" | "Frozen") == holds
            && (holds || matches!(ty, "Available" | "Progressing"))
    });
    let message = match attention {
        Some(c) => {
            let bad = matches!(c.type_.as_str(), "ReplicaFailure" | "Frozen")
                || c.reason == "ProgressDeadlineExceeded";
            (
                format!("{} {}: {}", c.type_.as_str(), c.reason, c.message),
                if bad { Tone::Bad } else { Tone::Busy },
            )
        }
        None if !st.failed_machines.is_empty() => (
            format!("{} failed machine(s)", st.failed_machines.len()),
            Tone::Bad,
        ),
        None => (String::new(), Tone::Plain),
    };
    Line {
        namespace: md.metadata.namespace.clone().unwrap_or_default(),
        name: format!("MachineDeployment/{}", name(&md.metadata)),
        state: (state, if healthy { Tone::Good } else { Tone::Busy }),
        node: String::new(),
        age: age(&md.metadata, now),
        message,
    }
}

fn set_line(ms: &MachineSet, now: Timestamp) -> Line {
    let st = ms.status.clone().unwrap_or_default();
    let healthy = st.ready_replicas >= ms.spec.replicas;
    Line {
        namespace: ms.metadata.namespace.clone().unwrap_or_default(),
        name: format!("MachineSet/{}", name(&ms.metadata)),
        state: (
            format!("{}/{} ready", st.ready_replicas, ms.spec.replicas),
            if healthy { Tone::Good } else { Tone::Busy },
        ),
        node: String::new(),
        age: age(&ms.metadata, now),
        message: (String::new(), Tone::Plain),
    }
}

fn machine_line(m: &Machine, now: Timestamp) -> Line {
    let phase = phase_name(m);
    let tone = Tone::of_phase(&phase);
    let node = m
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("node"))
        .cloned()
        .unwrap_or_default();
    let message = match m.status.as_ref().map(|s| &s.last_operation) {
        Some(op) if !op.description.is_empty() || op.state.is_some() => {
            let failed = op.state.map(|s| format!("{s:?}")).as_deref() == Some("Failed");
            let mut text = format!(
                "{} {}: {}",
                op.type_.map(|t| format!("{t:?}")).unwrap_or_default(),
                op.state.map(|s| format!("{s:?}")).unwrap_or_default(),
                op.description
            );
            if !op.error_code.is_empty() {
                text.push_str(&format!(" [{}]", op.error_code));
            }
            (text, if failed { Tone::Bad } else { Tone::Plain })
        }
        _ => (String::new(), Tone::Plain),
    };
    Line {
        namespace: m.metadata.namespace.clone().unwrap_or_default(),
        name: format!("Machine/{}", name(&m.metadata)),
        state: (phase, tone),
        node,
        age: age(&m.metadata, now),
        message,
    }
}

/// The tree: deployments with their sets and machines, then sets without a
/// deployment, then machines without a set. `message_width` bounds the
/// last column.
#[cfg(test)]
pub fn render(snap: &Snapshot, now: Timestamp, paint: Paint, message_width: usize) -> String {
    render_all(snap, &[], now, paint, message_width)
}

/// The tree of `snap` followed by one tree per shoot.
pub fn render_all(
    snap: &Snapshot,
    shoots: &[ShootView],
    now: Timestamp,
    paint: Paint,
    message_width: usize,
) -> String {
    let mut lines = tree_lines(snap, now);
    for view in shoots {
        lines.extend(shoot_lines(view, now));
    }
    if lines.is_empty() {
        return "No shoots, machine deployments, machine sets or machines.\n".to_string();
    }
    format_lines(&lines, paint, message_width)
}

/// A Shoot, its Worker, and under the Worker the tree of its control
/// namespace.
fn shoot_lines(view: &ShootView, now: Timestamp) -> Vec<(String, Line)> {
    let sh = &view.shoot;
    let st = sh.status.clone().unwrap_or_default();
    let (op_state, op_text) = match &st.last_operation {
        Some(op) => (
            op.state.clone(),
            format!("{} {}: {}", op.type_, op.state, op.description),
        ),
        None => (String::new(), String::new()),
    };
    let tone = |state: &str| match state {
        "Succeeded" => Tone::Good,
        "Error" | "Failed" | "Aborted" => Tone::Bad,
        "" => Tone::Plain,
        _ => Tone::Busy,
    };
    let mut state = if op_state.is_empty() {
        "New".to_string()
    } else {
        op_state.clone()
    };
    if st.hibernated {
        state.push_str(", hibernated");
    }
    let mut lines = vec![(
        String::new(),
        Line {
            namespace: sh.metadata.namespace.clone().unwrap_or_default(),
            name: format!(
                "Shoot/{}/{}",
                sh.metadata.namespace.as_deref().unwrap_or(""),
                name(&sh.metadata)
            ),
            state: (state, tone(&op_state)),
            node: String::new(),
            age: age(&sh.metadata, now),
            message: (op_text, tone(&op_state)),
        },
    )];
    let Some(w) = &view.worker else {
        return lines;
    };
    let wop = w.status.as_ref().and_then(|s| s.last_operation.clone());
    let wstate = wop.as_ref().map(|o| o.state.clone()).unwrap_or_default();
    lines.push((
        "└─".to_string(),
        Line {
            namespace: w.metadata.namespace.clone().unwrap_or_default(),
            name: format!("Worker/{}", name(&w.metadata)),
            state: (
                if wstate.is_empty() {
                    "New".into()
                } else {
                    wstate.clone()
                },
                tone(&wstate),
            ),
            node: String::new(),
            age: age(&w.metadata, now),
            message: (
                wop.map(|o| o.description).unwrap_or_default(),
                if tone(&wstate) == Tone::Bad {
                    Tone::Bad
                } else {
                    Tone::Plain
                },
            ),
        },
    ));
    // The namespace's roots hang under the Worker; their subtrees move
    // along with them.
    let inner = tree_lines(&view.snap, now);
    let roots: Vec<usize> = inner
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| p.is_empty())
        .map(|(i, _)| i)
        .collect();
    let last_root = roots.last().copied().unwrap_or(0);
    for (i, (prefix, line)) in inner.into_iter().enumerate() {
        let under_last = i >= last_root;
        let p = if prefix.is_empty() {
            format!("  {}", if i == last_root { "└─" } else { "├─" })
        } else {
            format!("  {}{prefix}", if under_last { "  " } else { "│ " })
        };
        lines.push((p, line));
    }
    lines
}

/// The lines of the machine objects of `snap`: deployments with their
/// sets and machines (and nodes), then sets without a deployment, then
/// machines without a set.
fn tree_lines(snap: &Snapshot, now: Timestamp) -> Vec<(String, Line)> {
    // (indent prefix, line)
    let mut lines: Vec<(String, Line)> = Vec::new();
    let by_name = |a: &ObjectMeta, b: &ObjectMeta| {
        (a.namespace.as_deref(), name(a)).cmp(&(b.namespace.as_deref(), name(b)))
    };
    let mut deployments: Vec<&MachineDeployment> = snap.deployments.iter().collect();
    deployments.sort_by(|a, b| by_name(&a.metadata, &b.metadata));
    let mut sets: Vec<&MachineSet> = snap.sets.iter().collect();
    sets.sort_by(|a, b| by_name(&a.metadata, &b.metadata));
    let mut machines: Vec<&Machine> = snap.machines.iter().collect();
    machines.sort_by(|a, b| by_name(&a.metadata, &b.metadata));

    let mut sets_of: BTreeMap<&str, Vec<&MachineSet>> = BTreeMap::new();
    for s in &sets {
        if let Some(owner) = controller_uid(&s.metadata) {
            sets_of.entry(owner).or_default().push(s);
        }
    }
    let mut machines_of: BTreeMap<&str, Vec<&Machine>> = BTreeMap::new();
    for m in &machines {
        if let Some(owner) = controller_uid(&m.metadata) {
            machines_of.entry(owner).or_default().push(m);
        }
    }
    let md_uids: HashSet<&str> = deployments.iter().map(|d| uid(&d.metadata)).collect();
    let set_uids: HashSet<&str> = sets.iter().map(|s| uid(&s.metadata)).collect();
    let all_namespaces = deployments
        .iter()
        .map(|d| d.metadata.namespace.as_deref())
        .chain(sets.iter().map(|s| s.metadata.namespace.as_deref()))
        .chain(machines.iter().map(|m| m.metadata.namespace.as_deref()))
        .collect::<HashSet<_>>()
        .len()
        > 1;

    let push_node = |lines: &mut Vec<(String, Line)>, m: &Machine, indent: &str| {
        let Some(node) = m.metadata.labels.as_ref().and_then(|l| l.get("node")) else {
            return;
        };
        let Some(ready) = snap.nodes.get(node) else {
            return;
        };
        lines.push((
            format!("{indent}└─"),
            Line {
                namespace: String::new(),
                name: format!("Node/{node}"),
                state: if *ready {
                    ("Ready".into(), Tone::Good)
                } else {
                    ("NotReady".into(), Tone::Bad)
                },
                node: String::new(),
                age: String::new(),
                message: (String::new(), Tone::Plain),
            },
        ));
    };
    let push_machines = |lines: &mut Vec<(String, Line)>, owner: &str, indent: &str| {
        let ms = machines_of.get(owner).cloned().unwrap_or_default();
        for (i, m) in ms.iter().enumerate() {
            let last = i + 1 == ms.len();
            let branch = if last { "└─" } else { "├─" };
            lines.push((format!("{indent}{branch}"), machine_line(m, now)));
            let below = format!("{indent}{}", if last { "  " } else { "│ " });
            push_node(lines, m, &below);
        }
    };
    for d in &deployments {
        lines.push((String::new(), deployment_line(d, now)));
        let own = sets_of.get(uid(&d.metadata)).cloned().unwrap_or_default();
        for (i, s) in own.iter().enumerate() {
            // The set's own branch is drawn at the deployment's level.
            let last = i + 1 == own.len();
            let branch = if last { "└─" } else { "├─" };
            lines.push((branch.to_string(), set_line(s, now)));
            let indent = if last { "  " } else { "│ " };
            push_machines(&mut lines, uid(&s.metadata), indent);
        }
    }
    for s in &sets {
        let orphan = controller_uid(&s.metadata).is_none_or(|o| !md_uids.contains(o));
        if orphan {
            lines.push((String::new(), set_line(s, now)));
            push_machines(&mut lines, uid(&s.metadata), "");
        }
    }
    for m in &machines {
        let orphan = controller_uid(&m.metadata).is_none_or(|o| !set_uids.contains(o));
        if orphan {
            lines.push((String::new(), machine_line(m, now)));
            push_node(&mut lines, m, "");
        }
    }
    if all_namespaces {
        // Names are ambiguous across namespaces: qualify the rows.
        for (prefix, l) in &mut lines {
            if prefix.is_empty() {
                l.name = format!("{}/{}", l.namespace, l.name);
            }
        }
    }

    lines
}

/// Aligns the lines into columns, colours them, and cuts the last column
/// to `message_width`.
fn format_lines(lines: &[(String, Line)], paint: Paint, message_width: usize) -> String {
    let width = |f: &dyn Fn(&(String, Line)) -> usize| lines.iter().map(f).max().unwrap_or(0);
    let w_name = width(&|(p, l)| p.chars().count() + l.name.chars().count()).max(4);
    let w_state = width(&|(_, l)| l.state.0.chars().count()).max(5);
    let w_node = width(&|(_, l)| l.node.chars().count()).max(4);
    let w_age = width(&|(_, l)| l.age.chars().count()).max(3);
    let mut out = String::new();
    out.push_str(
        &paint.dim(
            format!(
                "{:w_name$}  {:w_state$}  {:w_node$}  {:w_age$}  LAST OPERATION",
                "NAME", "STATE", "NODE", "AGE"
            )
            .trim_end(),
        ),
    );
    out.push('\n');
    for (prefix, l) in lines {
        let name_pad = w_name - prefix.chars().count() - l.name.chars().count();
        let state = format!("{:w_state$}", l.state.0);
        let row = format!(
            "{}{}{}  {}  {:w_node$}  {:w_age$}  {}",
            paint.dim(prefix),
            l.name,
            " ".repeat(name_pad),
            paint.tone(l.state.1, &state),
            l.node,
            l.age,
            paint.tone(l.message.1, &truncate(&l.message.0, message_width)),
        );
        out.push_str(row.trim_end());
        out.push('\n');
    }
    out
}

async fn snapshot(client: &kube::Client, namespace: Option<&str>) -> anyhow::Result<Snapshot> {
    fn api<K>(client: &kube::Client, namespace: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let lp = ListParams::default();
    let (mds, sets, machines) = (
        api::<MachineDeployment>(client, namespace),
        api::<MachineSet>(client, namespace),
        api::<Machine>(client, namespace),
    );
    let (deployments, sets, machines) =
        futures::try_join!(mds.list(&lp), sets.list(&lp), machines.list(&lp))
            .context("listing machine objects")?;
    Ok(Snapshot {
        deployments: deployments.items,
        sets: sets.items,
        machines: machines.items,
        nodes: BTreeMap::new(),
    })
}

/// The Nodes of a shoot's own API server (through the kubeconfig Secret in
/// its control namespace), by name with their readiness; `None` when the
/// shoot API cannot be reached.
async fn shoot_nodes(client: &kube::Client, control_ns: &str) -> Option<BTreeMap<String, bool>> {
    use k8s_openapi::api::core::v1::{Node, Secret};
    let secrets: Api<Secret> = Api::namespaced(client.clone(), control_ns);
    let secret = secrets.get_opt("kubeconfig").await.ok()??;
    let raw = secret.data?.get("kubeconfig")?.0.clone();
    let kc = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&raw).ok()?).ok()?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .ok()?;
    let shoot = kube::Client::try_from(config).ok()?;
    let nodes = Api::<Node>::all(shoot)
        .list(&ListParams::default())
        .await
        .ok()?;
    Some(
        nodes
            .items
            .into_iter()
            .map(|n| {
                let ready = n
                    .status
                    .and_then(|s| s.conditions)
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                (n.metadata.name.unwrap_or_default(), ready)
            })
            .collect(),
    )
}

/// Every Shoot of the namespace (or all), each with its Worker, the
/// machine objects of its control namespace and its nodes. No Shoot CRD
/// (a plain cluster) means no shoots.
async fn shoots(client: &kube::Client, namespace: Option<&str>) -> anyhow::Result<Vec<ShootView>> {
    let api: Api<gardener::Shoot> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let list = match api.list(&ListParams::default()).await {
        Ok(l) => l.items,
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Vec::new()),
        Err(e) => return Err(e).context("listing shoots"),
    };
    let mut views = Vec::new();
    for shoot in list {
        let tid = shoot
            .status
            .as_ref()
            .map(|s| s.technical_id.clone())
            .unwrap_or_default();
        if tid.is_empty() {
            views.push(ShootView {
                shoot,
                ..ShootView::default()
            });
            continue;
        }
        let workers: Api<worker::Worker> = Api::namespaced(client.clone(), &tid);
        let worker = workers.get_opt(&tid).await.ok().flatten();
        let mut snap = snapshot(client, Some(&tid)).await?;
        snap.nodes = shoot_nodes(client, &tid).await.unwrap_or_default();
        views.push(ShootView {
            shoot,
            worker,
            snap,
        });
    }
    Ok(views)
}

/// The machine objects outside any shoot's control namespace (those are
/// shown under their shoot).
fn outside_shoots(mut snap: Snapshot, views: &[ShootView]) -> Snapshot {
    let owned: std::collections::HashSet<String> = views
        .iter()
        .filter_map(|v| v.shoot.status.as_ref().map(|s| s.technical_id.clone()))
        .collect();
    let keep = |m: &ObjectMeta| !owned.contains(m.namespace.as_deref().unwrap_or(""));
    snap.deployments.retain(|d| keep(&d.metadata));
    snap.sets.retain(|s| keep(&s.metadata));
    snap.machines.retain(|m| keep(&m.metadata));
    snap
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let connected = args.connection.connect().await?;
    let client = &connected.client;
    let namespace = (!args.all_namespaces).then_some(args.namespace.as_str());
    let paint = Paint::for_stdout();
    let tty = std::io::stdout().is_terminal();
    let mut last = String::new();
    loop {
        let observed = async {
            let views = shoots(client, namespace).await?;
            let snap = outside_shoots(snapshot(client, namespace).await?, &views);
            anyhow::Ok(render_all(&snap, &views, Timestamp::now(), paint, 80))
        }
        .await;
        // A server that does not answer gets one sentence (the library's
        // error chain only behind --log-level debug); with --watch it is
        // shown in place of the tree until the server is back.
        let tree = match observed {
            Ok(tree) => tree,
            Err(e) if args.watch => match connected.unreachable(&e) {
                Some(sentence) => {
                    tracing::debug!(error = format!("{e:#}"), "request failed");
                    format!("{sentence}\n")
                }
                None => return Err(e),
            },
            Err(e) => return Err(connected.explain(e)),
        };
        if !args.watch {
            return write_stdout(&tree);
        }
        if tty {
            write_stdout(&format!("\x1b[H\x1b[2J{tree}"))?;
        } else if tree != last {
            write_stdout(&format!("{tree}\n"))?;
        }
        last = tree;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = crate::shutdown_signal() => return Ok(()),
        }
    }
}

/// Writes `text` to stdout and flushes it, returning the error instead of
/// panicking as `print!` does: a closed pipe (`trellis status | head`)
/// is then a quiet exit (see `main`).
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::Fixture;
    use api::{LastOperation, MachineOperationType, MachinePhase, MachineState};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn owned<K: kube::Resource>(mut obj: K, owner_uid: &str) -> K {
        obj.meta_mut().owner_references = Some(vec![OwnerReference {
            api_version: "machine.sapcloud.io/v1alpha1".into(),
            kind: "Owner".into(),
            name: "owner".into(),
            uid: owner_uid.into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        obj
    }

    fn at(mut meta: ObjectMeta, secs: i64) -> ObjectMeta {
        meta.creation_timestamp = Some(Time(Timestamp::from_second(secs).unwrap()));
        meta
    }

    #[test]
    fn ages_read_like_kubectl() {
        for (secs, want) in [
            (0, "0s"),
            (119, "119s"),
            (192, "3m12s"),
            (600, "10m"),
            (2 * 3600 + 59 * 60, "179m"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (30 * 3600, "30h"),
            (3 * 86_400 + 2 * 3600, "3d2h"),
            (40 * 86_400, "40d"),
            (800 * 86_400, "2y"),
        ] {
            assert_eq!(human_age(Duration::from_secs(secs)), want, "{secs}s");
        }
    }

    fn sample() -> Snapshot {
        let mut md = MachineDeployment::test("demo").replicas(2).with_uid("md-1");
        md.metadata = at(md.metadata, 0);
        md.status = Some(api::MachineDeploymentStatus {
            ready_replicas: 1,
            updated_replicas: 2,
            ..Default::default()
        });
        let mut ms = owned(MachineSet::test("demo-abc").replicas(2), "md-1").with_uid("ms-1");
        ms.metadata = at(ms.metadata, 10);
        let mut running = owned(
            Machine::test("demo-abc-1")
                .running()
                .label("node", "node-1"),
            "ms-1",
        );
        running.metadata = at(running.metadata, 20);
        let mut failed = owned(Machine::test("demo-abc-2"), "ms-1");
        failed.metadata = at(failed.metadata, 20);
        failed.status = Some(api::MachineStatus {
            last_operation: LastOperation {
                description: "Cloud provider message - out of capacity".into(),
                state: Some(MachineState::Failed),
                type_: Some(MachineOperationType::Create),
                error_code: "ResourceExhausted".into(),
                ..Default::default()
            },
            ..Default::default()
        });
        failed = failed.with_phase(MachinePhase::CrashLoopBackOff);
        let mut single = Machine::test("single");
        single.metadata = at(single.metadata, 100);
        Snapshot {
            deployments: vec![md],
            sets: vec![ms],
            machines: vec![failed, single, running],
            nodes: BTreeMap::new(),
        }
    }

    #[test]
    fn the_tree_nests_sets_under_deployments_and_machines_under_sets() {
        let now = Timestamp::from_second(130).unwrap();
        let tree = render(&sample(), now, Paint::none(), 80);
        let want = "\
NAME                    STATE             NODE    AGE    LAST OPERATION
MachineDeployment/demo  1/2 ready                 2m10s
└─MachineSet/demo-abc   0/2 ready                 2m
  ├─Machine/demo-abc-1  Running           node-1  110s
  └─Machine/demo-abc-2  CrashLoopBackOff          110s   Create Failed: Cloud provider message - out of capacity [ResourceExhausted]
Machine/single          New                       30s
";
        assert_eq!(tree, want, "\n{tree}");
    }

    #[test]
    fn colours_mark_failures_red_and_running_green() {
        let now = Timestamp::from_second(130).unwrap();
        let tree = render(&sample(), now, Paint { enabled: true }, 80);
        assert!(tree.contains("\x1b[32mRunning"), "{tree}");
        assert!(tree.contains("\x1b[31mCrashLoopBackOff"), "{tree}");
        assert!(tree.contains("\x1b[31mCreate Failed"), "{tree}");
    }

    #[test]
    fn long_messages_are_truncated() {
        let now = Timestamp::from_second(130).unwrap();
        let tree = render(&sample(), now, Paint::none(), 20);
        assert!(tree.contains("Create Failed: Clou…"), "{tree}");
    }

    #[test]
    fn a_deleting_machine_shows_terminating() {
        let mut m = Machine::test("m").running();
        m.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(5).unwrap()));
        assert_eq!(phase_name(&m), "Terminating");
    }

    #[test]
    fn every_namespace_qualifies_the_top_level_rows() {
        let mut snap = sample();
        snap.machines[1].metadata.namespace = Some("team-b".into());
        let tree = render(
            &snap,
            Timestamp::from_second(130).unwrap(),
            Paint::none(),
            80,
        );
        assert!(tree.contains("\ndefault/MachineDeployment/demo "), "{tree}");
        assert!(tree.contains("\nteam-b/Machine/single "), "{tree}");
        assert!(
            tree.contains("\n  ├─Machine/demo-abc-1 "),
            "children stay short: {tree}"
        );
    }

    #[test]
    fn a_shoot_shows_its_worker_deployments_machines_and_nodes() {
        let mut snap = sample();
        snap.machines
            .retain(|m| m.metadata.name.as_deref() != Some("single"));
        snap.nodes.insert("node-1".into(), true);
        let shoot: gardener::Shoot = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
            "metadata": {"name": "demo", "namespace": "garden-local",
                "creationTimestamp": "1970-01-01T00:00:00Z"},
            "spec": {},
            "status": {"technicalID": "shoot--local--demo", "hibernated": false,
                "lastOperation": {"type": "Reconcile", "state": "Succeeded", "progress": 100,
                    "description": "Shoot cluster has been successfully reconciled."}}
        }))
        .unwrap();
        let worker: worker::Worker = serde_json::from_value(serde_json::json!({
            "apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "Worker",
            "metadata": {"name": "shoot--local--demo", "namespace": "shoot--local--demo"},
            "spec": {"type": "local", "region": "local", "secretRef": {"name": "cloudprovider"}, "pools": []},
            "status": {"lastOperation": {"type": "Reconcile", "state": "Processing", "progress": 50,
                "description": "Waiting until machines are available"}}
        }))
        .unwrap();
        let view = ShootView {
            shoot,
            worker: Some(worker),
            snap,
        };
        let now = Timestamp::from_second(130).unwrap();
        let tree = render_all(&Snapshot::default(), &[view], now, Paint::none(), 80);
        let names: Vec<&str> = tree
            .lines()
            .skip(1)
            .map(|l| {
                // The tree prefix and the name: up to the first column gap
                // after the name starts.
                let start = l.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(0);
                let end = l[start..].find("  ").map_or(l.len(), |i| start + i);
                &l[..end]
            })
            .collect();
        assert_eq!(
            names,
            [
                "Shoot/garden-local/demo",
                "└─Worker/shoot--local--demo",
                "  └─MachineDeployment/demo",
                "    └─MachineSet/demo-abc",
                "      ├─Machine/demo-abc-1",
                "      │ └─Node/node-1",
                "      └─Machine/demo-abc-2",
            ],
            "\n{tree}"
        );
        assert!(
            tree.contains("Reconcile Succeeded: Shoot cluster"),
            "{tree}"
        );
        assert!(tree.contains("Processing"), "{tree}");
        let node_line = tree.lines().find(|l| l.contains("Node/node-1")).unwrap();
        assert!(node_line.contains("Ready"), "{node_line}");
    }

    fn connection(kubeconfig: Option<&str>, data_dir: Option<&str>) -> Connection {
        Connection {
            kubeconfig: kubeconfig.map(PathBuf::from),
            data_dir: data_dir.map(PathBuf::from),
        }
    }

    fn default_dir() -> PathBuf {
        PathBuf::from("/home/u/.local/share/trellis")
    }

    #[test]
    fn the_kubeconfig_is_the_flag_then_kubeconfig_then_the_data_dir() {
        let flag = connection(Some("/k/flag"), Some("/d"));
        assert_eq!(
            flag.resolve(Some("/k/env".into()), default_dir),
            Kubeconfig {
                paths: vec!["/k/flag".into()],
                origin: Origin::Flag
            }
        );
        let env = connection(None, Some("/d"));
        assert_eq!(
            env.resolve(Some("/k/a:/k/b".into()), default_dir),
            Kubeconfig {
                paths: vec!["/k/a".into(), "/k/b".into()],
                origin: Origin::Env
            },
            "a $KUBECONFIG list, as kubectl reads it"
        );
        assert_eq!(
            env.resolve(Some("".into()), default_dir),
            Kubeconfig {
                paths: vec!["/d/admin.kubeconfig".into()],
                origin: Origin::DataDir
            },
            "an empty $KUBECONFIG is unset"
        );
        assert_eq!(
            connection(Some(""), None).resolve(None, default_dir),
            Kubeconfig {
                paths: vec!["/home/u/.local/share/trellis/admin.kubeconfig".into()],
                origin: Origin::DataDir
            },
            "no data dir: the same default as `up`"
        );
    }

    #[test]
    fn a_missing_kubeconfig_is_named_once_with_what_to_do() {
        let cmd = "cargo run -p trellis --";
        let kc = connection(None, Some("/d")).resolve(None, default_dir);
        assert_eq!(
            missing_kubeconfig(&kc, cmd),
            "there is no admin kubeconfig /d/admin.kubeconfig: start trellis with `cargo run -p trellis -- up`, which writes it, or pass --data-dir or --kubeconfig"
        );
        let kc = connection(None, None).resolve(Some("/k/x".into()), default_dir);
        assert_eq!(
            missing_kubeconfig(&kc, cmd),
            "there is no kubeconfig /k/x (named by $KUBECONFIG): correct or unset KUBECONFIG, or pass --kubeconfig"
        );
        let kc = connection(Some("/k/y"), None).resolve(None, default_dir);
        assert_eq!(
            missing_kubeconfig(&kc, cmd),
            "there is no kubeconfig /k/y (given with --kubeconfig)"
        );
    }

    #[test]
    fn an_unreachable_server_is_one_sentence_with_url_kubeconfig_and_remedy() {
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let err =
            anyhow::Error::new(kube::Error::Service(Box::new(refused))).context("listing shoots");
        let reason = transport_failure(&err).expect("a transport failure");
        let kc = connection(None, None).resolve(None, default_dir);
        assert_eq!(
            unreachable(&kc, "https://127.0.0.1:6443", &reason, "trellis"),
            "cannot reach the API server at https://127.0.0.1:6443 (connection refused) named by the admin kubeconfig /home/u/.local/share/trellis/admin.kubeconfig: start trellis with `trellis up`, or choose another cluster with --kubeconfig or --data-dir"
        );
        let answered = anyhow::Error::new(kube::Error::Api(Box::new(
            kube::core::Status::failure("forbidden", "Forbidden").with_code(403),
        )));
        assert_eq!(transport_failure(&answered), None, "the server answered");
    }

    #[test]
    fn hints_run_this_binary_as_the_user_can() {
        let ws = |root: &Path| root == Path::new("/src/trellis");
        let release = Path::new("/src/trellis/target/release/trellis");
        let debug = Path::new("/src/trellis/target/debug/trellis");
        let inside = Some(Path::new("/src/trellis/crates"));
        let outside = Some(Path::new("/home/u"));
        assert_eq!(invocation_of(release, true, outside, ws), "trellis");
        assert_eq!(
            invocation_of(release, false, inside, ws),
            "cargo run --release -p trellis --"
        );
        assert_eq!(
            invocation_of(debug, false, inside, ws),
            "cargo run -p trellis --"
        );
        assert_eq!(
            invocation_of(release, false, outside, ws),
            "/src/trellis/target/release/trellis",
            "cargo run needs the workspace as the current directory"
        );
        assert_eq!(
            invocation_of(Path::new("/opt/my tools/trellis"), false, outside, ws),
            "'/opt/my tools/trellis'"
        );
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_quote("/a/b-c_d.e"), "/a/b-c_d.e");
        assert_eq!(shell_quote("/a b"), "'/a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn an_empty_namespace_says_so() {
        let tree = render(&Snapshot::default(), Timestamp::now(), Paint::none(), 80);
        assert!(tree.starts_with("No shoots, machine deployments"));
    }
}
