//! Scenario tests of the etcd controller against the embedded API server
//! (spec §11: 1–9, 11, 12, 17). backup-restore's lease renewals and the
//! StatefulSet controller's status are written by the tests.

mod common;

use common::*;
use druid::Etcd;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

async fn owned_by<K>(client: &kube::Client, name: &str, uid: &str)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), NS);
    let obj = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let owner = &obj.meta().owner_references.as_ref().expect("owner refs")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Etcd", uid),
        "{name}"
    );
    assert_eq!(owner.controller, Some(true));
    let labels = obj.meta().labels.clone().unwrap_or_default();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "etcd-druid");
    assert_eq!(labels["app.kubernetes.io/part-of"], "e");
}

async fn sts_replicas(client: &kube::Client, name: &str) -> i32 {
    Api::<StatefulSet>::namespaced(client.clone(), NS)
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas
        .unwrap()
}

#[tokio::test]
async fn scenario_01_a_new_etcd_creates_every_component_owned_by_it() {
    let env = start().await;
    let c = &env.client;
    let e = create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    let uid = e.uid().unwrap();
    let s = reconciled(c, "e").await;
    assert_eq!(s.observed_generation, Some(1));
    owned_by::<ServiceAccount>(c, "e", &uid).await;
    owned_by::<Role>(c, "druid.gardener.cloud:etcd:e", &uid).await;
    owned_by::<RoleBinding>(c, "druid.gardener.cloud:etcd:e", &uid).await;
    for lease in ["e-0", "e-1", "e-2", "e-full-snap", "e-delta-snap"] {
        owned_by::<Lease>(c, lease, &uid).await;
    }
    owned_by::<PodDisruptionBudget>(c, "e", &uid).await;
    owned_by::<Service>(c, "e-client", &uid).await;
    owned_by::<Service>(c, "e-peer", &uid).await;
    owned_by::<ConfigMap>(c, "e-config", &uid).await;
    owned_by::<StatefulSet>(c, "e", &uid).await;
    let pdb = Api::<PodDisruptionBudget>::namespaced(c.clone(), NS)
        .get("e")
        .await
        .unwrap();
    assert_eq!(
        pdb.spec.unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2))
    );
    assert_eq!(sts_replicas(c, "e").await, 3);
    let e = etcd(c, "e").await;
    assert_eq!(
        e.metadata.finalizers.unwrap_or_default(),
        ["druid.gardener.cloud/etcd-druid"]
    );
    assert_eq!(s.etcd.as_ref().map(|r| r.name.as_str()), Some("e"));
    assert!(s.selector.is_some());
    // Re-applying unchanged components writes nothing: the StatefulSet
    // keeps its resourceVersion over further passes.
    let rv = |c: kube::Client| async move {
        Api::<StatefulSet>::namespaced(c, NS)
            .get("e")
            .await
            .unwrap()
            .resource_version()
    };
    let before = rv(c.clone()).await;
    Api::<Etcd>::namespaced(c.clone(), NS)
        .patch(
            "e",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"druid.gardener.cloud/operation": "reconcile"}}})),
        )
        .await
        .unwrap();
    eventually("the annotation is dropped after the pass", 30, async || {
        !etcd(c, "e")
            .await
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("druid.gardener.cloud/operation")
    })
    .await;
    assert_eq!(rv(c.clone()).await, before);
}

#[tokio::test]
async fn scenario_02_without_auto_reconcile_the_spec_waits_for_the_annotation() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 1, true, json!({}))).await;
    reconciled(c, "e").await;
    let api: Api<Etcd> = Api::namespaced(c.clone(), NS);
    api.patch(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    // A member lease renewal wakes the status flow: it runs, the spec
    // does not.
    renew_lease(c, "e-0", "abc:def:Leader", secs(1)).await;
    eventually_cond(c, "e", "a member in status", |s| s.members.len() == 1).await;
    assert_eq!(sts_replicas(c, "e").await, 1);
    assert_eq!(status(c, "e").await.observed_generation, Some(1));
    api.patch(
        "e",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"gardener.cloud/operation": "reconcile"}}}),
        ),
    )
    .await
    .unwrap();
    eventually_cond(c, "e", "observedGeneration 2", |s| {
        s.observed_generation == Some(2)
    })
    .await;
    assert_eq!(sts_replicas(c, "e").await, 3);
    eventually("the annotation is removed", 30, async || {
        let a = etcd(c, "e").await.metadata.annotations.unwrap_or_default();
        !a.contains_key("gardener.cloud/operation")
    })
    .await;
}

