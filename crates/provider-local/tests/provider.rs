//! The local provider beyond the conformance kit, on the embedded API
//! server: nodes built from the node templates, VMs surviving a restart,
//! the inventory's ConfigMaps, the runtime faults (`failCreate`, vanish by
//! annotation, `callDelay`), hot update and invalid provider specs.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use api::{Machine, MachineClass, NodeTemplate};
use common::{class, fast, start};
use driver::conformance::ClassFixture;
use driver::{
    Code, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest, Driver, DriverError,
    GetMachineStatusRequest, ListMachinesRequest, UpdateMachineRequest,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use provider_local::LocalProvider;
use provider_local::inventory::{LABEL_CLASS, LABEL_CLUSTER, LABEL_OWNER, LABEL_VM};
use serde_json::{Value, json};
use testkit::eventually;

async fn create(
    p: &LocalProvider,
    c: &ClassFixture,
    m: &Machine,
) -> Result<CreateMachineResponse, DriverError> {
    p.create_machine(CreateMachineRequest {
        machine: m,
        machine_class: &c.machine_class,
        secret: &c.secret,
    })
    .await
}

async fn status(p: &LocalProvider, c: &ClassFixture, m: &Machine) -> Result<String, DriverError> {
    p.get_machine_status(GetMachineStatusRequest {
        machine: m,
        machine_class: &c.machine_class,
        secret: &c.secret,
    })
    .await
    .map(|r| r.provider_id)
}

async fn list(p: &LocalProvider, c: &ClassFixture) -> BTreeMap<String, String> {
    p.list_machines(ListMachinesRequest {
        machine_class: &c.machine_class,
        secret: &c.secret,
    })
    .await
    .unwrap()
    .machine_list
}

fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn ready_status(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_follow_the_templates_and_boot_delay() {
    let srv = start().await;
    let p = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    let mut c = class("small", json!({"bootDelay": "1s", "zone": "zone-b"}));
    c.machine_class.node_template = Some(NodeTemplate {
        capacity: BTreeMap::from([
            ("cpu".to_string(), Quantity("2".into())),
            ("memory".to_string(), Quantity("4Gi".into())),
            ("gpu".to_string(), Quantity("0".into())),
        ]),
        instance_type: "local.small".into(),
        region: "local".into(),
        zone: "zone-b".into(),
        ..NodeTemplate::default()
    });
    let mut m = Machine::test("m1").class("small");
    m.spec.node_template.metadata.labels =
        Some(BTreeMap::from([("pool".to_string(), "a".to_string())]));

    let started = Instant::now();
    let created = create(&p, &c, &m).await.unwrap();
    assert!(
        created.provider_id.starts_with("local:///zone-b/"),
        "{created:?}"
    );
    assert_eq!(created.node_name, "m1");

    let nodes: Api<Node> = Api::all(srv.client());
    let node = eventually("node Ready", 10, || async {
        nodes.get_opt("m1").await.unwrap().filter(ready)
    })
    .await;
    assert!(started.elapsed() >= Duration::from_secs(1), "booted early");
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some(created.provider_id.as_str())
    );
    let labels = node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["pool"], "a");
    assert_eq!(labels["node.kubernetes.io/instance-type"], "local.small");
    assert_eq!(labels["topology.kubernetes.io/zone"], "zone-b");
    let cap = node.status.as_ref().unwrap().capacity.as_ref().unwrap();
    assert_eq!(cap["memory"].0, "4Gi");
    assert!(!cap.contains_key("gpu") && !cap.contains_key("nvidia.com/gpu"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vms_survive_a_provider_restart() {
    let srv = start().await;
    let c = class("pool", json!({"zone": "zone-a"}));
    let other = class(
        "other",
        json!({"tags": {"kubernetes.io/cluster/shoot-b": "1"}}),
    );
    let p1 = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    let mut ids = Vec::new();
    for name in ["m1", "m2", "m3"] {
        ids.push(
            create(&p1, &c, &Machine::test(name).class("pool"))
                .await
                .unwrap()
                .provider_id,
        );
    }
    create(&p1, &other, &Machine::test("b1").class("other"))
        .await
        .unwrap();
    let before = list(&p1, &c).await;
    assert_eq!(before.len(), 3);
    let nodes: Api<Node> = Api::all(srv.client());
    for name in ["m1", "m2", "m3", "b1"] {
        eventually("node Ready", 10, || async {
            nodes.get_opt(name).await.unwrap().filter(ready)
        })
        .await;
    }

    // The inventory is in the control cluster, labelled for selection.
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let selector = format!("{LABEL_VM}=true,{LABEL_CLUSTER}=shoot-a,{LABEL_CLASS}=pool");
    let records = cms
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap();
    assert_eq!(records.items.len(), 3);
    let rec = &records.items[0];
    assert!(rec.metadata.name.as_ref().unwrap().starts_with("localvm-"));
    assert_eq!(
        rec.metadata.labels.as_ref().unwrap()[LABEL_OWNER],
        "shoot-a"
    );
    let data = rec.data.as_ref().unwrap();
    for key in ["machineName", "providerID", "nodeName", "zone", "createdAt"] {
        assert!(data.contains_key(key), "{key}");
    }

    drop(p1);
    let restarted_at = k8s_openapi::jiff::Timestamp::now();
    let p2 = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    assert_eq!(list(&p2, &c).await, before, "ListMachines after restart");
    assert_eq!(list(&p2, &other).await.len(), 1);
    for (name, id) in ["m1", "m2", "m3"].iter().zip(&ids) {
        let m = Machine::test(name).class("pool");
        assert_eq!(&status(&p2, &c, &m).await.unwrap(), id);
        // Creating again finds the same VM: no duplicate after a restart.
        assert_eq!(&create(&p2, &c, &m).await.unwrap().provider_id, id);
    }
    assert_eq!(list(&p2, &c).await, before);

    // The new simulator took the nodes over: still Ready, leases renewed.
    let leases: Api<Lease> = Api::namespaced(srv.client(), "kube-node-lease");
    for name in ["m1", "m2", "m3", "b1"] {
        eventually("lease renewed after restart", 10, || async {
            let l = leases.get(name).await.unwrap();
            (l.spec?.renew_time?.0 > restarted_at).then_some(())
        })
        .await;
        assert!(ready(&nodes.get(name).await.unwrap()), "{name}");
    }
    assert_eq!(p2.simulator().stats().nodes, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_create_fault_from_the_provider_spec() {
    let srv = start().await;
    let p = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    let c = class(
        "flaky",
        json!({"failCreate": {"code": "ResourceExhausted", "times": 2}}),
    );
    for name in ["m1", "m2"] {
        let m = Machine::test(name).class("flaky");
        for attempt in 1..=2 {
            let err = create(&p, &c, &m).await.unwrap_err();
            assert_eq!(
                err.code,
                Code::ResourceExhausted,
                "{name} attempt {attempt}"
            );
        }
        create(&p, &c, &m).await.expect("third attempt succeeds");
    }
    assert_eq!(list(&p, &c).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vm_vanishes_on_node_annotation() {
    let srv = start().await;
    let p = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    let c = class("pool", Value::Null);
    let m = Machine::test("m1").class("pool");
    create(&p, &c, &m).await.unwrap();
    let nodes: Api<Node> = Api::all(srv.client());
    eventually("node Ready", 10, || async {
        nodes.get_opt("m1").await.unwrap().filter(ready)
    })
    .await;

    let patch = json!({"metadata": {"annotations": {nodesim::faults::VANISH: "true"}}});
    nodes
        .patch("m1", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    eventually("VM gone", 10, || async {
        (status(&p, &c, &m).await.err()?.code == Code::NotFound).then_some(())
    })
    .await;
    assert!(list(&p, &c).await.is_empty());
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let left = cms
        .list(&ListParams::default().labels(&format!("{LABEL_VM}=true")))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "record not deleted");
    // The node object stays, and goes Unknown like a dead machine's.
    eventually("node Unknown", 10, || async {
        let n = nodes.get("m1").await.unwrap();
        (ready_status(&n).as_deref() == Some("Unknown")).then_some(())
    })
    .await;

    // The programmatic fault does the same.
    let m2 = Machine::test("m2").class("pool");
    create(&p, &c, &m2).await.unwrap();
    assert_eq!(p.vanish("m2").await.unwrap(), 1);
    assert_eq!(status(&p, &c, &m2).await.unwrap_err().code, Code::NotFound);
    // Deleting a vanished VM is fine.
    p.delete_machine(DeleteMachineRequest {
        machine: &m2,
        machine_class: &c.machine_class,
        secret: &c.secret,
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_update_call_delay_and_invalid_specs() {
    let srv = start().await;
    let p = LocalProvider::with_config(srv.client(), srv.client(), "shoot-a", fast())
        .await
        .unwrap();
    let c = class("pool", json!({"tags": {"team": "a"}, "callDelay": "300ms"}));
    let m = Machine::test("m1").class("pool");
    let started = Instant::now();
    let id = create(&p, &c, &m).await.unwrap().provider_id;
    assert!(started.elapsed() >= Duration::from_millis(300), "callDelay");
    let m = m.provider_id(&id);

    let update = |class: &ClassFixture| {
        let (mc, secret) = (class.machine_class.clone(), class.secret.clone());
        let (p, m) = (p.clone(), m.clone());
        async move {
            p.update_machine(UpdateMachineRequest {
                machine: &m,
                machine_class: &mc,
                secret: &secret,
                last_applied_provider_spec: None,
            })
            .await
        }
    };
    let retagged = class("pool", json!({"tags": {"team": "b"}}));
    update(&retagged).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(srv.client(), "default");
    let vm_id = id.rsplit('/').next().unwrap();
    let rec = cms.get(&format!("localvm-{vm_id}")).await.unwrap();
    assert_eq!(rec.data.unwrap()["tags"], r#"{"team":"b"}"#);
    let moved = class("pool", json!({"zone": "elsewhere"}));
    assert_eq!(
        update(&moved).await.unwrap_err().code,
        Code::InvalidArgument
    );

    for spec in [
        json!({"bootDelay": "soon"}),
        json!({"zone": "a/b"}),
        json!({"unknown": 1}),
    ] {
        let bad = class("bad", spec.clone());
        let err = create(&p, &bad, &Machine::test("m9").class("bad"))
            .await
            .unwrap_err();
        assert_eq!(err.code, Code::InvalidArgument, "{spec}: {err}");
    }
    let mut aws = class("aws", Value::Null);
    aws.machine_class = MachineClass::new("aws", "aws", Value::Null);
    let err = create(&p, &aws, &Machine::test("m9")).await.unwrap_err();
    assert_eq!(err.code, Code::InvalidArgument);
}
