//! The conformance kit every [`Driver`] must pass.
//!
//! Each check is an async function taking a fresh [`Subject`]: the driver
//! under test, its fault hook and two machine classes of two different
//! clusters. A driver's test file runs them all with
//! [`driver_conformance_tests!`](crate::driver_conformance_tests):
//!
//! ```ignore
//! driver::driver_conformance_tests!(|| async { my_provider::conformance_subject() });
//! ```
//!
//! The checks cover what the machine controller relies on and cannot verify
//! itself: that creation is idempotent (it calls `CreateMachine` again after
//! any doubt), that deleting or asking about a missing VM answers `Ok` and
//! `NotFound`, that `ListMachines` keeps clusters apart (the orphan collector
//! deletes whatever it lists without a machine), and that error codes reach
//! the controller unchanged (they choose the retry period).
//!
//! Every call is bounded by [`CALL_TIMEOUT`], so a deadlocked driver fails a
//! check instead of hanging the test run.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use api::{ClassSpec, Machine, MachineClass, MachineSpec};
use k8s_openapi::api::core::v1::{NFSVolumeSource, PersistentVolumeSpec, Secret};
use serde_json::{Value, json};

use crate::{
    Call, Code, CreateMachineRequest, CreateMachineResponse, DeleteMachineRequest,
    DeleteMachineResponse, Driver, DriverError, FaultInjector,
    GenerateMachineClassForMigrationRequest, GenerateMachineClassForMigrationResponse,
    GetMachineStatusRequest, GetMachineStatusResponse, GetVolumeIDsRequest, GetVolumeIDsResponse,
    InitializeMachineRequest, InitializeMachineResponse, ListMachinesRequest, UpdateMachineRequest,
    UpdateMachineResponse,
};

/// Longest a single driver call may take in a check.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// A machine class and the secret it refers to.
#[derive(Clone, Debug)]
pub struct ClassFixture {
    /// The class; must have a name, which the kit's machines refer to.
    pub machine_class: MachineClass,
    /// Its secret, with whatever credentials and `userData` the driver needs.
    pub secret: Secret,
}

/// What a check runs against.
///
/// Requirements on the factory that builds it:
/// * `driver` starts without VMs of either class;
/// * `faults` arms failures of that same driver, and the driver consults it
///   at the start of every method, optional ones included, before touching
///   any VM;
/// * the two classes belong to different clusters, so that neither
///   `ListMachines`, `GetMachineStatus` nor `DeleteMachine` through one class
///   may see or touch the other's VMs.
pub struct Subject {
    /// The driver under test.
    pub driver: Arc<dyn Driver>,
    /// Its fault hook.
    pub faults: Arc<dyn FaultInjector>,
    /// Two classes of two different clusters.
    pub classes: [ClassFixture; 2],
}

/// Index of the first class in [`Subject::classes`].
const A: usize = 0;
/// Index of the second class.
const B: usize = 1;

async fn bounded<T>(
    call: Call,
    fut: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    tokio::time::timeout(CALL_TIMEOUT, fut)
        .await
        .unwrap_or_else(|_| panic!("{call} did not answer within {CALL_TIMEOUT:?}"))
}

/// A machine of the class, as the machine set controller would create it.
fn machine(s: &Subject, class: usize, name: &str) -> Machine {
    let class_name = s.classes[class].machine_class.metadata.name.as_deref();
    Machine::test(name).class(class_name.expect("fixture classes have names"))
}

/// A machine with nothing but a name and a providerID: what the orphan
/// collector hands to `DeleteMachine`.
fn bare(name: &str, provider_id: &str) -> Machine {
    Machine::new(
        name,
        MachineSpec {
            provider_id: provider_id.to_string(),
            ..MachineSpec::default()
        },
    )
}

// Thin wrappers that build each request from a class index, so that the
// checks read as the scenario they test.
impl Subject {
    async fn create(
        &self,
        class: usize,
        machine: &Machine,
    ) -> Result<CreateMachineResponse, DriverError> {
        let c = &self.classes[class];
        let req = CreateMachineRequest {
            machine,
            machine_class: &c.machine_class,
            secret: &c.secret,
        };
        bounded(Call::CreateMachine, self.driver.create_machine(req)).await
    }

