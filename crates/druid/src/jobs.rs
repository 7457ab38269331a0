//! The Jobs druid runs (spec §7, §8): the compactor `<etcd>-compactor`
//! (backup-restore `compact`) and an EtcdCopyBackupsTask's
//! `<task>-worker` (backup-restore `copy`), built as JSON; and what a
//! Job's status means for the compaction condition and the task's
//! conditions. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use serde_json::{Value, json};

use crate::compaction::{JobOutcome, JobState};
use crate::components::{
    self, DEFAULT_BACKUP_IMAGE, Names, Settings, default_labels, store_provider,
};
use crate::types::{Condition, Etcd, EtcdCopyBackupsTask, EtcdCopyBackupsTaskStatus, StoreSpec};

/// The compactor's deadline: three hours.
pub const COMPACTION_DEADLINE_SECONDS: i64 = 3 * 3600;

/// Volumes, mounts and env of one store, with `prefix` naming them apart
/// (`""` for the target, `"source-"` for a copy's source) and `env_prefix`
/// (`""` or `SOURCE_`).
fn store_wiring(
    store: &StoreSpec,
    prefix: &str,
    env_prefix: &str,
    settings: &Settings,
) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let container = store.container.clone().unwrap_or_default();
    let env = vec![json!({"name": format!("{env_prefix}STORAGE_CONTAINER"), "value": container})];
    if store_provider(store.provider.as_deref()) == "Local" {
        let name = format!("{prefix}host-storage");
        let volume = json!({
            "name": name,
            "hostPath": {
                "path": format!("{}/{}", settings.local_backup_root.trim_end_matches('/'), container),
                "type": "DirectoryOrCreate",
            },
        });
        let mount = json!({"name": name, "mountPath": format!("/home/nonroot/{container}")});
        (vec![volume], vec![mount], env)
    } else if let Some(secret) = &store.secret_ref {
        let name = format!("{prefix}etcd-backup-secret");
        let volume =
            json!({"name": name, "secret": {"secretName": secret.name, "defaultMode": 0o640}});
        let dir = if prefix.is_empty() {
            "/var/etcd-backup/".to_string()
        } else {
            "/var/source-etcd-backup/".to_string()
        };
        let mount = json!({"name": name, "mountPath": dir});
        (vec![volume], vec![mount], env)
    } else {
        (Vec::new(), Vec::new(), env)
    }
}

fn job_labels(part_of: &str, component: &str, name: &str) -> BTreeMap<String, String> {
    let mut l = default_labels(part_of);
    l.insert("app.kubernetes.io/component".into(), component.into());
    l.insert("app.kubernetes.io/name".into(), name.into());
    l
}