#[tokio::test]
async fn scenario_03_suspension_skips_the_spec_with_a_warning_but_refreshes_status() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 1, true, json!({}))).await;
    reconciled(c, "e").await;
    let api: Api<Etcd> = Api::namespaced(c.clone(), NS);
    api.patch(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {
                "druid.gardener.cloud/suspend-etcd-spec-reconcile": "",
                "druid.gardener.cloud/operation": "reconcile",
            }},
            "spec": {"replicas": 3},
        })),
    )
    .await
    .unwrap();
    eventually("a SpecReconciliationSkipped warning", 30, async || {
        let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(c.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap();
        events.items.iter().any(|e| {
            e.reason.as_deref() == Some("SpecReconciliationSkipped")
                && e.type_.as_deref() == Some("Warning")
        })
    })
    .await;
    renew_lease(c, "e-0", "abc:def:Leader", secs(1)).await;
    eventually_cond(c, "e", "members refreshed", |s| s.members.len() == 1).await;
    assert_eq!(sts_replicas(c, "e").await, 1);
    let e = etcd(c, "e").await;
    assert_eq!(e.status.unwrap().observed_generation, Some(1));
    assert!(
        e.metadata
            .annotations
            .unwrap()
            .contains_key("druid.gardener.cloud/operation")
    );
}

async fn three_leases(c: &kube::Client, ages: [i64; 3], clusters: [&str; 3]) {
    let roles = ["Leader", "Member", "Member"];
    for i in 0..3 {
        renew_lease(
            c,
            &format!("e-{i}"),
            &format!("ab{i}:{}:{}", clusters[i], roles[i]),
            secs(ages[i]),
        )
        .await;
    }
}

#[tokio::test]
async fn scenario_04_fresh_leases_make_three_ready_members_and_a_quorate_cluster() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    three_leases(c, [10, 10, 10], ["def"; 3]).await;
    let s = eventually_cond(c, "e", "three Ready members", |s| {
        s.members.len() == 3 && s.members.iter().all(|m| m.status == "Ready")
    })
    .await;
    assert_eq!(s.members[0].role.as_deref(), Some("Leader"));
    wait_condition(c, "e", "Ready", ("True", "Quorate")).await;
    wait_condition(c, "e", "AllMembersReady", ("True", "AllMembersReady")).await;
    wait_condition(
        c,
        "e",
        "ClusterIDMismatch",
        ("False", "NoClusterIDMismatch"),
    )
    .await;

    // The StatefulSet controller's report makes the Etcd ready.
    let sts: Api<StatefulSet> = Api::namespaced(c.clone(), NS);
    let generation = sts.get("e").await.unwrap().metadata.generation.unwrap();
    sts.patch_status(
        "e",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "observedGeneration": generation, "replicas": 3, "readyReplicas": 3,
            "currentReplicas": 3, "updatedReplicas": 3,
            "currentRevision": "e-1", "updateRevision": "e-1",
        }})),
    )
    .await
    .unwrap();
    let s = eventually_cond(c, "e", "ready", |s| s.ready == Some(true)).await;
    assert_eq!(
        (s.replicas, s.ready_replicas, s.current_replicas),
        (3, 3, 3)
    );
    wait_condition(c, "e", "AllMembersUpdated", ("True", "AllMembersUpdated")).await;
}

#[tokio::test]
async fn scenario_05_a_late_lease_with_ready_containers_is_unknown_but_quorate() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    // e-1's pod: its containers are ready.
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "e-1", "labels": {
            "app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": "e"}},
        "spec": {"containers": [{"name": "etcd", "image": "etcd"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    pods.patch_status(
        "e-1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": [
            {"type": "ContainersReady", "status": "True"}]}})),
    )
    .await
    .unwrap();
    three_leases(c, [10, 120, 10], ["def"; 3]).await;
    // The leases are renewed one by one, so a status may be written with
    // e-1 late before e-2's lease has a holder: wait for all three.
    let s = eventually_cond(c, "e", "e-1 Unknown among three members", |s| {
        s.members.len() == 3
            && s.members
                .iter()
                .any(|m| m.name == "e-1" && m.status == "Unknown" && m.reason == "LeaseExpired")
    })
    .await;
    assert!(
        s.members
            .iter()
            .filter(|m| m.name != "e-1")
            .all(|m| m.status == "Ready"),
        "{:?}",
        s.members
    );
    wait_condition(c, "e", "Ready", ("True", "Quorate")).await;
    wait_condition(c, "e", "AllMembersReady", ("False", "NotAllMembersReady")).await;
}

