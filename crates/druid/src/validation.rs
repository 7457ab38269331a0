//! The rules upstream's CRD writes as CEL (`x-kubernetes-validations`) and
//! etcd-druid's webhook checks, as pure functions returning field causes,
//! so the embedded API server (and `trellis admission-webhook`) answer 422
//! with the same fields kube-apiserver would name.

use apimachinery::status::Cause;

use crate::duration;
use crate::types::{EtcdCopyBackupsTaskSpec, EtcdSpec, StoreSpec};

/// The store providers upstream knows (`internal/store/store.go`), under
/// both their infrastructure and backup-restore names.
pub const PROVIDERS: &[&str] = &[
    "aws",
    "S3",
    "azure",
    "ABS",
    "gcp",
    "GCS",
    "alicloud",
    "OSS",
    "openstack",
    "Swift",
    "stackit",
    "Local",
    "local",
];

fn store_causes(store: &StoreSpec, path: &str, out: &mut Vec<Cause>) {
    if store.prefix.is_empty() {
        out.push(Cause::required(format!("{path}.prefix")));
    }
    if let Some(p) = &store.provider
        && !PROVIDERS.contains(&p.as_str())
    {
        out.push(Cause::new(
            "FieldValueNotSupported",
            format!("{path}.provider"),
            format!(
                "Unsupported value: {p:?}: supported values: {}",
                PROVIDERS.join(", ")
            ),
        ));
    }
}

fn duration_cause(value: &Option<String>, path: &str, out: &mut Vec<Cause>) {
    if let Some(v) = value
        && duration::parse(v).is_none()
    {
        out.push(Cause::invalid(
            path,
            format!("Invalid value: {v:?}: must be a duration such as 20s or 1h"),
        ));
    }
}

/// Rules of every Etcd, created or updated.
pub fn validate(spec: &EtcdSpec) -> Vec<Cause> {
    let mut out = Vec::new();
    if spec.replicas < 0 {
        out.push(Cause::invalid(
            "spec.replicas",
            "Invalid value: must be greater than or equal to 0",
        ));
    }
    if spec.labels.is_empty() {
        out.push(Cause::required("spec.labels"));
    }
    let b = &spec.backup;
    if let Some(store) = &b.store {
        store_causes(store, "spec.backup.store", &mut out);
    }
    for (value, path) in [
        (&b.delta_snapshot_period, "spec.backup.deltaSnapshotPeriod"),
        (
            &b.garbage_collection_period,
            "spec.backup.garbageCollectionPeriod",
        ),
        (
            &b.delta_snapshot_retention_period,
            "spec.backup.deltaSnapshotRetentionPeriod",
        ),
        (&b.etcd_snapshot_timeout, "spec.backup.etcdSnapshotTimeout"),
        (&spec.etcd.heartbeat_duration, "spec.etcd.heartbeatDuration"),
        (
            &spec.etcd.etcd_defrag_timeout,
            "spec.etcd.etcdDefragTimeout",
        ),
    ] {
        duration_cause(value, path, &mut out);
    }
    // CEL: garbageCollectionPeriod must exceed deltaSnapshotPeriod.
    let gc = b
        .garbage_collection_period
        .as_deref()
        .and_then(duration::parse);
    let delta = b.delta_snapshot_period.as_deref().and_then(duration::parse);
    if let (Some(gc), Some(delta)) = (gc, delta)
        && gc <= delta
    {
        out.push(Cause::invalid(
            "spec.backup.garbageCollectionPeriod",
            "garbageCollectionPeriod must be greater than deltaSnapshotPeriod",
        ));
    }
    if let Some(p) = &b.garbage_collection_policy
        && p != "Exponential"
        && p != "LimitBased"
    {
        out.push(Cause::new(
            "FieldValueNotSupported",
            "spec.backup.garbageCollectionPolicy",
            format!("Unsupported value: {p:?}: supported values: \"Exponential\", \"LimitBased\""),
        ));
    }
    if let Some(p) = b.compression.as_ref().and_then(|c| c.policy.as_ref())
        && !["gzip", "lzw", "zlib"].contains(&p.as_str())
    {
        out.push(Cause::new(
            "FieldValueNotSupported",
            "spec.backup.compression.policy",
            format!("Unsupported value: {p:?}: supported values: \"gzip\", \"lzw\", \"zlib\""),
        ));
    }
    out
}

