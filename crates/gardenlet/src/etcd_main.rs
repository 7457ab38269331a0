//! Each shoot's `etcd-main`: an etcd-druid `Etcd` in the control namespace
//! whose members the seed's runtime runs, backed up to a `Local` store, as
//! upstream gardenlet deploys it. The shoot's API server keeps its objects
//! there (through `store-etcd`) instead of in a store of its own.
//!
//! The desired object and the readiness verdict are pure; [`ensure`] and
//! [`delete`] are the thin calls around them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use druid::types::{BackupSpec, Etcd, EtcdSpec, StoreSpec};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// The Etcd's name in every control namespace (upstream's).
pub const NAME: &str = "etcd-main";
/// The client Service druid creates for it.
pub const CLIENT_SERVICE: &str = "etcd-main-client";
/// etcd's client port on that Service.
pub const CLIENT_PORT: u16 = 2379;
/// The backup-restore sidecar's port on that Service.
pub const BACKUP_PORT: u16 = 8080;

/// Where etcd-main's snapshots go.
#[derive(Clone, Debug)]
pub struct EtcdMainConfig {
    /// The `Local` store's container (a directory under druid's local
    /// backup root) shared by every shoot; each shoot has its own prefix.
    pub container: String,
    /// druid's local backup root, when this gardenlet may remove a deleted
    /// shoot's backups itself (upstream's BackupEntry deletion).
    pub local_backup_root: Option<PathBuf>,
}

impl Default for EtcdMainConfig {
    fn default() -> Self {
        EtcdMainConfig {
            container: "shoots".to_string(),
            local_backup_root: None,
        }
    }
}

/// Whether the shoot asks for a highly available control plane
/// (`spec.controlPlane.highAvailability.failureTolerance.type` set, as
/// upstream's `node` or `zone`): etcd-main then has 3 members.
pub fn high_availability(raw_shoot: &Value) -> bool {
    raw_shoot
        .pointer("/spec/controlPlane/highAvailability/failureTolerance/type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty())
}

/// The backup prefix of a shoot: upstream's BackupEntry name
/// (`<technicalID>--<shoot UID>`) and the Etcd's name.
pub fn backup_prefix(technical_id: &str, shoot_uid: &str) -> String {
    format!("{technical_id}--{shoot_uid}/{NAME}")
}

/// The etcd-main gardenlet wants in control namespace `technical_id`.
pub fn desired(
    technical_id: &str,
    shoot_uid: &str,
    high_availability: bool,
    config: &EtcdMainConfig,
) -> Etcd {
    let labels: BTreeMap<String, String> = [
        ("gardener.cloud/role", "controlplane"),
        ("role", "main"),
        ("app", "etcd-statefulset"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Etcd {
        metadata: ObjectMeta {
            name: Some(NAME.to_string()),
            namespace: Some(technical_id.to_string()),
            labels: Some(
                [("gardener.cloud/role", "controlplane"), ("role", "main")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: EtcdSpec {
            labels,
            replicas: if high_availability { 3 } else { 1 },
            backup: BackupSpec {
                store: Some(StoreSpec {
                    provider: Some("Local".to_string()),
                    container: Some(config.container.clone()),
                    prefix: backup_prefix(technical_id, shoot_uid),
                    ..StoreSpec::default()
                }),
                // Upstream gardenlet's etcd-main settings.
                full_snapshot_schedule: Some("0 */24 * * *".to_string()),
                garbage_collection_policy: Some("Exponential".to_string()),
                delta_snapshot_period: Some("5m".to_string()),
                ..BackupSpec::default()
            },
            ..EtcdSpec::default()
        },
        status: None,
    }
}

/// Whether etcd-main serves, from its status and its client Service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Clients reach it at this URL.
    Ready { endpoint: String },
    /// Not yet, and why (said in the Shoot's last operation).
    Waiting(String),
}

/// The verdict on an observed etcd-main and its client Service.
pub fn readiness(etcd: Option<&Etcd>, service: Option<&Service>) -> Readiness {
    let Some(etcd) = etcd else {
        return Readiness::Waiting(format!("Waiting for {NAME} to be created."));
    };
    let status = etcd.status.clone().unwrap_or_default();
    let ready_condition = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    if !ready_condition || status.ready != Some(true) {
        return Readiness::Waiting(format!(
            "Waiting for {NAME} to be ready ({}/{} members ready).",
            status.ready_replicas, etcd.spec.replicas
        ));
    }
    let ip = service
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    match ip {
        Some(ip) => Readiness::Ready {
            endpoint: format!("http://{ip}:{CLIENT_PORT}"),
        },
        None => Readiness::Waiting(format!(
            "Waiting for the Service {CLIENT_SERVICE} to get a cluster IP."
        )),
    }
}

/// Creates etcd-main when absent, grows it to 3 members when the shoot
/// turned highly available (an Etcd never shrinks but to 0), and reports
/// whether it serves.
pub async fn ensure(seed: &kube::Client, desired: &Etcd) -> Result<Readiness, kube::Error> {
    let ns = desired.metadata.namespace.as_deref().unwrap_or_default();
    let etcds: Api<Etcd> = Api::namespaced(seed.clone(), ns);
    let current = match etcds.get_opt(NAME).await? {
        Some(e) => e,
        None => etcds.create(&PostParams::default(), desired).await?,
    };
    if current.spec.replicas < desired.spec.replicas {
        // Growing, or waking up from hibernation (0) on the kept volumes.
        scale(&etcds, desired.spec.replicas).await?;
    }
    let service = Api::<Service>::namespaced(seed.clone(), ns)
        .get_opt(CLIENT_SERVICE)
        .await?;
    Ok(readiness(Some(&current), service.as_ref()))
}

/// Sets etcd-main's replicas with druid's operation annotation (druid
/// applies a spec change only when asked, as upstream gardenlet asks).
async fn scale(etcds: &Api<Etcd>, replicas: i32) -> Result<(), kube::Error> {
    etcds
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"gardener.cloud/operation": "reconcile"}},
                "spec": {"replicas": replicas},
            })),
        )
        .await
        .map(|_| ())
}

