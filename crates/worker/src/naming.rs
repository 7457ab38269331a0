//! Names of the generated objects and the worker-pool hash that ends the
//! class names (§4.2).
//!
//! A machine deployment is named `<technicalID>-<pool>-z<i+1>` for the pool's
//! zone at 0-based index `i`; its class and class secret are named
//! `<deployment>-<poolHash>`. The pool hash changes exactly when the pool's
//! machines must be replaced, which makes the deployment point at a new class
//! and MCM roll the machines:
//!
//! * Rolling pools hash `[nodeAgentSecretName, additional…]`: every string is
//!   SHA-256 hex encoded, the encodings are concatenated and hashed again,
//!   and the first 5 hex characters are the hash. The node-agent secret name
//!   itself is a hash over what changes the operating system configuration
//!   (Kubernetes minor, machine type, image, volume, CRI, credentials
//!   rotations, node-local DNS, kubelet reservations); labels, annotations,
//!   taints, zones, priority and sizes never enter, so changing them keeps
//!   the machines.
//! * In-place pools hash `[nodeAgentSecretName, inPlaceHash, extras…]`,
//!   where the 16-character in-place hash covers the Kubernetes minor, the
//!   image version, the rotation times and the kubelet reservations — the
//!   things an in-place update applies.
//!
//! gardenlet puts `nodeAgentSecretName` into the Worker. When it is missing
//! (as in the contract example) this crate derives it with
//! [`node_agent_secret_name`] from the same inputs, instead of upstream's
//! retired first hash version.
//!
//! Hashes of Go-formatted values (times, kubelet quantities) are computed
//! from the same fields as upstream but are not guaranteed to be
//! byte-identical to its output; only the structure and the set of inputs
//! are contract. Given a `nodeAgentSecretName` and no extra data, the pool
//! hash is the same as upstream's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::labels;
use crate::shoot::ShootFacts;
use crate::types::WorkerPool;

/// Length of the pool hash at the end of class names.
pub const POOL_HASH_LENGTH: usize = 5;

/// Length of the hash in node-agent secret names and of the in-place hash.
pub const LONG_HASH_LENGTH: usize = 16;

/// `<technicalID>-<pool>-z<i+1>` for 0-based zone index `zone_index`.
pub fn machine_deployment_name(technical_id: &str, pool: &str, zone_index: usize) -> String {
    format!("{technical_id}-{pool}-z{}", zone_index + 1)
}

/// `<deployment>-<poolHash>`, the name of both the class and its secret.
pub fn machine_class_name(deployment: &str, pool_hash: &str) -> String {
    format!("{deployment}-{pool_hash}")
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The hash scheme shared by every hash here: hash each item, concatenate
/// the hex strings, hash that, keep `len` characters.
fn chained_hash<S: AsRef<str>>(items: &[S], len: usize) -> String {
    let concatenated: String = items
        .iter()
        .map(|s| sha256_hex(s.as_ref().as_bytes()))
        .collect();
    let mut hash = sha256_hex(concatenated.as_bytes());
    hash.truncate(len);
    hash
}

/// The pool hash of a rolling pool: the chained SHA-256 of the node-agent
/// secret name followed by the provider's additional data, 5 characters.
pub fn worker_pool_hash_v2(node_agent_secret_name: &str, additional: &[String]) -> String {
    let mut items = vec![node_agent_secret_name.to_string()];
    items.extend(additional.iter().cloned());
    chained_hash(&items, POOL_HASH_LENGTH)
}

/// `major.minor` of a Kubernetes version (`v` prefix allowed, leading zeros
/// dropped as semver parsing does).
pub fn kubernetes_major_minor(pool: &str, version: &str) -> Result<String, Error> {
    let invalid = || Error::InvalidKubernetesVersion {
        pool: pool.to_string(),
        version: version.to_string(),
    };
    let mut parts = version.strip_prefix('v').unwrap_or(version).split('.');
    let major: u64 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(invalid)?;
    let minor: u64 = parts
        .next()
        .and_then(|p| p.parse().ok())
        .ok_or_else(invalid)?;
    Ok(format!("{major}.{minor}"))
}

/// The Kubernetes version a pool's kubelets run: the pool's, else the
/// control plane's.
pub fn effective_kubernetes_version<'a>(
    pool: &'a WorkerPool,
    shoot: &'a ShootFacts,
) -> Result<&'a str, Error> {
    pool.kubernetes_version
        .as_deref()
        .or(shoot.kubernetes_version.as_deref())
        .ok_or_else(|| Error::MissingKubernetesVersion {
            pool: pool.name.clone(),
        })
}