    async fn initialize(
        &self,
        class: usize,
        machine: &Machine,
    ) -> Result<InitializeMachineResponse, DriverError> {
        let c = &self.classes[class];
        let req = InitializeMachineRequest {
            machine,
            machine_class: &c.machine_class,
            secret: &c.secret,
        };
        bounded(Call::InitializeMachine, self.driver.initialize_machine(req)).await
    }

    async fn delete(
        &self,
        class: usize,
        machine: &Machine,
    ) -> Result<DeleteMachineResponse, DriverError> {
        let c = &self.classes[class];
        let req = DeleteMachineRequest {
            machine,
            machine_class: &c.machine_class,
            secret: &c.secret,
        };
        bounded(Call::DeleteMachine, self.driver.delete_machine(req)).await
    }

    async fn status(
        &self,
        class: usize,
        machine: &Machine,
    ) -> Result<GetMachineStatusResponse, DriverError> {
        let c = &self.classes[class];
        let req = GetMachineStatusRequest {
            machine,
            machine_class: &c.machine_class,
            secret: &c.secret,
        };
        bounded(Call::GetMachineStatus, self.driver.get_machine_status(req)).await
    }

    async fn list(&self, class: usize) -> Result<BTreeMap<String, String>, DriverError> {
        let c = &self.classes[class];
        let req = ListMachinesRequest {
            machine_class: &c.machine_class,
            secret: &c.secret,
        };
        bounded(Call::ListMachines, self.driver.list_machines(req))
            .await
            .map(|r| r.machine_list)
    }

    async fn volume_ids(
        &self,
        pv_specs: &[PersistentVolumeSpec],
    ) -> Result<GetVolumeIDsResponse, DriverError> {
        let req = GetVolumeIDsRequest { pv_specs };
        bounded(Call::GetVolumeIds, self.driver.get_volume_ids(req)).await
    }

    async fn update(
        &self,
        class: usize,
        machine: &Machine,
        last_applied: Option<&Value>,
    ) -> Result<UpdateMachineResponse, DriverError> {
        let c = &self.classes[class];
        let req = UpdateMachineRequest {
            machine,
            machine_class: &c.machine_class,
            secret: &c.secret,
            last_applied_provider_spec: last_applied,
        };
        bounded(Call::UpdateMachine, self.driver.update_machine(req)).await
    }

    async fn migrate(&self) -> Result<GenerateMachineClassForMigrationResponse, DriverError> {
        let old = json!({"kind": "LegacyMachineClass", "spec": {}});
        let class = MachineClass::new("migrated", "", Value::Null);
        let class_spec = ClassSpec {
            api_group: api::API_GROUP.to_string(),
            kind: "LegacyMachineClass".to_string(),
            name: "migrated".to_string(),
        };
        let req = GenerateMachineClassForMigrationRequest {
            provider_specific_machine_class: &old,
            machine_class: &class,
            class_spec: &class_spec,
        };
        bounded(
            Call::GenerateMachineClassForMigration,
            self.driver.generate_machine_class_for_migration(req),
        )
        .await
    }

    /// Makes `call` once against `machine` of class A, discarding the
    /// response.
    async fn invoke(&self, call: Call, machine: &Machine) -> Result<(), DriverError> {
        match call {
            Call::CreateMachine => self.create(A, machine).await.map(drop),
            Call::InitializeMachine => self.initialize(A, machine).await.map(drop),
            Call::DeleteMachine => self.delete(A, machine).await.map(drop),
            Call::GetMachineStatus => self.status(A, machine).await.map(drop),
            Call::ListMachines => self.list(A).await.map(drop),
            Call::GetVolumeIds => self.volume_ids(&[]).await.map(drop),
            Call::GenerateMachineClassForMigration => self.migrate().await.map(drop),
            Call::UpdateMachine => self.update(A, machine, None).await.map(drop),
        }
    }
}

/// Creates the machine's VM and initializes it when the driver offers
/// initialization, as the creation flow does; returns the creation answer.
async fn ready(s: &Subject, class: usize, m: &Machine) -> CreateMachineResponse {
    let created = s.create(class, m).await.expect("create");
    match s.initialize(class, m).await {
        Ok(_) => {}
        Err(e) if e.code == Code::Unimplemented => {}
        Err(e) => panic!("initialize after create: {e}"),
    }
    created
}