/// Whether etcd-main is hibernated (scaled to 0).
pub async fn hibernated(seed: &kube::Client, technical_id: &str) -> Result<bool, kube::Error> {
    let etcds: Api<Etcd> = Api::namespaced(seed.clone(), technical_id);
    Ok(etcds
        .get_opt(NAME)
        .await?
        .is_some_and(|e| e.spec.replicas == 0))
}

/// Hibernates etcd-main: druid takes a last full snapshot, then scales its
/// members to 0, keeping their volumes.
pub async fn hibernate(seed: &kube::Client, technical_id: &str) -> Result<(), kube::Error> {
    let etcds: Api<Etcd> = Api::namespaced(seed.clone(), technical_id);
    match etcds.get_opt(NAME).await? {
        Some(e) if e.spec.replicas > 0 => scale(&etcds, 0).await,
        _ => Ok(()),
    }
}

/// Deletes etcd-main (druid removes its members and volumes) and, when
/// this gardenlet knows where they are, the shoot's backups.
pub async fn delete(
    seed: &kube::Client,
    technical_id: &str,
    shoot_uid: &str,
    config: &EtcdMainConfig,
) -> Result<(), kube::Error> {
    let etcds: Api<Etcd> = Api::namespaced(seed.clone(), technical_id);
    match etcds.delete(NAME, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e),
    }
    if let Some(root) = &config.local_backup_root {
        let dir = backups_dir(root, config, technical_id, shoot_uid);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(dir = %dir.display(), "removed the shoot's etcd-main backups"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "removing the shoot's etcd-main backups failed")
            }
        }
    }
    Ok(())
}