/// Rules of an update: [`validate`] plus upstream's transition rules.
pub fn validate_update(old: &EtcdSpec, new: &EtcdSpec) -> Vec<Cause> {
    let mut out = validate(new);
    // CEL: replicas may only grow, or go to 0 (hibernation).
    if new.replicas != 0 && new.replicas < old.replicas {
        out.push(Cause::invalid(
            "spec.replicas",
            format!(
                "Invalid value: {}: Replicas can either be increased or be downscaled to 0 (was {})",
                new.replicas, old.replicas
            ),
        ));
    }
    let immutable = |field: &str, changed: bool, out: &mut Vec<Cause>| {
        if changed {
            out.push(Cause::invalid(field, "Invalid value: field is immutable"));
        }
    };
    immutable(
        "spec.storageClass",
        old.storage_class != new.storage_class,
        &mut out,
    );
    immutable(
        "spec.volumeClaimTemplate",
        old.volume_claim_template != new.volume_claim_template,
        &mut out,
    );
    out
}

/// Rules of an EtcdCopyBackupsTask.
pub fn validate_copy_task(spec: &EtcdCopyBackupsTaskSpec) -> Vec<Cause> {
    let mut out = Vec::new();
    store_causes(&spec.source_store, "spec.sourceStore", &mut out);
    store_causes(&spec.target_store, "spec.targetStore", &mut out);
    if let Some(w) = &spec.wait_for_final_snapshot {
        duration_cause(&w.timeout, "spec.waitForFinalSnapshot.timeout", &mut out);
    }
    out
}

/// An EtcdCopyBackupsTask's spec never changes (upstream: immutable).
pub fn validate_copy_task_update(
    old: &EtcdCopyBackupsTaskSpec,
    new: &EtcdCopyBackupsTaskSpec,
) -> Vec<Cause> {
    let mut out = validate_copy_task(new);
    if old != new {
        out.push(Cause::invalid("spec", "Invalid value: field is immutable"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::BackupSpec;

    fn spec(replicas: i32) -> EtcdSpec {
        EtcdSpec {
            replicas,
            labels: [("app".to_string(), "etcd".to_string())].into(),
            backup: BackupSpec {
                store: Some(StoreSpec {
                    prefix: "e".into(),
                    provider: Some("Local".into()),
                    container: Some("default.bkp".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn fields(c: &[Cause]) -> Vec<&str> {
        c.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn scenario_11_replicas_may_grow_or_go_to_zero_only() {
        let cases = [
            (3, 2, false),
            (3, 1, false),
            (3, 0, true),
            (3, 3, true),
            (1, 3, true),
            (0, 1, true),
            (0, 3, true),
        ];
        for (old, new, ok) in cases {
            let causes = validate_update(&spec(old), &spec(new));
            assert_eq!(causes.is_empty(), ok, "{old} → {new}: {causes:?}");
            if !ok {
                assert_eq!(fields(&causes), ["spec.replicas"]);
            }
        }
    }

    #[test]
    fn immutable_fields_and_rules_of_every_etcd() {
        let old = spec(1);
        let mut new = spec(1);
        new.storage_class = Some("fast".into());
        new.volume_claim_template = Some("other".into());
        assert_eq!(
            fields(&validate_update(&old, &new)),
            ["spec.storageClass", "spec.volumeClaimTemplate"]
        );
        let mut bad = spec(-1);
        bad.labels.clear();
        bad.backup.store.as_mut().unwrap().prefix.clear();
        bad.backup.store.as_mut().unwrap().provider = Some("Floppy".into());
        bad.backup.delta_snapshot_period = Some("60s".into());
        bad.backup.garbage_collection_period = Some("30s".into());
        bad.backup.garbage_collection_policy = Some("Random".into());
        bad.etcd.heartbeat_duration = Some("soon".into());
        assert_eq!(
            fields(&validate(&bad)),
            [
                "spec.replicas",
                "spec.labels",
                "spec.backup.store.prefix",
                "spec.backup.store.provider",
                "spec.etcd.heartbeatDuration",
                "spec.backup.garbageCollectionPeriod",
                "spec.backup.garbageCollectionPolicy",
            ]
        );
        assert!(validate(&spec(3)).is_empty());
    }

    #[test]
    fn copy_tasks_need_both_stores_and_never_change() {
        let task = EtcdCopyBackupsTaskSpec {
            source_store: StoreSpec {
                prefix: "a".into(),
                provider: Some("Local".into()),
                ..Default::default()
            },
            target_store: StoreSpec::default(),
            ..Default::default()
        };
        assert_eq!(
            fields(&validate_copy_task(&task)),
            ["spec.targetStore.prefix"]
        );
        let mut changed = task.clone();
        changed.max_backups = Some(3);
        assert!(fields(&validate_copy_task_update(&task, &changed)).contains(&"spec"));
    }
}