fn expect_code<T: std::fmt::Debug>(what: &str, got: Result<T, DriverError>, want: Code) {
    match got {
        Err(e) if e.code == want => {}
        other => panic!("{what}: expected {want}, got {other:?}"),
    }
}

/// Creating the same machine again returns the same VM and creates no
/// second one, whether or not the machine already records the providerID.
pub async fn create_is_idempotent(s: Subject) {
    let m = machine(&s, A, "conf-idem");
    let first = s.create(A, &m).await.expect("first create");
    assert!(!first.provider_id.is_empty(), "empty providerID: {first:?}");
    assert!(!first.node_name.is_empty(), "empty node name: {first:?}");

    let again = s.create(A, &m).await.expect("second create");
    assert_eq!(
        (&again.provider_id, &again.node_name),
        (&first.provider_id, &first.node_name),
        "second create answered with another VM"
    );
    // After the controller records the providerID it may still call create
    // (a machine in CrashLoopBackOff goes through the creation flow again).
    let recorded = m.clone().provider_id(&first.provider_id);
    let third = s
        .create(A, &recorded)
        .await
        .expect("create with providerID");
    assert_eq!(third.provider_id, first.provider_id);

    let listed = s.list(A).await.expect("list");
    assert_eq!(
        listed,
        BTreeMap::from([(first.provider_id.clone(), "conf-idem".to_string())]),
        "repeated creates must leave exactly one VM"
    );
}

/// The creation flow asks for the status before the machine has a
/// providerID, so the driver must find the VM by machine name alone.
pub async fn status_reports_created_vm(s: Subject) {
    let m = machine(&s, A, "conf-status");
    let created = ready(&s, A, &m).await;
    for (how, query) in [
        ("by name", m.clone()),
        ("by providerID", m.clone().provider_id(&created.provider_id)),
    ] {
        let st = s
            .status(A, &query)
            .await
            .unwrap_or_else(|e| panic!("status {how}: {e}"));
        assert_eq!(st.provider_id, created.provider_id, "status {how}");
        assert_eq!(st.node_name, created.node_name, "status {how}");
    }
}

/// No VM, no status: `NotFound`, both for a machine never created and for
/// one whose VM was deleted while its providerID is still recorded.
pub async fn status_of_missing_vm_is_not_found(s: Subject) {
    let never = machine(&s, A, "conf-never");
    expect_code(
        "status of a never-created machine",
        s.status(A, &never).await,
        Code::NotFound,
    );

    let m = machine(&s, A, "conf-gone");
    let created = s.create(A, &m).await.expect("create");
    s.delete(A, &bare("conf-gone", &created.provider_id))
        .await
        .expect("delete");
    expect_code(
        "status by name after delete",
        s.status(A, &m).await,
        Code::NotFound,
    );
    let recorded = m.provider_id(&created.provider_id);
    expect_code(
        "status by stale providerID",
        s.status(A, &recorded).await,
        Code::NotFound,
    );
}

/// Deleting a machine that never had a VM succeeds: deletion must be able to
/// finish for machines whose creation never got through.
pub async fn delete_of_missing_vm_is_ok(s: Subject) {
    let never = machine(&s, A, "conf-no-vm");
    s.delete(A, &never)
        .await
        .expect("delete of a machine without VM must answer Ok");
}

/// Deleting through a bare machine (name and providerID only, as the orphan
/// collector does) removes that VM and no other; deleting it again succeeds.
pub async fn delete_removes_only_that_vm(s: Subject) {
    let a = s
        .create(A, &machine(&s, A, "conf-del-a"))
        .await
        .expect("create a");
    let b = s
        .create(A, &machine(&s, A, "conf-del-b"))
        .await
        .expect("create b");

    s.delete(A, &bare("conf-del-a", &a.provider_id))
        .await
        .expect("delete a");
    assert_eq!(
        s.list(A).await.expect("list"),
        BTreeMap::from([(b.provider_id.clone(), "conf-del-b".to_string())])
    );
    expect_code(
        "status of deleted VM",
        s.status(A, &machine(&s, A, "conf-del-a")).await,
        Code::NotFound,
    );
    s.delete(A, &bare("conf-del-a", &a.provider_id))
        .await
        .expect("deleting a deleted VM must answer Ok");
}

