//! The spec's test table, rows 41–48 (`/work/shared/spec/gardener.md` §5),
//! one test per row, named after it.

mod common;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use worker::naming::{
    machine_class_name, machine_deployment_name, worker_pool_hash, worker_pool_hash_v2,
    worker_pool_hash_with,
};
use worker::replicas::{ReplicaInputs, desired_replicas};
use worker::zones::{
    distribute_over_zones, distribute_percent_over_zones, distribute_positive_int_or_percent,
};
use worker::{MachineUpdateStrategy, ShootFacts, WorkerPool, plan};

use common::{images, pool, shoot, worker_with};

#[test]
fn row_41_distribute_over_zones() {
    let rows = [
        ((0, 5, 1), 5),
        ((0, 5, 2), 3),
        ((1, 5, 2), 2),
        ((0, 6, 2), 3),
        ((1, 6, 2), 3),
        ((0, 9, 3), 3),
        ((1, 9, 3), 3),
        ((2, 9, 3), 3),
        ((0, 10, 3), 4),
        ((1, 10, 3), 3),
        ((2, 10, 3), 3),
    ];
    for ((index, size, zones), want) in rows {
        assert_eq!(
            distribute_over_zones(index, size, zones),
            want,
            "DistributeOverZones({index}, {size}, {zones})"
        );
    }
}

#[test]
fn row_41_no_zones_does_not_panic() {
    assert_eq!(distribute_over_zones(0, 5, 0), 0);
    assert_eq!(distribute_over_zones(0, 5, -1), 0);
}

#[test]
fn row_42_distribute_percent_over_zones() {
    let rows = [
        ((0, "10%", 2, 8), "10%"),
        ((1, "50%", 2, 2), "50%"),
        ((0, "50%", 2, 5), "60%"),
        ((1, "50%", 2, 5), "40%"),
        ((0, "75%", 3, 5), "90%"),
        ((1, "75%", 3, 5), "90%"),
        ((2, "75%", 3, 5), "45%"),
    ];
    for ((index, percent, zones, total), want) in rows {
        assert_eq!(
            distribute_percent_over_zones(index, percent, zones, total).unwrap(),
            want,
            "DistributePercentOverZones({index}, {percent}, {zones}, {total})"
        );
    }
}

#[test]
fn row_42_not_a_percentage_is_an_error() {
    assert!(distribute_percent_over_zones(0, "ten", 2, 5).is_err());
    assert!(distribute_percent_over_zones(0, "10", 2, 5).is_err());
    assert!(
        distribute_positive_int_or_percent(0, &IntOrString::String("x%".into()), 2, 5).is_err()
    );
}

#[test]
fn row_43_distribute_positive_int_or_percent_int() {
    assert_eq!(
        distribute_positive_int_or_percent(2, &IntOrString::Int(10), 3, 0).unwrap(),
        IntOrString::Int(3)
    );
    assert_eq!(
        distribute_positive_int_or_percent(0, &IntOrString::String("50%".into()), 2, 5).unwrap(),
        IntOrString::String("60%".into())
    );
}

#[test]
fn row_44_pool_min_5_max_10_surge_3_unavailable_2_over_two_zones() {
    let mut p = pool("aws", &["a", "b"], 5, 10);
    p.max_surge = IntOrString::Int(3);
    p.max_unavailable = IntOrString::Int(2);
    let w = worker_with(vec![p]);
    let shoot = shoot();
    let images = images();
    let desired = plan(&common::input(&w, &shoot, &images)).unwrap();
    let got: Vec<(i32, i32, IntOrString, IntOrString)> = desired
        .wanted
        .iter()
        .map(|d| {
            (
                d.minimum,
                d.maximum,
                d.max_surge.clone(),
                d.max_unavailable.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (3, 5, IntOrString::Int(2), IntOrString::Int(1)),
            (2, 5, IntOrString::Int(1), IntOrString::Int(1)),
        ]
    );
    let rolling = desired.machine_deployments[0]
        .spec
        .strategy
        .rolling_update
        .clone()
        .unwrap();
    assert_eq!(rolling.max_surge, Some(IntOrString::Int(2)));
    assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)));
}

fn md(existing: Option<i32>, restored: Option<i32>, autoscaler: bool) -> ReplicaInputs {
    ReplicaInputs {
        minimum: 2,
        maximum: 10,
        hibernated: false,
        cluster_autoscaler_used: autoscaler,
        existing,
        restored,
        waking_up: false,
    }
}

#[test]
fn row_45_replicas_of_new_deployments() {
    assert_eq!(desired_replicas(&md(None, None, true)), 2, "new, CA used");
    assert_eq!(
        desired_replicas(&md(None, Some(5), true)),
        5,
        "new with restored state 5"
    );
    assert_eq!(
        desired_replicas(&md(None, Some(5), false)),
        2,
        "new, no CA, state 5"
    );
}

