//! The scale flows against an embedded API server (spec scenarios 16–20):
//! Deployments scaled through `/scale`, the annotations, the order of the
//! levels, optional and mandatory resources, ignore-scaling and initial
//! delays.

mod common;

use std::time::Duration;

use common::*;
use dwd::controllers::scaler::{Outcome, Scaler};
use dwd::scale::{MELTDOWN_ANNOTATION, Operation, REPLICAS_ANNOTATION};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn scaler(seed: &kube::Client, config: &dwd::ProberConfig) -> Scaler {
    let shared = shared(seed);
    Scaler::new(
        seed.clone(),
        NS,
        config.dependent_resource_infos.clone(),
        shared.recorder,
        shared.metrics,
    )
}

fn ann(r: &(i32, std::collections::BTreeMap<String, String>), key: &str) -> Option<String> {
    r.1.get(key).cloned()
}

#[tokio::test]
async fn scenarios_16_and_17_levels_scale_down_in_order_and_back_up() {
    let seed = seed().await;
    let client = seed.client();
    let mirror = mirror_readiness(client.clone());
    deployment(&client, "kube-controller-manager", 1, json!({})).await;
    deployment(&client, "machine-controller-manager", 2, json!({})).await;
    deployment(&client, "cluster-autoscaler", 1, json!({})).await;
    // The levels of the spec's example: down KCM 0, MCM 1, CA 2; up CA 0,
    // KCM 1, MCM 1.
    let config = prober_config(
        "",
        &[
            dependant("kube-controller-manager", false, 1, 0, "0s"),
            dependant("machine-controller-manager", false, 1, 1, "0s"),
            dependant("cluster-autoscaler", false, 0, 2, "0s"),
        ]
        .concat(),
    );
    let s = scaler(&client, &config);
    let cancel = CancellationToken::new();

    let down = s
        .run(Operation::ScaleDown, "test", &cancel)
        .await
        .expect("scale-down succeeds");
    for (name, was) in [
        ("kube-controller-manager", "1"),
        ("machine-controller-manager", "2"),
        ("cluster-autoscaler", "1"),
    ] {
        let r = replicas(&client, name).await;
        assert_eq!(r.0, 0, "{name} scaled to 0");
        assert_eq!(ann(&r, REPLICAS_ANNOTATION).as_deref(), Some(was), "{name}");
        assert_eq!(ann(&r, MELTDOWN_ANNOTATION).as_deref(), Some(""), "{name}");
        assert!(
            events(&client, name)
                .await
                .iter()
                .any(|(reason, _)| reason == "ScaledDown"),
            "{name} has a ScaledDown event"
        );
    }
    let t = |n: &str| down.task(n).expect("task ran").clone();
    let (kcm, mcm, ca) = (
        t("kube-controller-manager"),
        t("machine-controller-manager"),
        t("cluster-autoscaler"),
    );
    assert_eq!(mcm.outcome, Ok(Outcome::Scaled { from: 2, to: 0 }));
    assert!(
        mcm.started >= kcm.ended,
        "MCM starts after KCM's task ended"
    );
    assert!(ca.started >= mcm.ended, "CA starts after MCM's task ended");

    let up = s
        .run(Operation::ScaleUp, "test", &cancel)
        .await
        .expect("scale-up succeeds");
    for (name, want) in [
        ("kube-controller-manager", 1),
        ("machine-controller-manager", 2),
        ("cluster-autoscaler", 1),
    ] {
        let r = replicas(&client, name).await;
        assert_eq!(r.0, want, "{name} back to its replicas");
        assert_eq!(
            ann(&r, MELTDOWN_ANNOTATION),
            None,
            "{name}: meltdown removed"
        );
        assert_eq!(
            ann(&r, REPLICAS_ANNOTATION),
            Some(want.to_string()),
            "{name}: the replicas annotation stays"
        );
    }
    let t = |n: &str| up.task(n).expect("task ran").clone();
    let (kcm, mcm, ca) = (
        t("kube-controller-manager"),
        t("machine-controller-manager"),
        t("cluster-autoscaler"),
    );
    assert!(
        kcm.started >= ca.ended && mcm.started >= ca.ended,
        "CA first"
    );
    assert!(
        kcm.started < mcm.ended && mcm.started < kcm.ended,
        "KCM and MCM scale up concurrently"
    );
    mirror.cancel();
}

