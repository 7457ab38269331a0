//! Admission for druid.gardener.cloud in the embedded API server: the
//! Etcd and EtcdCopyBackupsTask CRDs are installed at start, and the rules
//! upstream's CRDs write as CEL (replicas only grow or go to 0, immutable
//! fields, garbage collection slower than delta snapshots) are checked by
//! `druid::validation`, so a violation is a 422 with field causes.

// Admission answers are full metav1.Status errors, as in the apiserver crate.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use apimachinery::ApiError;
use apiserver::{AdmissionPlugin, Attributes, Operation, Server};
use serde_json::Value;

use crate::machine_admission::decode_in;

const GROUP: &str = "druid.gardener.cloud";

pub struct DruidAdmission;

/// The replica count a write asks for: the Etcd's, or a Scale's.
fn replicas(obj: &Value) -> Option<i64> {
    obj.pointer("/spec/replicas").and_then(Value::as_i64)
}

#[async_trait::async_trait]
impl AdmissionPlugin for DruidAdmission {
    fn name(&self) -> &str {
        "DruidValidation"
    }

    async fn validate(&self, attrs: &Attributes<'_>, obj: &Value) -> Result<(), ApiError> {
        if attrs.resource.group != GROUP || attrs.operation == Operation::Delete {
            return Ok(());
        }
        let kind = attrs.resource.kind.as_str();
        let causes = match (kind, attrs.subresource, attrs.old) {
            // Status is written by the controllers only.
            (_, Some("status"), _) => Vec::new(),
            ("Etcd", Some("scale"), Some(old)) => {
                let (old, new) = (replicas(old).unwrap_or(0), replicas(obj).unwrap_or(0));
                if new != 0 && new < old {
                    vec![apimachinery::Cause::invalid(
                        "spec.replicas",
                        format!(
                            "Invalid value: {new}: Replicas can either be increased or be downscaled to 0 (was {old})"
                        ),
                    )]
                } else {
                    Vec::new()
                }
            }
            ("Etcd", None, None) => {
                druid::validation::validate(&decode_in::<druid::Etcd>(GROUP, obj, kind)?.spec)
            }
            ("Etcd", None, Some(old)) => druid::validation::validate_update(
                &decode_in::<druid::Etcd>(GROUP, old, kind)?.spec,
                &decode_in::<druid::Etcd>(GROUP, obj, kind)?.spec,
            ),
            ("EtcdCopyBackupsTask", None, None) => druid::validation::validate_copy_task(
                &decode_in::<druid::EtcdCopyBackupsTask>(GROUP, obj, kind)?.spec,
            ),
            ("EtcdCopyBackupsTask", None, Some(old)) => {
                druid::validation::validate_copy_task_update(
                    &decode_in::<druid::EtcdCopyBackupsTask>(GROUP, old, kind)?.spec,
                    &decode_in::<druid::EtcdCopyBackupsTask>(GROUP, obj, kind)?.spec,
                )
            }
            _ => Vec::new(),
        };
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(GROUP, kind, attrs.name, causes))
        }
    }
}

/// Installs the druid CRDs and the admission plugin.
pub async fn prepare(server: &Arc<Server>) -> anyhow::Result<()> {
    for crd in druid::crd::crds() {
        apiserver::crd::install(server, &serde_json::to_value(&crd)?).await?;
    }
    server.add_admission(Arc::new(DruidAdmission));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::json;

    async fn server() -> kube::Client {
        let store: Arc<dyn store::Store> = Arc::new(store::MemoryStore::new());
        let server = Server::start(store, apiserver::Config::default())
            .await
            .unwrap();
        prepare(&server).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let s = server.clone();
        tokio::spawn(async move { s.serve(listener, std::future::pending()).await });
        let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    fn etcd(replicas: i64) -> druid::Etcd {
        serde_json::from_value(json!({
            "apiVersion": "druid.gardener.cloud/v1alpha1",
            "kind": "Etcd",
            "metadata": {"name": "e", "namespace": "default"},
            "spec": {
                "replicas": replicas,
                "labels": {"app": "etcd-statefulset"},
                "backup": {"store": {"provider": "Local", "prefix": "e", "container": "default.bkp"}},
            },
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn scenario_11_replicas_only_grow_or_go_to_zero_at_admission() {
        let client = server().await;
        let api: Api<druid::Etcd> = Api::namespaced(client, "default");
        api.create(&PostParams::default(), &etcd(3)).await.unwrap();
        let patch = |n: i64| Patch::Merge(json!({"spec": {"replicas": n}}));
        let err = api
            .patch("e", &PatchParams::default(), &patch(2))
            .await
            .expect_err("3 → 2 is rejected");
        match err {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 422);
                assert!(s.message.contains("spec.replicas"), "{}", s.message);
            }
            other => panic!("{other}"),
        }
        let zero = api
            .patch("e", &PatchParams::default(), &patch(0))
            .await
            .unwrap();
        assert_eq!(zero.spec.replicas, 0);
        let back = api
            .patch("e", &PatchParams::default(), &patch(3))
            .await
            .unwrap();
        assert_eq!(back.spec.replicas, 3);
        // Immutable storage class.
        let err = api
            .patch(
                "e",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"storageClass": "fast"}})),
            )
            .await
            .expect_err("storageClass is immutable");
        assert!(
            matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.storageClass"))
        );
        // A bad spec on create.
        let mut bad = etcd(1);
        bad.metadata.name = Some("bad".into());
        bad.spec.backup.garbage_collection_period = Some("10s".into());
        bad.spec.backup.delta_snapshot_period = Some("20s".into());
        let err = api
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("gc ≤ delta");
        assert!(
            matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("garbageCollectionPeriod"))
        );
    }
}