#[test]
fn row_46_replicas_of_existing_deployments() {
    assert_eq!(
        desired_replicas(&md(Some(4), None, true)),
        4,
        "kept for the autoscaler"
    );
    assert_eq!(desired_replicas(&md(Some(1), None, true)), 2, "below min");
    assert_eq!(desired_replicas(&md(Some(15), None, true)), 10, "above max");
    let hibernated = ReplicaInputs {
        hibernated: true,
        ..md(Some(4), None, true)
    };
    assert_eq!(desired_replicas(&hibernated), 0, "hibernated");
    assert_eq!(desired_replicas(&md(Some(4), None, false)), 2, "no CA");
    let waking = ReplicaInputs {
        waking_up: true,
        ..md(Some(0), None, true)
    };
    assert_eq!(desired_replicas(&waking), 2, "waking up");
}

#[test]
fn row_46_waking_up_is_detected_over_all_existing_deployments() {
    use worker::replicas::shoot_is_waking_up;
    assert!(shoot_is_waking_up(false, [0, 0]));
    assert!(!shoot_is_waking_up(false, [0, 3]));
    assert!(!shoot_is_waking_up(true, [0, 0]));
}

#[test]
fn naming_deployment_and_class_names() {
    assert_eq!(
        machine_deployment_name("shoot--foo--bar", "cpu-worker", 0),
        "shoot--foo--bar-cpu-worker-z1"
    );
    assert_eq!(
        machine_deployment_name("shoot--foo--bar", "cpu-worker", 1),
        "shoot--foo--bar-cpu-worker-z2"
    );
    assert_eq!(
        machine_class_name("shoot--foo--bar-cpu-worker-z1", "3db65"),
        "shoot--foo--bar-cpu-worker-z1-3db65"
    );
}

#[test]
fn row_47_hash_format_matches_upstream_for_a_given_secret_name() {
    // sha256hex(sha256hex(name))[:5], computed independently.
    assert_eq!(
        worker_pool_hash_v2("gardener-node-agent-cpu-worker-0123456789abcdef", &[]),
        "2757f"
    );
    assert_eq!(
        worker_pool_hash_v2(
            "gardener-node-agent-cpu-worker-0123456789abcdef",
            &["extra".to_string()]
        ),
        "a56d8"
    );
}

/// One edit of a pool.
type Change = Box<dyn Fn(&mut WorkerPool)>;

fn rolling_pool() -> WorkerPool {
    let mut p = pool("cpu", &["a", "b"], 1, 3);
    p.node_agent_secret_name = Some("gardener-node-agent-cpu-0123456789abcdef".to_string());
    p
}

#[test]
fn row_47_rolling_pool_hash_ignores_fields_outside_the_secret_name() {
    let shoot = shoot();
    let base = rolling_pool();
    let hash = |p: &WorkerPool| worker_pool_hash_with(p, &shoot, &["x".to_string()], &[]).unwrap();
    let want = hash(&base);
    let changes: Vec<(&str, Change)> = vec![
        ("priority", Box::new(|p| p.priority = Some(7))),
        (
            "labels",
            Box::new(|p| {
                p.labels.insert("team".into(), "a".into());
            }),
        ),
        (
            "annotations",
            Box::new(|p| {
                p.annotations.insert("note".into(), "b".into());
            }),
        ),
        (
            "taints",
            Box::new(|p| {
                p.taints.push(Taint {
                    key: "k".into(),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                })
            }),
        ),
        ("name", Box::new(|p| p.name = "renamed".into())),
        ("zones", Box::new(|p| p.zones.push("c".into()))),
        ("machineType", Box::new(|p| p.machine_type = "large".into())),
        (
            "kubernetesVersion",
            Box::new(|p| p.kubernetes_version = Some("1.32.0".into())),
        ),
        (
            "minimum/maximum",
            Box::new(|p| {
                p.minimum = 4;
                p.maximum = 9;
            }),
        ),
    ];
    for (field, change) in changes {
        let mut p = base.clone();
        change(&mut p);
        assert_eq!(hash(&p), want, "changing {field} must not roll the pool");
    }
    let mut p = base.clone();
    p.node_agent_secret_name = Some("gardener-node-agent-cpu-fedcba9876543210".into());
    assert_ne!(
        hash(&p),
        want,
        "a new node-agent secret name rolls the pool"
    );
    assert_ne!(
        worker_pool_hash_with(&base, &shoot, &["y".to_string()], &[]).unwrap(),
        want,
        "new extra data rolls the pool"
    );
}

#[test]
fn row_47_local_extra_data_is_volume_encryption_data_volumes_and_provider_config() {
    let shoot = shoot();
    let base = rolling_pool();
    let want = worker_pool_hash(&base, &shoot).unwrap();
    let mut p = base.clone();
    p.provider_config = Some(serde_json::json!({"bootDelay": "2s"}));
    assert_ne!(worker_pool_hash(&p, &shoot).unwrap(), want);
    let mut p = base.clone();
    p.volume.as_mut().unwrap().encrypted = Some(true);
    assert_ne!(worker_pool_hash(&p, &shoot).unwrap(), want);
    let mut p = base.clone();
    p.labels.insert("x".into(), "y".into());
    assert_eq!(worker_pool_hash(&p, &shoot).unwrap(), want);
}