/// The compactor Job of an Etcd with a store.
pub fn compactor_job(etcd: &Etcd, settings: &Settings) -> Value {
    let n = Names::of(etcd);
    let job_name = n.compactor_job();
    let b = &etcd.spec.backup;
    let labels = job_labels(&n.name, "etcd-compaction-job", &job_name);
    let mut pod_labels = etcd.spec.labels.clone();
    pod_labels.extend(labels.clone());
    let mut args = vec![
        "compact".to_string(),
        "--data-dir=/var/etcd/data/compaction.etcd".into(),
        "--restoration-temp-snapshots-dir=/var/etcd/data/compaction.restoration.temp".into(),
        "--snapstore-temp-directory=/var/etcd/data/tmp".into(),
        "--enable-snapshot-lease-renewal=true".into(),
        format!("--full-snapshot-lease-name={}", n.full_snapshot_lease()),
        format!("--delta-snapshot-lease-name={}", n.delta_snapshot_lease()),
        format!(
            "--etcd-snapshot-timeout={}",
            b.etcd_snapshot_timeout.as_deref().unwrap_or("15m")
        ),
        format!(
            "--etcd-defrag-timeout={}",
            etcd.spec
                .etcd
                .etcd_defrag_timeout
                .as_deref()
                .unwrap_or("15m")
        ),
    ];
    let (mut volumes, mut mounts, mut env) = (Vec::new(), Vec::new(), Vec::new());
    if let Some(store) = &b.store {
        args.push(format!(
            "--storage-provider={}",
            store_provider(store.provider.as_deref())
        ));
        args.push(format!("--store-prefix={}", store.prefix));
        let (v, m, e) = store_wiring(store, "", "", settings);
        volumes = v;
        mounts = m;
        env = e;
    }
    if let Some(q) = &etcd.spec.etcd.quota {
        let bytes = match q {
            Value::String(s) => components::parse_quantity(s),
            Value::Number(n) => n.as_u64(),
            _ => None,
        };
        if let Some(bytes) = bytes {
            args.push(format!("--embedded-etcd-quota-bytes={bytes}"));
        }
    }
    let c = b.compression.clone().unwrap_or_default();
    if c.enabled.unwrap_or(false) {
        args.push("--compress-snapshots=true".into());
        args.push(format!(
            "--compression-policy={}",
            c.policy.unwrap_or_else(|| "gzip".into())
        ));
    }
    mounts.insert(
        0,
        json!({"name": "etcd-workspace-dir", "mountPath": "/var/etcd/data"}),
    );
    volumes.insert(0, json!({"name": "etcd-workspace-dir", "emptyDir": {}}));
    env.push(json!({"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}));
    let resources = b
        .snapshot_compaction
        .as_ref()
        .and_then(|s| s.resources.clone())
        .or_else(|| b.compaction_resources.clone())
        .map(|r| json!(r))
        .unwrap_or_else(|| json!({"requests": {"cpu": "600m", "memory": "3Gi"}}));
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": n.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "druid.gardener.cloud/v1alpha1",
                "kind": "Etcd",
                "name": n.name,
                "uid": n.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "activeDeadlineSeconds": COMPACTION_DEADLINE_SECONDS,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": pod_labels, "annotations": etcd.spec.annotations},
                "spec": {
                    "activeDeadlineSeconds": COMPACTION_DEADLINE_SECONDS,
                    "serviceAccountName": n.name,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "compact-backup",
                        "image": b.image.clone().unwrap_or_else(|| DEFAULT_BACKUP_IMAGE.into()),
                        "imagePullPolicy": "IfNotPresent",
                        "args": args,
                        "env": env,
                        "resources": resources,
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// `<task>-worker`.
pub fn copy_job_name(task: &EtcdCopyBackupsTask) -> String {
    format!(
        "{}-worker",
        task.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The copy Job of an EtcdCopyBackupsTask.
pub fn copy_job(task: &EtcdCopyBackupsTask, settings: &Settings) -> Value {
    let name = task.metadata.name.clone().unwrap_or_default();
    let job_name = copy_job_name(task);
    let s = &task.spec;
    let labels = job_labels(&name, "etcd-copy-backups-task", &job_name);
    let mut pod_labels = s.pod_labels.clone();
    pod_labels.extend(labels.clone());
    let mut args = vec![
        "copy".to_string(),
        "--snapstore-temp-directory=/home/nonroot/data/temp".into(),
        format!(
            "--storage-provider={}",
            store_provider(s.target_store.provider.as_deref())
        ),
        format!("--store-prefix={}", s.target_store.prefix),
        format!(
            "--source-store-provider={}",
            store_provider(s.source_store.provider.as_deref())
        ),
        format!("--source-store-prefix={}", s.source_store.prefix),
    ];
    if let Some(c) = &s.target_store.container {
        args.push(format!("--store-container={c}"));
    }
    if let Some(c) = &s.source_store.container {
        args.push(format!("--source-store-container={c}"));
    }
    if let Some(age) = s.max_backup_age {
        args.push(format!("--max-backup-age={age}"));
    }
    if let Some(max) = s.max_backups {
        args.push(format!("--max-backups-to-copy={max}"));
    }
    if let Some(w) = &s.wait_for_final_snapshot {
        args.push(format!("--wait-for-final-snapshot={}", w.enabled));
        if let Some(t) = &w.timeout {
            args.push(format!("--wait-for-final-snapshot-timeout={t}"));
        }
    }
    let (mut volumes, mut mounts, mut env) = store_wiring(&s.target_store, "", "", settings);
    let (v, m, e) = store_wiring(&s.source_store, "source-", "SOURCE_", settings);
    volumes.extend(v);
    mounts.extend(m);
    env.extend(e);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name,
            "namespace": task.metadata.namespace,
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": "druid.gardener.cloud/v1alpha1",
                "kind": "EtcdCopyBackupsTask",
                "name": name,
                "uid": task.metadata.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{
                        "name": "copy-backups",
                        "image": DEFAULT_BACKUP_IMAGE,
                        "imagePullPolicy": "IfNotPresent",
                        "args": args,
                        "env": env,
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    })
}

fn job_condition<'a>(
    job: &'a Job,
    type_: &str,
) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
}

/// A failed compactor's pod, as far as the failure reason needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedPod {
    /// The reason of a `DisruptionTarget` condition, if the pod has one.
    pub disruption_reason: Option<String>,
    /// A container terminated with a non-zero exit code.
    pub process_failed: bool,
}

/// The compaction condition's reason for a failed Job: the deadline, a
/// disruption of its pod, a failed process, or unknown.
pub fn failure_reason(job_reason: Option<&str>, pod: Option<&FailedPod>) -> String {
    if job_reason == Some("DeadlineExceeded") {
        return "DeadlineExceeded".into();
    }
    match pod {
        Some(FailedPod {
            disruption_reason: Some(r),
            ..
        }) => r.clone(),
        Some(p) if p.process_failed => "ProcessFailure".into(),
        _ => "Unknown".into(),
    }
}

/// The compactor Job's state; `pod` is consulted only for a failed Job.
pub fn compactor_state(job: &Job, pod: Option<&FailedPod>) -> JobState {
    if job.metadata.deletion_timestamp.is_some() {
        return JobState::Terminating;
    }
    if job_condition(job, "Complete").is_some() {
        return JobState::Finished(JobOutcome::Succeeded);
    }
    if let Some(c) = job_condition(job, "Failed") {
        return JobState::Finished(JobOutcome::Failed(failure_reason(c.reason.as_deref(), pod)));
    }
    JobState::Active
}

/// Whether a Job has failed (so the failure reason needs its pod).
pub fn failed(job: &Job) -> bool {
    job_condition(job, "Failed").is_some()
}

/// The task's conditions from its Job: `Complete` → `Succeeded`, `Failed`
/// → `Failed`, each with the Job condition's status, reason and message;
/// transition times kept while a status holds.
pub fn copy_task_conditions(
    previous: &[Condition],
    job: &Job,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<Condition> {
    let mut out = previous.to_vec();
    let conds = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    for (from, to) in [("Complete", "Succeeded"), ("Failed", "Failed")] {
        if let Some(c) = conds.iter().find(|c| c.type_ == from) {
            crate::status::set_condition(
                &mut out,
                to,
                &c.status,
                c.reason.as_deref().unwrap_or(from),
                c.message.as_deref().unwrap_or_default(),
                now,
            );
        }
    }
    out
}

/// The task's status from its Job, or `None` when nothing but update
/// times would change (a write would only wake the controller again).
pub fn copy_task_status(
    previous: &EtcdCopyBackupsTaskStatus,
    job: &Job,
    generation: Option<i64>,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<EtcdCopyBackupsTaskStatus> {
    let conditions = copy_task_conditions(&previous.conditions, job, now);
    let last_error = conditions
        .iter()
        .find(|c| c.type_ == "Failed" && c.status == "True")
        .map(|c| c.message.clone())
        .or_else(|| previous.last_error.clone());
    let next = EtcdCopyBackupsTaskStatus {
        conditions,
        observed_generation: generation,
        last_error,
    };
    let strip = |s: &EtcdCopyBackupsTaskStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_update_time = None;
        }
        s
    };
    (strip(&next) != strip(previous)).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{BackupSpec, EtcdCopyBackupsTaskSpec, EtcdSpec, WaitForFinalSnapshotSpec};

    fn job(conditions: Value) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "e-compactor"},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn scenario_13_the_compactor_job_follows_upstream() {
        let mut e = Etcd::new(
            "e",
            EtcdSpec {
                replicas: 1,
                backup: BackupSpec {
                    store: Some(StoreSpec {
                        prefix: "e".into(),
                        provider: Some("Local".into()),
                        container: Some("bkp".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
        );
        e.metadata.namespace = Some("ns".into());
        let j = compactor_job(&e, &Settings::default());
        assert_eq!(j["metadata"]["name"], "e-compactor");
        assert_eq!(j["metadata"]["ownerReferences"][0]["kind"], "Etcd");
        assert_eq!(j["spec"]["backoffLimit"], 0);
        assert_eq!(j["spec"]["completions"], 1);
        assert_eq!(j["spec"]["activeDeadlineSeconds"], 10_800);
        let pod = &j["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        assert_eq!(pod["serviceAccountName"], "e");
        let args = pod["containers"][0]["args"].to_string();
        assert!(args.contains("\"compact\""));
        assert!(args.contains("--full-snapshot-lease-name=e-full-snap"));
        assert!(args.contains("--storage-provider=Local"));
        assert_eq!(
            pod["volumes"][1]["hostPath"]["path"],
            format!("{}/bkp", components::DEFAULT_LOCAL_BACKUP_ROOT)
        );
    }

    #[test]
    fn scenario_14_job_states_and_failure_reasons() {
        let done = job(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(
            compactor_state(&done, None),
            JobState::Finished(JobOutcome::Succeeded)
        );
        let late = job(json!([{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]));
        assert!(failed(&late));
        assert_eq!(
            compactor_state(&late, None),
            JobState::Finished(JobOutcome::Failed("DeadlineExceeded".into()))
        );
        let crashed =
            job(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]));
        let pod = FailedPod {
            process_failed: true,
            ..Default::default()
        };
        assert_eq!(
            compactor_state(&crashed, Some(&pod)),
            JobState::Finished(JobOutcome::Failed("ProcessFailure".into()))
        );
        let evicted = FailedPod {
            disruption_reason: Some("EvictionByEvictionAPI".into()),
            process_failed: true,
        };
        assert_eq!(
            failure_reason(Some("BackoffLimitExceeded"), Some(&evicted)),
            "EvictionByEvictionAPI"
        );
        assert_eq!(failure_reason(None, None), "Unknown");
        assert_eq!(compactor_state(&job(json!([])), None), JobState::Active);
        let mut going = done.clone();
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert_eq!(compactor_state(&going, None), JobState::Terminating);
    }

    fn task() -> EtcdCopyBackupsTask {
        let mut t = EtcdCopyBackupsTask::new(
            "t",
            EtcdCopyBackupsTaskSpec {
                source_store: StoreSpec {
                    prefix: "src".into(),
                    provider: Some("Local".into()),
                    container: Some("a".into()),
                    ..Default::default()
                },
                target_store: StoreSpec {
                    prefix: "dst".into(),
                    provider: Some("Local".into()),
                    container: Some("b".into()),
                    ..Default::default()
                },
                max_backups: Some(3),
                wait_for_final_snapshot: Some(WaitForFinalSnapshotSpec {
                    enabled: true,
                    timeout: Some("10m".into()),
                }),
                pod_labels: [("x".to_string(), "y".to_string())].into(),
                ..Default::default()
            },
        );
        t.metadata.namespace = Some("ns".into());
        t
    }

    #[test]
    fn scenario_18_the_copy_job_reads_the_source_through_source_prefixed_wiring() {
        let j = copy_job(&task(), &Settings::default());
        assert_eq!(j["metadata"]["name"], "t-worker");
        assert_eq!(
            j["metadata"]["ownerReferences"][0]["kind"],
            "EtcdCopyBackupsTask"
        );
        let pod = &j["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "OnFailure");
        assert_eq!(j["spec"]["template"]["metadata"]["labels"]["x"], "y");
        let c = &pod["containers"][0];
        let args = c["args"].to_string();
        for want in [
            "\"copy\"",
            "--store-prefix=dst",
            "--source-store-prefix=src",
            "--source-store-container=a",
            "--max-backups-to-copy=3",
            "--wait-for-final-snapshot=true",
            "--wait-for-final-snapshot-timeout=10m",
        ] {
            assert!(args.contains(want), "{want} in {args}");
        }
        let env = c["env"].to_string();
        assert!(env.contains("SOURCE_STORAGE_CONTAINER"), "{env}");
        let volumes: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(volumes, ["host-storage", "source-host-storage"]);
    }

    #[test]
    fn scenario_18_task_conditions_mirror_the_job() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let done = job(json!([{"type": "Complete", "status": "True", "reason": "Done"}]));
        let c = copy_task_conditions(&[], &done, now);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].type_.as_str(), c[0].status.as_str()),
            ("Succeeded", "True")
        );
        let failed = job(json!([{"type": "Failed", "status": "True", "message": "x"}]));
        let c = copy_task_conditions(&[], &failed, now);
        assert_eq!(
            (c[0].type_.as_str(), c[0].reason.as_str()),
            ("Failed", "Failed")
        );
        assert!(copy_task_conditions(&[], &job(json!([])), now).is_empty());
    }

    #[test]
    fn scenario_18_the_task_status_is_written_once_per_change() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let running = job(json!([]));
        let first = copy_task_status(&Default::default(), &running, Some(1), now).unwrap();
        assert_eq!(first.observed_generation, Some(1));
        assert_eq!(copy_task_status(&first, &running, Some(1), now), None);
        let failed = job(json!([{"type": "Failed", "status": "True", "message": "no source"}]));
        let s = copy_task_status(&first, &failed, Some(1), now).unwrap();
        assert_eq!(s.last_error.as_deref(), Some("no source"));
        let later = now + k8s_openapi::jiff::SignedDuration::from_secs(60);
        assert_eq!(copy_task_status(&s, &failed, Some(1), later), None);
    }
}
