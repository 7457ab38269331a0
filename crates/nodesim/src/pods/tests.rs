//! Table tests of the pod decisions: running, crash loops, restarts,
//! deletion, volumes, and stability (applying a decision makes the next one
//! a no-op).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Container, HostPathVolumeSource, PersistentVolumeClaimVolumeSource,
    PodSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::faults::{CRASH, RESTARTS};

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

const UP: PodHost<'static> = PodHost {
    running: true,
    host_ip: "10.250.0.1",
};

fn pod(annotations: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("p1".into()),
            namespace: Some("default".into()),
            uid: Some("uid-1".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            containers: vec![
                Container {
                    name: "app".into(),
                    image: Some("nginx".into()),
                    ..Container::default()
                },
                Container {
                    name: "side".into(),
                    image: Some("busybox".into()),
                    ..Container::default()
                },
            ],
            ..PodSpec::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            ..PodStatus::default()
        }),
    }
}

/// Applies a plan's status to the pod, as the API would.
fn apply(mut p: Pod, plan: PodPlan) -> Pod {
    match plan {
        PodPlan::Post(s) => p.status = Some(*s),
        other => panic!("expected a status, got {other:?}"),
    }
    p
}

fn containers(p: &Pod) -> Vec<(String, &'static str, Option<String>, bool, i32)> {
    p.status
        .as_ref()
        .unwrap()
        .container_statuses
        .iter()
        .flatten()
        .map(|c| {
            let (s, r) = state_sig(c.state.as_ref());
            (c.name.clone(), s, r, c.ready, c.restart_count)
        })
        .collect()
}

fn condition(p: &Pod, type_: &str) -> String {
    p.status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

#[test]
fn pending_pod_starts_running_and_stays_put() {
    let p = apply(pod(&[]), plan_pod(&pod(&[]), &UP, true, t(0)));
    let s = p.status.as_ref().unwrap();
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.host_ip.as_deref(), Some("10.250.0.1"));
    assert_eq!(s.pod_ip.as_deref(), Some(pod_ip("uid-1").as_str()));
    for c in [
        "Ready",
        "ContainersReady",
        "Initialized",
        "PodScheduled",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(condition(&p, c), "True", "{c}");
    }
    assert_eq!(
        containers(&p),
        [
            ("app".to_string(), "running", None, true, 0),
            ("side".to_string(), "running", None, true, 0)
        ]
    );
    // Deciding again later changes nothing: timestamps are not compared.
    assert_eq!(plan_pod(&p, &UP, true, t(60)), PodPlan::Nothing);
    // And the carried-over timestamps mean a rebuilt status is identical.
    let again = desired_pod_status(&p, &UP, true, t(60));
    assert_eq!(Some(&again), p.status.as_ref());
}