#[tokio::test]
async fn scenario_06_two_leases_past_the_grace_period_lose_quorum() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    three_leases(c, [10, 420, 420], ["def"; 3]).await;
    let s = eventually_cond(c, "e", "two NotReady", |s| {
        s.members
            .iter()
            .filter(|m| m.status == "NotReady" && m.reason == "UnknownGracePeriodExceeded")
            .count()
            == 2
    })
    .await;
    assert_eq!(s.members[0].status, "Ready");
    wait_condition(c, "e", "Ready", ("False", "QuorumLost")).await;
}

#[tokio::test]
async fn scenario_07_two_cluster_ids_are_a_mismatch() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    three_leases(c, [10, 10, 10], ["def", "def", "xyz"]).await;
    wait_condition(c, "e", "ClusterIDMismatch", ("True", "ClusterIDMismatch")).await;
}

#[tokio::test]
async fn scenario_08_backup_ready_follows_the_snapshot_leases() {
    let env = start().await;
    let c = &env.client;
    create_etcd(
        c,
        etcd_json(
            "e",
            1,
            true,
            json!({"backup": {"deltaSnapshotPeriod": "5m"}}),
        ),
    )
    .await;
    reconciled(c, "e").await;
    renew_lease(c, "e-full-snap", "1000", secs(3600)).await;
    renew_lease(c, "e-delta-snap", "1500", secs(180)).await;
    wait_condition(c, "e", "BackupReady", ("True", "BackupSucceeded")).await;
    // Late (over 2D) but not yet 3D: from True only Unknown.
    renew_lease(c, "e-delta-snap", "1500", secs(11 * 60)).await;
    eventually_cond(c, "e", "BackupReady Unknown", |s| {
        condition(s, "BackupReady").is_some_and(|c| c.0 == "Unknown")
    })
    .await;
    renew_lease(c, "e-delta-snap", "1500", secs(16 * 60)).await;
    wait_condition(c, "e", "BackupReady", ("False", "BackupFailed")).await;
}

#[tokio::test]
async fn scenario_09_without_a_store_no_snapshot_leases_and_no_backup_ready() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 1, false, json!({}))).await;
    let s = reconciled(c, "e").await;
    let leases: Vec<String> = Api::<Lease>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|l| l.name_any())
        .collect();
    assert_eq!(leases, ["e-0"]);
    assert!(condition(&s, "BackupReady").is_none());
    assert!(condition(&s, "Ready").is_some());
}

/// The StatefulSet controller's hand: `ready` members of the set ready.
async fn sts_ready(client: &kube::Client, name: &str, ready: i32) {
    Api::<StatefulSet>::namespaced(client.clone(), NS)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": ready, "readyReplicas": ready}})),
        )
        .await
        .unwrap();
}

async fn reconcile_now(client: &kube::Client, name: &str, spec: serde_json::Value) {
    Api::<Etcd>::namespaced(client.clone(), NS)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"annotations": {"gardener.cloud/operation": "reconcile"}},
                "spec": spec,
            })),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn scenario_11_going_to_zero_takes_a_pre_sync_full_snapshot_first() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    sts_ready(c, "e", 3).await;
    // (3 → 2 is refused at admission: `validation`'s scenario 11, run by
    // the API server's druid admission, which this cluster leaves out.)
    // backup-restore does not answer: the set keeps its members.
    *env.trigger.fail.lock() = true;
    reconcile_now(c, "e", json!({"replicas": 0})).await;
    eventually_cond(c, "e", "the failed pre-sync snapshot recorded", |s| {
        s.last_errors
            .iter()
            .any(|e| e.code == "ERR_PRE_SYNC_SNAPSHOT")
    })
    .await;
    assert_eq!(sts_replicas(c, "e").await, 3, "no snapshot, no scale-down");
    // It answers: one full snapshot, then the set goes to 0.
    *env.trigger.fail.lock() = false;
    env.trigger.calls.lock().clear();
    reconcile_now(c, "e", json!({})).await;
    eventually("the StatefulSet at 0", 30, async || {
        sts_replicas(c, "e").await == 0
    })
    .await;
    let calls = env.trigger.calls.lock().clone();
    assert!(
        !calls.is_empty()
            && calls
                .iter()
                .all(|u| u == "http://e-client.ns.svc.cluster.local:8080/snapshot/full"),
        "{calls:?}"
    );
    sts_ready(c, "e", 0).await;
    eventually_cond(c, "e", "conditions NotChecked", |s| {
        condition(s, "Ready").is_some_and(|(_, reason)| reason == "NotChecked")
    })
    .await;
    // Nothing to take once the set is at 0: later passes do not call.
    let before = env.trigger.calls.lock().len();
    reconcile_now(c, "e", json!({})).await;
    eventually("the annotation consumed", 30, async || {
        let a = etcd(c, "e").await.metadata.annotations.unwrap_or_default();
        !a.contains_key("gardener.cloud/operation")
    })
    .await;
    assert_eq!(env.trigger.calls.lock().len(), before);
}