/// `ListMachines` maps providerID → machine name, and only for the class's
/// own cluster; status and delete by name do not reach across clusters
/// either.
pub async fn list_machines_is_per_cluster(s: Subject) {
    let mut ids = Vec::new();
    for (class, name) in [(A, "conf-a1"), (A, "conf-a2"), (B, "conf-b1")] {
        let r = s
            .create(class, &machine(&s, class, name))
            .await
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        ids.push(r.provider_id);
    }
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "providerIDs must be unique: {ids:?}");

    let list_a = s.list(A).await.expect("list A");
    assert_eq!(
        list_a,
        BTreeMap::from([
            (ids[0].clone(), "conf-a1".to_string()),
            (ids[1].clone(), "conf-a2".to_string()),
        ]),
        "ListMachines of class A must list exactly cluster A's VMs"
    );
    let list_b = s.list(B).await.expect("list B");
    assert_eq!(
        list_b,
        BTreeMap::from([(ids[2].clone(), "conf-b1".to_string())]),
        "ListMachines of class B must list exactly cluster B's VMs"
    );

    // The other cluster's machine is invisible through class A ...
    let b1_via_a = machine(&s, A, "conf-b1");
    expect_code(
        "status of another cluster's VM",
        s.status(A, &b1_via_a).await,
        Code::NotFound,
    );
    // ... and a delete through class A must leave it alone.
    s.delete(A, &b1_via_a)
        .await
        .expect("delete of a VM this cluster does not have must answer Ok");
    assert_eq!(
        s.list(B).await.expect("list B again"),
        list_b,
        "a delete through class A removed cluster B's VM"
    );
}

/// Right after creation the status is `Ok`, or `Uninitialized` when the
/// driver has initialization still to do. `InitializeMachine` then succeeds
/// for the same VM (twice, as harmlessly as creating twice) or is not
/// offered, and afterwards the status is `Ok`.
pub async fn initialize_after_create(s: Subject) {
    let m = machine(&s, A, "conf-init");
    let created = s.create(A, &m).await.expect("create");
    let uninitialized = match s.status(A, &m).await {
        Ok(st) => {
            assert_eq!(st.provider_id, created.provider_id);
            false
        }
        Err(e) if e.code == Code::Uninitialized => true,
        Err(e) => panic!("status after create: {e}"),
    };
    for attempt in 1..=2 {
        match s.initialize(A, &m).await {
            Ok(init) => {
                assert_eq!(init.provider_id, created.provider_id, "attempt {attempt}");
                assert_eq!(init.node_name, created.node_name, "attempt {attempt}");
            }
            Err(e) if e.code == Code::Unimplemented && !uninitialized => {}
            Err(e) => panic!("initialize attempt {attempt}: {e}"),
        }
    }
    let st = s.status(A, &m).await.expect("status after initialize");
    assert_eq!(st.provider_id, created.provider_id);
}

/// `GetVolumeIDs` reports only the provider's own volumes: an NFS volume
/// belongs to no VM provider, and an empty request has an empty answer.
pub async fn volume_ids_leave_out_foreign_volumes(s: Subject) {
    let nfs = PersistentVolumeSpec {
        nfs: Some(NFSVolumeSource {
            server: "nfs.example".to_string(),
            path: "/export".to_string(),
            read_only: None,
        }),
        ..PersistentVolumeSpec::default()
    };
    for (what, specs) in [("no volumes", Vec::new()), ("an NFS volume", vec![nfs])] {
        match s.volume_ids(&specs).await {
            Ok(r) => assert!(r.volume_ids.is_empty(), "{what}: {:?}", r.volume_ids),
            Err(e) if e.code == Code::Unimplemented => {}
            Err(e) => panic!("volume IDs of {what}: {e}"),
        }
    }
}

/// A hot update changes the VM in place: afterwards the machine is still
/// backed by the same VM, and no other VM appeared.
pub async fn update_keeps_the_vm(s: Subject) {
    let m = machine(&s, A, "conf-update");
    let created = ready(&s, A, &m).await;
    let m = m.provider_id(&created.provider_id);
    let last = s.classes[A].machine_class.provider_spec.clone();
    for last_applied in [None, Some(&last)] {
        match s.update(A, &m, last_applied).await {
            Ok(_) => {}
            Err(e) if e.code == Code::Unimplemented => return,
            Err(e) => panic!("update (last applied {last_applied:?}): {e}"),
        }
    }
    let st = s.status(A, &m).await.expect("status after update");
    assert_eq!(st.provider_id, created.provider_id);
    assert_eq!(s.list(A).await.expect("list").len(), 1);
}