/// Go's `time.Time.String()` of a UTC time, the form upstream hashes
/// rotation times in: `2006-01-02 15:04:05.999999999 +0000 UTC`.
pub fn go_time_string(time: &Time) -> String {
    let ts = time.0;
    let mut out = ts.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = ts.subsec_nanosecond();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        out.push('.');
        out.push_str(frac.trim_end_matches('0'));
    }
    out.push_str(" +0000 UTC");
    out
}

/// The kubelet settings that force new machines or an in-place update:
/// kube-reserved resources, hard eviction thresholds, CPU manager policy.
fn kubelet_hash_data(kubelet: Option<&Value>) -> Vec<String> {
    let Some(kubelet) = kubelet else {
        return Vec::new();
    };
    let field = |obj: &Value, key: &str| match obj.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    let mut data = Vec::new();
    if let Some(reserved) = kubelet.get("kubeReserved").filter(|v| v.is_object()) {
        data.push(
            ["cpu", "memory", "pid", "ephemeralStorage"]
                .iter()
                .map(|k| field(reserved, k))
                .collect::<Vec<_>>()
                .join("-"),
        );
    }
    if let Some(eviction) = kubelet.get("evictionHard").filter(|v| v.is_object()) {
        data.push(
            [
                "imageFSAvailable",
                "imageFSInodesFree",
                "memoryAvailable",
                "nodeFSAvailable",
                "nodeFSInodesFree",
            ]
            .iter()
            .map(|k| field(eviction, k))
            .collect::<Vec<_>>()
            .join("-"),
        );
    }
    if let Some(policy) = kubelet.get("cpuManagerPolicy").and_then(Value::as_str) {
        data.push(policy.to_string());
    }
    data
}

/// The rotation initiation times that apply to the pool, CA first.
fn rotation_data(pool: &str, shoot: &ShootFacts) -> Vec<String> {
    [
        shoot.ca_rotation.for_pool(pool),
        shoot.service_account_key_rotation.for_pool(pool),
    ]
    .into_iter()
    .flatten()
    .map(go_time_string)
    .collect()
}

/// The CRI of a pool: the Shoot's setting, else the pool's CRI label.
fn cri_name<'a>(pool: &'a WorkerPool, shoot: &'a ShootFacts) -> Option<&'a str> {
    shoot
        .cri_by_pool
        .get(&pool.name)
        .map(String::as_str)
        .or_else(|| pool.labels.get(labels::CRI_NAME).map(String::as_str))
}

/// Derives `gardener-node-agent-<pool>-<16 hex>` the way gardenlet names the
/// operating-system-config secret (upstream's key version 2), for Workers
/// that do not carry `nodeAgentSecretName`.
///
/// Rolling pools hash the Kubernetes minor, machine type, image name and
/// version, root volume size and type, CRI, rotation times, node-local DNS
/// and the kubelet reservations. In-place pools hash only machine type,
/// image name, volume, CRI and node-local DNS: what an in-place update
/// cannot change.
pub fn node_agent_secret_name(pool: &WorkerPool, shoot: &ShootFacts) -> Result<String, Error> {
    let major_minor =
        kubernetes_major_minor(&pool.name, effective_kubernetes_version(pool, shoot)?)?;
    let in_place = pool.is_in_place();
    let mut data = if in_place {
        vec![pool.machine_type.clone(), pool.machine_image.name.clone()]
    } else {
        vec![
            major_minor,
            pool.machine_type.clone(),
            format!("{}{}", pool.machine_image.name, pool.machine_image.version),
        ]
    };
    if let Some(volume) = &pool.volume {
        data.push(volume.size.clone());
        data.extend(volume.type_.clone());
    }
    data.extend(cri_name(pool, shoot).map(str::to_string));
    if !in_place {
        data.extend(rotation_data(&pool.name, shoot));
    }
    let node_local_dns = shoot.node_local_dns
        || pool.labels.get(labels::NODE_LOCAL_DNS).map(String::as_str) == Some("true");
    if node_local_dns {
        data.push("node-local-dns".to_string());
    }
    if !in_place {
        data.extend(kubelet_hash_data(pool.kubelet_config.as_ref()));
    }
    Ok(format!(
        "gardener-node-agent-{}-{}",
        pool.name,
        chained_hash(&data, LONG_HASH_LENGTH)
    ))
}