#[tokio::test]
async fn scenario_18_absent_optional_and_mandatory_resources() {
    let seed = seed().await;
    let client = seed.client();
    let mirror = mirror_readiness(client.clone());
    deployment(&client, "machine-controller-manager", 1, json!({})).await;
    let cancel = CancellationToken::new();

    // CA optional and absent at level 0: its task succeeds, MCM at level
    // 1 runs.
    let optional = prober_config(
        "",
        &[
            dependant("cluster-autoscaler", true, 0, 0, "0s"),
            dependant("machine-controller-manager", false, 1, 1, "0s"),
        ]
        .concat(),
    );
    let report = scaler(&client, &optional)
        .run(Operation::ScaleDown, "test", &cancel)
        .await
        .expect("the flow succeeds");
    assert_eq!(
        report.task("cluster-autoscaler").unwrap().outcome,
        Ok(Outcome::Absent)
    );
    assert_eq!(replicas(&client, "machine-controller-manager").await.0, 0);

    // KCM mandatory and absent at level 0: three attempts, then the flow
    // fails and MCM's level never starts.
    let mandatory = prober_config(
        "",
        &[
            dependant("kube-controller-manager", false, 0, 0, "0s"),
            dependant("machine-controller-manager", false, 1, 1, "0s"),
        ]
        .concat(),
    );
    let (report, error) = scaler(&client, &mandatory)
        .run(Operation::ScaleUp, "test", &cancel)
        .await
        .expect_err("the flow fails");
    assert!(error.to_string().contains("level 0"), "{error}");
    let kcm = report.task("kube-controller-manager").unwrap();
    assert!(kcm.outcome.is_err());
    assert!(
        kcm.ended - kcm.started >= Duration::from_millis(200),
        "two pauses between three attempts"
    );
    assert!(report.task("machine-controller-manager").is_none());
    assert_eq!(
        replicas(&client, "machine-controller-manager").await.0,
        0,
        "MCM is not scaled up"
    );
    mirror.cancel();
}

#[tokio::test]
async fn scenario_19_ignore_scaling_keeps_replicas_and_drops_the_meltdown_marker() {
    let seed = seed().await;
    let client = seed.client();
    let config = prober_config(
        "",
        &dependant("machine-controller-manager", false, 0, 0, "0s"),
    );
    let cancel = CancellationToken::new();
    for (op, replicas_before) in [(Operation::ScaleDown, 1), (Operation::ScaleUp, 0)] {
        let _ = kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), NS)
            .delete("machine-controller-manager", &Default::default())
            .await;
        deployment(
            &client,
            "machine-controller-manager",
            replicas_before,
            json!({
                "dependency-watchdog.gardener.cloud/ignore-scaling": "true",
                MELTDOWN_ANNOTATION: "",
            }),
        )
        .await;
        let report = scaler(&client, &config)
            .run(op, "test", &cancel)
            .await
            .expect("the flow succeeds");
        assert_eq!(
            report.task("machine-controller-manager").unwrap().outcome,
            Ok(Outcome::Ignored)
        );
        let r = replicas(&client, "machine-controller-manager").await;
        assert_eq!(r.0, replicas_before, "{op:?}: replicas unchanged");
        assert_eq!(
            ann(&r, MELTDOWN_ANNOTATION),
            None,
            "{op:?}: meltdown removed"
        );
    }
}

#[tokio::test]
async fn scenario_20_a_scale_up_initial_delay_comes_first() {
    let seed = seed().await;
    let client = seed.client();
    let mirror = mirror_readiness(client.clone());
    deployment(
        &client,
        "machine-controller-manager",
        0,
        json!({REPLICAS_ANNOTATION: "3", MELTDOWN_ANNOTATION: ""}),
    )
    .await;
    let config = prober_config(
        "",
        &dependant("machine-controller-manager", false, 0, 0, "1s"),
    );
    let report = scaler(&client, &config)
        .run(Operation::ScaleUp, "test", &CancellationToken::new())
        .await
        .expect("the flow succeeds");
    let mcm = report.task("machine-controller-manager").unwrap();
    assert_eq!(mcm.outcome, Ok(Outcome::Scaled { from: 0, to: 3 }));
    let scaled = mcm.scaled_at.expect("scaled");
    assert!(
        scaled - mcm.started >= Duration::from_secs(1),
        "{:?}",
        scaled - mcm.started
    );
    mirror.cancel();
}

#[tokio::test]
async fn a_resource_that_never_turns_ready_ends_its_level_after_the_short_wait() {
    // No readiness mirror: readyReplicas stays absent. The first attempt
    // times out after ~5 s; the retry finds the replicas set and succeeds.
    let seed = seed().await;
    let client = seed.client();
    deployment(&client, "machine-controller-manager", 0, json!({})).await;
    let config = prober_config(
        "",
        &dependant("machine-controller-manager", false, 0, 0, "0s"),
    );
    let shared = shared(&client);
    let report = Scaler::new(
        client.clone(),
        NS,
        config.dependent_resource_infos.clone(),
        shared.recorder,
        shared.metrics.clone(),
    )
    .run(Operation::ScaleUp, "test", &CancellationToken::new())
    .await
    .expect("the flow succeeds on the retry");
    let mcm = report.task("machine-controller-manager").unwrap();
    assert_eq!(mcm.outcome, Ok(Outcome::Unchanged));
    // The retry had nothing left to do, but the task did scale.
    assert!(mcm.scaled_at.is_some());
    assert!(
        shared.metrics.encode().contains(
            r#"dwd_prober_scale_operations_total{namespace="shoot--p--a",resource="machine-controller-manager",operation="scale_up",result="scaled"} 1"#
        ),
        "{}",
        shared.metrics.encode()
    );
    let took = mcm.ended - mcm.started;
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(8),
        "{took:?}"
    );
    assert_eq!(replicas(&client, "machine-controller-manager").await.0, 1);
}