#[test]
fn row_47_derived_secret_name_follows_the_operating_system_inputs() {
    // Without nodeAgentSecretName the name is derived: image, machine type
    // and Kubernetes minor change it, labels and the patch version do not.
    let shoot = shoot();
    let base = pool("cpu", &["a"], 1, 1);
    assert!(base.node_agent_secret_name.is_none());
    let want = worker_pool_hash(&base, &shoot).unwrap();
    let same = |f: &dyn Fn(&mut WorkerPool)| {
        let mut p = base.clone();
        f(&mut p);
        worker_pool_hash(&p, &shoot).unwrap() == want
    };
    assert!(same(&|p| {
        p.labels.insert("a".into(), "b".into());
    }));
    assert!(same(&|p| p.kubernetes_version = Some("1.31.9".into())));
    assert!(!same(&|p| p.kubernetes_version = Some("1.32.0".into())));
    assert!(!same(&|p| p.machine_type = "large".into()));
    assert!(!same(&|p| p.machine_image.version = "2.0.0".into()));
    assert!(!same(&|p| p.volume.as_mut().unwrap().size = "50Gi".into()));
    assert!(!same(
        &|p| p.kubelet_config = Some(serde_json::json!({"cpuManagerPolicy": "static"}))
    ));
    let derived = worker::naming::node_agent_secret_name(&base, &shoot).unwrap();
    assert!(derived.starts_with("gardener-node-agent-cpu-"), "{derived}");
    assert_eq!(derived.len(), "gardener-node-agent-cpu-".len() + 16);
}

fn in_place_pool() -> WorkerPool {
    let mut p = rolling_pool();
    p.update_strategy = Some(MachineUpdateStrategy::AutoInPlaceUpdate);
    p
}

fn rotated(ca: Option<&str>, sa: Option<&str>) -> ShootFacts {
    let time = |s: &str| -> Time { serde_json::from_value(serde_json::json!(s)).unwrap() };
    let mut s = shoot();
    s.ca_rotation.last_initiation_time = ca.map(time);
    s.service_account_key_rotation.last_initiation_time = sa.map(time);
    s
}

#[test]
fn row_48_in_place_pool_hash() {
    let shoot = shoot();
    let base = in_place_pool();
    let want = worker_pool_hash(&base, &shoot).unwrap();
    assert_ne!(
        want,
        worker_pool_hash(&rolling_pool(), &shoot).unwrap(),
        "in-place hashes differently"
    );
    let with = |f: &dyn Fn(&mut WorkerPool)| {
        let mut p = base.clone();
        f(&mut p);
        worker_pool_hash(&p, &shoot).unwrap()
    };
    assert_ne!(
        with(&|p| p.machine_image.version = "1.1.0".into()),
        want,
        "image version"
    );
    assert_ne!(
        with(&|p| p.kubernetes_version = Some("1.32.0".into())),
        want,
        "k8s minor"
    );
    assert_eq!(
        with(&|p| p.kubernetes_version = Some("1.31.7".into())),
        want,
        "k8s patch"
    );
    assert_eq!(
        with(&|p| p.machine_type = "large".into()),
        want,
        "machine type"
    );
    let ca = worker_pool_hash(&base, &rotated(Some("2024-01-01T00:00:00Z"), None)).unwrap();
    assert_ne!(ca, want, "CA rotation");
    let sa = worker_pool_hash(&base, &rotated(None, Some("2024-01-01T00:00:00Z"))).unwrap();
    assert_ne!(sa, want, "SA rotation");
    let both = worker_pool_hash(
        &base,
        &rotated(Some("2024-01-01T00:00:00Z"), Some("2024-03-01T00:00:00Z")),
    )
    .unwrap();
    assert_ne!(both, ca, "a later SA rotation on top of a CA rotation");
}

#[test]
fn row_48_rotation_of_a_pending_rollout_uses_the_pools_time() {
    let time = |s: &str| -> Time { serde_json::from_value(serde_json::json!(s)).unwrap() };
    let mut s = rotated(Some("2024-01-01T00:00:00Z"), None);
    let base = worker_pool_hash(&in_place_pool(), &s).unwrap();
    s.ca_rotation
        .pending_workers_rollouts
        .insert("cpu".into(), time("2024-02-01T00:00:00Z"));
    assert_ne!(worker_pool_hash(&in_place_pool(), &s).unwrap(), base);
    assert_eq!(
        worker::naming::go_time_string(&time("2024-02-01T10:20:30Z")),
        "2024-02-01 10:20:30 +0000 UTC"
    );
}