/// The directory of a shoot's backups in the Local store (its BackupEntry:
/// the prefix without the Etcd's name).
pub fn backups_dir(
    root: &Path,
    config: &EtcdMainConfig,
    technical_id: &str,
    shoot_uid: &str,
) -> PathBuf {
    root.join(&config.container)
        .join(format!("{technical_id}--{shoot_uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use druid::types::{Condition, EtcdStatus};
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn etcd(replicas: i32, ready: Option<bool>, condition: &str, ready_replicas: i32) -> Etcd {
        let mut e = desired(
            "shoot--p--s",
            "u1",
            replicas == 3,
            &EtcdMainConfig::default(),
        );
        e.status = Some(EtcdStatus {
            ready,
            ready_replicas,
            conditions: vec![Condition {
                type_: "Ready".into(),
                status: condition.into(),
                ..Condition::default()
            }],
            ..EtcdStatus::default()
        });
        e
    }

    fn service(ip: Option<&str>) -> Service {
        Service {
            spec: Some(ServiceSpec {
                cluster_ip: ip.map(str::to_string),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        }
    }

    #[test]
    fn the_desired_etcd_main_follows_upstream() {
        let e = desired("shoot--p--s", "u1", false, &EtcdMainConfig::default());
        assert_eq!(e.metadata.name.as_deref(), Some("etcd-main"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("shoot--p--s"));
        assert_eq!(e.spec.replicas, 1);
        let store = e.spec.backup.store.unwrap();
        assert_eq!(store.provider.as_deref(), Some("Local"));
        assert_eq!(store.prefix, "shoot--p--s--u1/etcd-main");
        assert_eq!(e.spec.labels["role"], "main");
        let ha = desired("shoot--p--s", "u1", true, &EtcdMainConfig::default());
        assert_eq!(ha.spec.replicas, 3);
    }

    #[test]
    fn high_availability_is_read_from_the_failure_tolerance() {
        let t = |v: Value| high_availability(&json!({"spec": v}));
        assert!(!t(json!({})));
        assert!(!t(json!({"controlPlane": {}})));
        assert!(t(
            json!({"controlPlane": {"highAvailability": {"failureTolerance": {"type": "zone"}}}})
        ));
        assert!(t(
            json!({"controlPlane": {"highAvailability": {"failureTolerance": {"type": "node"}}}})
        ));
        assert!(!t(
            json!({"controlPlane": {"highAvailability": {"failureTolerance": {"type": ""}}}})
        ));
    }

    #[test]
    fn readiness_needs_ready_members_and_a_cluster_ip() {
        type Case = (
            &'static str,
            Option<Etcd>,
            Option<Service>,
            Option<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("absent", None, None, None),
            (
                "no status yet",
                Some(desired("ns", "u", false, &EtcdMainConfig::default())),
                Some(service(Some("127.2.0.1"))),
                None,
            ),
            (
                "condition false",
                Some(etcd(1, Some(false), "False", 0)),
                Some(service(Some("127.2.0.1"))),
                None,
            ),
            (
                "condition true but not all replicas ready",
                Some(etcd(3, Some(false), "True", 2)),
                Some(service(Some("127.2.0.1"))),
                None,
            ),
            (
                "ready without a service",
                Some(etcd(1, Some(true), "True", 1)),
                None,
                None,
            ),
            (
                "ready on a headless service",
                Some(etcd(1, Some(true), "True", 1)),
                Some(service(Some("None"))),
                None,
            ),
            (
                "ready",
                Some(etcd(1, Some(true), "True", 1)),
                Some(service(Some("127.2.0.1"))),
                Some("http://127.2.0.1:2379"),
            ),
        ];
        for (name, e, s, want) in cases {
            let got = readiness(e.as_ref(), s.as_ref());
            match want {
                Some(url) => assert_eq!(
                    got,
                    Readiness::Ready {
                        endpoint: url.to_string()
                    },
                    "{name}"
                ),
                None => assert!(matches!(got, Readiness::Waiting(_)), "{name}: {got:?}"),
            }
        }
    }

    #[test]
    fn a_shoots_backups_are_its_entry_under_the_container() {
        let c = EtcdMainConfig {
            container: "shoots".into(),
            local_backup_root: Some("/d/backupbuckets".into()),
        };
        assert_eq!(
            backups_dir(Path::new("/d/backupbuckets"), &c, "shoot--p--s", "u1"),
            PathBuf::from("/d/backupbuckets/shoots/shoot--p--s--u1")
        );
    }
}
