//! The Leases druid reads (`br:pkg/health/heartbeat`): each member renews
//! its own member Lease (holderIdentity `<memberID>:<clusterID>:<role>`
//! in hex, annotation `member.etcd.gardener.cloud/tls-enabled`), and the
//! leading member records its snapshots in the full- and delta-snapshot
//! Leases (holderIdentity = the last revision, renewTime = when the
//! snapshot was taken). What goes into a Lease is decided here purely;
//! [`Leases`] only patches.

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::snapshot::Snapshot;

pub const TLS_ENABLED_ANNOTATION: &str = "member.etcd.gardener.cloud/tls-enabled";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "Leader",
            Role::Member => "Member",
        }
    }
}

/// `<memberID>:<clusterID>:<role>`, the IDs in lower-case hex as etcd
/// prints them.
pub fn holder_identity(member_id: u64, cluster_id: u64, role: Role) -> String {
    format!("{member_id:x}:{cluster_id:x}:{}", role.as_str())
}

fn micro_time(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// The merge patch renewing a member Lease at `now` (unix seconds).
pub fn member_patch(holder: &str, tls_enabled: bool, now: i64) -> Value {
    json!({
        "metadata": {"annotations": {TLS_ENABLED_ANNOTATION: tls_enabled.to_string()}},
        "spec": {"holderIdentity": holder, "renewTime": micro_time(now)},
    })
}

/// The merge patch of a snapshot Lease for `snap`; `None` when the Lease
/// already records a later revision (the full-snapshot Lease only grows).
pub fn snapshot_patch(current_holder: Option<&str>, snap: &Snapshot) -> Option<Value> {
    let current = current_holder.and_then(|h| h.parse::<i64>().ok());
    if current.is_some_and(|c| c > snap.last_revision) {
        return None;
    }
    Some(json!({
        "spec": {
            "holderIdentity": snap.last_revision.to_string(),
            "renewTime": micro_time(snap.created),
        },
    }))
}

/// Lease names of one member.
#[derive(Clone, Debug)]
pub struct LeaseNames {
    pub member: String,
    pub full_snapshot: Option<String>,
    pub delta_snapshot: Option<String>,
}

/// Patches Leases in one namespace.
#[derive(Clone)]
pub struct Leases {
    api: Api<Lease>,
    pub names: LeaseNames,
}

impl Leases {
    pub fn new(client: kube::Client, namespace: &str, names: LeaseNames) -> Leases {
        Leases {
            api: Api::namespaced(client, namespace),
            names,
        }
    }

    async fn patch(&self, name: &str, patch: Value) -> Result<(), kube::Error> {
        self.api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    }

    pub async fn renew_member(&self, holder: &str, tls: bool) -> Result<(), kube::Error> {
        let now = chrono::Utc::now().timestamp();
        self.patch(&self.names.member, member_patch(holder, tls, now))
            .await
    }

    /// Records `snap` in the full- or delta-snapshot Lease.
    pub async fn record_snapshot(&self, snap: &Snapshot) -> Result<(), kube::Error> {
        let name = match snap.kind {
            crate::snapshot::Kind::Full => &self.names.full_snapshot,
            crate::snapshot::Kind::Delta => &self.names.delta_snapshot,
        };
        let Some(name) = name else { return Ok(()) };
        let current = self.api.get_opt(name).await?;
        let holder = current
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone());
        match snapshot_patch(holder.as_deref(), snap) {
            Some(p) => self.patch(name, p).await,
            None => Ok(()),
        }
    }

    /// Renews the delta Lease when no delta was taken yet (holder "0"), so
    /// BackupReady can see deltas are being watched for.
    pub async fn renew_delta_idle(&self, last_delta: Option<&Snapshot>) -> Result<(), kube::Error> {
        let Some(name) = &self.names.delta_snapshot else {
            return Ok(());
        };
        let holder = last_delta.map_or("0".to_string(), |d| d.last_revision.to_string());
        let now = chrono::Utc::now().timestamp();
        self.patch(
            name,
            json!({"spec": {"holderIdentity": holder, "renewTime": micro_time(now)}}),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Compression;

    #[test]
    fn holder_identity_is_hex_ids_and_the_role() {
        assert_eq!(
            holder_identity(0xabc, 0xdef, Role::Leader),
            "abc:def:Leader"
        );
        assert_eq!(
            holder_identity(0x8e9e05c52164694d, 0xcdf818194e3a8c32, Role::Member),
            "8e9e05c52164694d:cdf818194e3a8c32:Member"
        );
        let p = member_patch("a:b:Member", false, 1_700_000_000);
        assert_eq!(p["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
        assert_eq!(
            p["metadata"]["annotations"][TLS_ENABLED_ANNOTATION],
            "false"
        );
    }

    #[test]
    fn snapshot_leases_hold_the_last_revision_and_never_go_back() {
        let full = Snapshot::full(1500, 1_700_000_000, Compression::None);
        for (current, want) in [
            (None, Some("1500")),
            (Some("garbage"), Some("1500")),
            (Some("1000"), Some("1500")),
            (Some("1500"), Some("1500")),
            (Some("2000"), None),
        ] {
            let got = snapshot_patch(current, &full);
            assert_eq!(
                got.as_ref()
                    .map(|p| p["spec"]["holderIdentity"].as_str().unwrap()),
                want,
                "{current:?}"
            );
        }
        let p = snapshot_patch(None, &full).unwrap();
        assert_eq!(p["spec"]["renewTime"], "2023-11-14T22:13:20.000000Z");
    }
}