/// The pool's node-agent secret name: the Worker's, else derived.
pub fn pool_node_agent_secret_name(pool: &WorkerPool, shoot: &ShootFacts) -> Result<String, Error> {
    match &pool.node_agent_secret_name {
        Some(name) => Ok(name.clone()),
        None => node_agent_secret_name(pool, shoot),
    }
}

/// The 16-character hash of what an in-place update applies: Kubernetes
/// minor, image version, rotation times, kubelet reservations. Recorded in
/// `status.inPlaceUpdates.workerPoolToHashMap` once the pool is updated.
pub fn in_place_update_hash(pool: &WorkerPool, shoot: &ShootFacts) -> Result<String, Error> {
    let major_minor =
        kubernetes_major_minor(&pool.name, effective_kubernetes_version(pool, shoot)?)?;
    let mut data = vec![major_minor, pool.machine_image.version.clone()];
    data.extend(rotation_data(&pool.name, shoot));
    data.extend(kubelet_hash_data(pool.kubelet_config.as_ref()));
    Ok(chained_hash(&data, LONG_HASH_LENGTH))
}

/// The provider's additional hash data for a `local` pool, following the
/// AWS reference: root volume encryption, each data volume's size, type and
/// encryption, and the pool's provider config (compact JSON).
pub fn local_additional_hash_data(pool: &WorkerPool) -> Vec<String> {
    let mut data = Vec::new();
    if let Some(encrypted) = pool.volume.as_ref().and_then(|v| v.encrypted) {
        data.push(encrypted.to_string());
    }
    for volume in &pool.data_volumes {
        data.push(volume.size.clone());
        data.extend(volume.type_.clone());
        data.extend(volume.encrypted.map(|e| e.to_string()));
    }
    if let Some(config) = &pool.provider_config {
        data.push(config.to_string());
    }
    data
}

/// The pool hash (5 characters) with explicit provider data.
///
/// Rolling pools: [`worker_pool_hash_v2`] over the node-agent secret name
/// and `additional`. In-place pools: the same chain over the node-agent
/// secret name, the [`in_place_update_hash`] and `additional_in_place`.
pub fn worker_pool_hash_with(
    pool: &WorkerPool,
    shoot: &ShootFacts,
    additional: &[String],
    additional_in_place: &[String],
) -> Result<String, Error> {
    let secret_name = pool_node_agent_secret_name(pool, shoot)?;
    if pool.is_in_place() {
        let mut items = vec![secret_name, in_place_update_hash(pool, shoot)?];
        items.extend(additional_in_place.iter().cloned());
        Ok(chained_hash(&items, POOL_HASH_LENGTH))
    } else {
        Ok(worker_pool_hash_v2(&secret_name, additional))
    }
}

/// The pool hash of a `local` pool: [`worker_pool_hash_with`] with
/// [`local_additional_hash_data`] for rolling pools and no extras for
/// in-place pools (whose provider config may change without new machines).
pub fn worker_pool_hash(pool: &WorkerPool, shoot: &ShootFacts) -> Result<String, Error> {
    worker_pool_hash_with(pool, shoot, &local_additional_hash_data(pool), &[])
}