#[test]
fn plan_table() {
    let down = PodHost {
        running: false,
        ..UP
    };
    let mut deleting = pod(&[]);
    deleting.metadata.deletion_timestamp = Some(Time(t(0)));
    let mut succeeded = pod(&[]);
    succeeded.status.as_mut().unwrap().phase = Some("Succeeded".into());

    let cases: Vec<(&str, Pod, PodHost, bool, &str)> = vec![
        ("node down: nothing", pod(&[]), down, true, "nothing"),
        ("deleting: finalize", deleting.clone(), UP, true, "finalize"),
        (
            "deleting on a down node: nothing",
            deleting,
            down,
            true,
            "nothing",
        ),
        ("terminated pod: nothing", succeeded, UP, true, "nothing"),
        ("new pod: post", pod(&[]), UP, true, "post"),
        (
            "volumes not ready: post pending",
            pod(&[]),
            UP,
            false,
            "post",
        ),
    ];
    for (what, p, host, vols, want) in cases {
        let got = match plan_pod(&p, &host, vols, t(0)) {
            PodPlan::Nothing => "nothing",
            PodPlan::Finalize => "finalize",
            PodPlan::Post(_) => "post",
        };
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn waits_for_volumes_in_container_creating() {
    let p = apply(pod(&[]), plan_pod(&pod(&[]), &UP, false, t(0)));
    let s = p.status.as_ref().unwrap();
    assert_eq!(s.phase.as_deref(), Some("Pending"));
    assert_eq!(s.pod_ip, None);
    assert_eq!(condition(&p, "Ready"), "False");
    assert_eq!(
        containers(&p)[0],
        (
            "app".to_string(),
            "waiting",
            Some("ContainerCreating".into()),
            false,
            0
        )
    );
    assert_eq!(plan_pod(&p, &UP, false, t(5)), PodPlan::Nothing);
}

#[test]
fn crash_loop_counts_one_restart_and_recovers() {
    let running = apply(pod(&[]), plan_pod(&pod(&[]), &UP, true, t(0)));
    let mut crashing = running.clone();
    crashing.metadata.annotations = Some(BTreeMap::from([(CRASH.into(), "true".into())]));
    let crashed = apply(crashing.clone(), plan_pod(&crashing, &UP, true, t(10)));
    assert_eq!(
        containers(&crashed)[0],
        (
            "app".to_string(),
            "waiting",
            Some("CrashLoopBackOff".into()),
            false,
            1
        )
    );
    assert_eq!(condition(&crashed, "Ready"), "False");
    assert_eq!(
        crashed.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
    let last = crashed
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .last_state
        .clone()
        .unwrap();
    assert_eq!(last.terminated.unwrap().exit_code, 1);
    // Stable while the fault stays.
    assert_eq!(plan_pod(&crashed, &UP, true, t(20)), PodPlan::Nothing);

    // Fault removed: running again, the restart stays counted.
    let mut healed = crashed.clone();
    healed.metadata.annotations = None;
    let healed = apply(healed.clone(), plan_pod(&healed, &UP, true, t(30)));
    assert_eq!(
        containers(&healed)[0],
        ("app".to_string(), "running", None, true, 1)
    );
}

#[test]
fn restarts_annotation_and_never_policy() {
    let p = pod(&[(RESTARTS, "3")]);
    let p = apply(p.clone(), plan_pod(&p, &UP, true, t(0)));
    assert!(containers(&p).iter().all(|c| c.4 == 3));

    let mut never = pod(&[(CRASH, "true")]);
    never.spec.as_mut().unwrap().restart_policy = Some("Never".into());
    let failed = apply(never.clone(), plan_pod(&never, &UP, true, t(0)));
    assert_eq!(
        failed.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );
    assert_eq!(containers(&failed)[0].1, "terminated");
    assert_eq!(plan_pod(&failed, &UP, true, t(10)), PodPlan::Nothing);
}

#[test]
fn host_network_pods_use_the_node_ip() {
    let mut p = pod(&[]);
    p.spec.as_mut().unwrap().host_network = Some(true);
    let p = apply(p.clone(), plan_pod(&p, &UP, true, t(0)));
    assert_eq!(
        p.status.as_ref().unwrap().pod_ip.as_deref(),
        Some("10.250.0.1")
    );
}

#[test]
fn volumes() {
    let mut p = pod(&[]);
    p.spec.as_mut().unwrap().volumes = Some(
        ["data", "logs", "data"]
            .iter()
            .map(|c| Volume {
                name: format!("v-{c}"),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: c.to_string(),
                    read_only: None,
                }),
                ..Volume::default()
            })
            .collect(),
    );
    assert_eq!(pvc_claims(&p), ["data", "logs"]);
    assert!(pvc_claims(&pod(&[])).is_empty());

    let csi = PersistentVolumeSpec {
        csi: Some(CSIPersistentVolumeSource {
            driver: "local.csi.trellis.dev".into(),
            volume_handle: "vol-1".into(),
            ..CSIPersistentVolumeSource::default()
        }),
        ..PersistentVolumeSpec::default()
    };
    let host_path = PersistentVolumeSpec {
        host_path: Some(HostPathVolumeSource {
            path: "/mnt/data".into(),
            type_: None,
        }),
        ..PersistentVolumeSpec::default()
    };
    let cases = [
        (Some(&csi), "kubernetes.io/csi/local.csi.trellis.dev^vol-1"),
        (Some(&host_path), "kubernetes.io/host-path//mnt/data"),
        (None, "kubernetes.io/pv/pv-1"),
    ];
    for (spec, want) in cases {
        assert_eq!(attached_volume_name("pv-1", spec), want);
    }
}

#[test]
fn pod_ips_are_stable_and_in_range() {
    assert_eq!(pod_ip("a"), pod_ip("a"));
    assert_ne!(pod_ip("a"), pod_ip("b"));
    for uid in ["a", "b", "c", "uid-1"] {
        let ip = pod_ip(uid);
        let octets: Vec<u32> = ip.split('.').map(|o| o.parse().unwrap()).collect();
        assert_eq!(octets[0], 10);
        assert!((64..128).contains(&octets[1]), "{ip}");
        assert!((1..=254).contains(&octets[3]), "{ip}");
    }
}