/// Every code armed on the fault hook comes back unchanged, with a message,
/// from every call, and a failed call changes nothing.
pub async fn injected_faults_surface_unchanged(s: Subject) {
    let m = machine(&s, A, "conf-faults");
    let created = s.create(A, &m).await.expect("create");
    let m = m.provider_id(&created.provider_id);
    for call in Call::ALL {
        for code in Code::ALL.into_iter().filter(|c| *c != Code::Ok) {
            s.faults.fail_next(call, code, 1);
            match s.invoke(call, &m).await {
                Err(e) if e.code == code => {
                    assert!(!e.message.is_empty(), "{call} {code}: empty message")
                }
                other => panic!("{call} armed with {code} answered {other:?}"),
            }
        }
    }
    // Failed deletes left the VM, failed creates added none.
    assert_eq!(
        s.list(A).await.expect("list"),
        BTreeMap::from([(created.provider_id.clone(), "conf-faults".to_string())])
    );
}

/// An armed fault fires exactly as often as asked, then the call works
/// again; a failed create leaves no VM and a failed delete leaves the VM.
pub async fn injected_faults_are_consumed(s: Subject) {
    let m = machine(&s, A, "conf-consumed");
    s.faults
        .fail_next(Call::CreateMachine, Code::ResourceExhausted, 2);
    for attempt in 1..=2 {
        expect_code(
            &format!("create attempt {attempt}"),
            s.create(A, &m).await,
            Code::ResourceExhausted,
        );
    }
    assert!(
        s.list(A).await.expect("list").is_empty(),
        "failed create left a VM"
    );
    let created = ready(&s, A, &m).await;

    s.faults
        .fail_next(Call::GetMachineStatus, Code::Unavailable, 1);
    expect_code("armed status", s.status(A, &m).await, Code::Unavailable);
    s.status(A, &m).await.expect("status after the fault");

    s.faults
        .fail_next(Call::ListMachines, Code::DeadlineExceeded, 1);
    expect_code("armed list", s.list(A).await, Code::DeadlineExceeded);

    let doomed = bare("conf-consumed", &created.provider_id);
    s.faults.fail_next(Call::DeleteMachine, Code::Aborted, 1);
    expect_code("armed delete", s.delete(A, &doomed).await, Code::Aborted);
    assert_eq!(
        s.list(A).await.expect("list").len(),
        1,
        "failed delete removed the VM"
    );
    s.delete(A, &doomed).await.expect("delete after the fault");
    assert!(s.list(A).await.expect("list").is_empty());
}

/// Runs every conformance check as its own test. The argument is a closure
/// returning a future of a fresh [`Subject`]; it is called once per test.
/// The calling crate needs `tokio` (with the multi-threaded runtime) as a
/// dev-dependency.
///
/// `driver_conformance_tests!(skippable FACTORY)` takes a factory whose
/// future returns `Option<Subject>` instead: `None` skips the check (it
/// passes without running), for drivers that need something the machine
/// may not have, such as another language's runtime. The factory should
/// say why it skipped.
#[macro_export]
macro_rules! driver_conformance_tests {
    (skippable $factory:expr) => {
        $crate::driver_conformance_tests!(@each skippable $factory);
    };
    ($factory:expr) => {
        $crate::driver_conformance_tests!(@each required $factory);
    };
    (@each $mode:ident $factory:expr) => {
        $crate::driver_conformance_tests!(@tests $mode $factory;
            create_is_idempotent, status_reports_created_vm,
            status_of_missing_vm_is_not_found, delete_of_missing_vm_is_ok,
            delete_removes_only_that_vm, list_machines_is_per_cluster,
            initialize_after_create, volume_ids_leave_out_foreign_volumes,
            update_keeps_the_vm, injected_faults_surface_unchanged,
            injected_faults_are_consumed);
    };
    (@tests required $factory:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let factory = $factory;
                let subject = factory().await;
                $crate::conformance::$name(subject).await;
            }
        )*
    };
    (@tests skippable $factory:expr; $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let factory = $factory;
                if let Some(subject) = factory().await {
                    $crate::conformance::$name(subject).await;
                }
            }
        )*
    };
}