fn peer_volumes(sts: &StatefulSet) -> Vec<String> {
    druid::tls::tls_volume_names(&serde_json::to_value(sts).unwrap())
}

#[tokio::test]
async fn scenario_12_peer_tls_waits_for_every_member_then_goes_in_steps() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(c.clone(), NS);
    for name in ["peer-ca", "peer-server"] {
        let s: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {}})).unwrap();
        secrets.create(&PostParams::default(), &s).await.unwrap();
    }
    let sts_api: Api<StatefulSet> = Api::namespaced(c.clone(), NS);
    sts_ready(c, "e", 2).await;
    reconcile_now(
        c,
        "e",
        json!({"etcd": {"peerUrlTls": {
            "tlsCASecretRef": {"name": "peer-ca"},
            "serverTLSSecretRef": {"name": "peer-server"},
        }}}),
    )
    .await;
    // Two of three ready: enabling peer TLS now is unsafe; nothing patched.
    eventually_cond(c, "e", "a requeue that waits for all members", |s| {
        s.last_operation
            .as_ref()
            .is_some_and(|o| o.state == "Requeue" && o.description.contains("2 of 3"))
    })
    .await;
    let sts = sts_api.get("e").await.unwrap();
    assert!(peer_volumes(&sts).is_empty(), "the set was not patched");
    // All ready: the mounts go in at the current count, then druid waits
    // for the members to say they run peer TLS.
    sts_ready(c, "e", 3).await;
    eventually("the peer TLS mounts in the set", 30, async || {
        peer_volumes(&sts_api.get("e").await.unwrap())
            == ["peer-url-ca-etcd", "peer-url-etcd-server-tls"]
    })
    .await;
    assert_eq!(sts_replicas(c, "e").await, 3);
    eventually_cond(c, "e", "waiting for the members' leases", |s| {
        s.last_operation
            .as_ref()
            .is_some_and(|o| o.state == "Requeue" && o.description.contains("report peer TLS"))
    })
    .await;
    let leases: Api<Lease> = Api::namespaced(c.clone(), NS);
    for i in 0..3 {
        leases
            .patch(
                &format!("e-{i}"),
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    "member.etcd.gardener.cloud/tls-enabled": "true"}}})),
            )
            .await
            .unwrap();
    }
    eventually_cond(c, "e", "the spec reconciled", |s| {
        s.observed_generation == Some(2)
            && s.last_operation
                .as_ref()
                .is_some_and(|o| o.state == "Succeeded")
    })
    .await;
}

#[tokio::test]
async fn scenario_17_deletion_removes_every_component_then_the_finalizer_and_keeps_pvcs() {
    let env = start().await;
    let c = &env.client;
    create_etcd(c, etcd_json("e", 3, true, json!({}))).await;
    reconciled(c, "e").await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(c.clone(), NS);
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "e-e-0", "labels": {
            "app.kubernetes.io/managed-by": "etcd-druid", "app.kubernetes.io/part-of": "e"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    pvcs.create(&PostParams::default(), &pvc).await.unwrap();
    // Another finalizer holds a component back: the Etcd must wait for it.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), NS);
    cms.patch(
        "e-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test/hold"]}})),
    )
    .await
    .unwrap();
    Api::<Etcd>::namespaced(c.clone(), NS)
        .delete("e", &Default::default())
        .await
        .unwrap();
    eventually_cond(c, "e", "Delete/Processing", |s| {
        s.last_operation
            .as_ref()
            .is_some_and(|o| o.type_ == "Delete" && o.state == "Processing")
    })
    .await;
    eventually("the StatefulSet is gone", 30, async || {
        Api::<StatefulSet>::namespaced(c.clone(), NS)
            .get_opt("e")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert!(
        Api::<Etcd>::namespaced(c.clone(), NS)
            .get_opt("e")
            .await
            .unwrap()
            .is_some(),
        "the finalizer stays while the ConfigMap remains"
    );
    cms.patch(
        "e-config",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the Etcd is gone", 30, async || {
        Api::<Etcd>::namespaced(c.clone(), NS)
            .get_opt("e")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    for kind_list in [
        Api::<Lease>::namespaced(c.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        Api::<Service>::namespaced(c.clone(), NS)
            .list(&ListParams::default().labels("app.kubernetes.io/part-of=e"))
            .await
            .unwrap()
            .items
            .len(),
    ] {
        assert_eq!(kind_list, 0);
    }
    assert!(pvcs.get_opt("e-e-0").await.unwrap().is_some(), "PVCs stay");
}
