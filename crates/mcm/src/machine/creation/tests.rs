//! Table tests of the creation flow: every row of the state machine, what
//! each step's answer tells of the VM, every end of a pass, and the pieces
//! the ends are made of.

use super::*;
use crate::machine::test_support::{created_at, t};
use api::testing::Fixture;

#[test]
fn create_errors() {
    let s = Settings {
        creation_timeout: Duration::from_secs(1200),
        resource_exhausted_retry: Duration::from_secs(600),
        ..Settings::default()
    };
    // (code, age, phase, retry)
    let cases = [
        (
            Code::ResourceExhausted,
            60,
            MachinePhase::CrashLoopBackOff,
            600,
        ),
        (Code::Unavailable, 60, MachinePhase::CrashLoopBackOff, 5),
        (
            Code::InvalidArgument,
            60,
            MachinePhase::CrashLoopBackOff,
            180,
        ),
        // Cut to the time left until the creation timeout (+1s).
        (
            Code::ResourceExhausted,
            1100,
            MachinePhase::CrashLoopBackOff,
            101,
        ),
        (Code::ResourceExhausted, 1201, MachinePhase::Failed, 600),
        (Code::Internal, 1201, MachinePhase::Failed, 180),
    ];
    for (code, age, phase, retry) in cases {
        let f = create_failure(
            code,
            "quota",
            Step::Create,
            Duration::from_secs(age),
            &s,
            t(0),
        );
        assert_eq!(f.phase, phase, "{code} {age}");
        assert_eq!(f.retry, Duration::from_secs(retry), "{code} {age}");
        assert_eq!(
            f.last_operation.description,
            "Cloud provider message - quota"
        );
        assert_eq!(f.last_operation.error_code, code.name());
        assert_eq!(f.last_operation.state, Some(MachineState::Failed));
        assert_eq!(f.last_operation.type_, Some(MachineOperationType::Create));
    }
}

#[test]
fn creation_patch_sets_only_what_is_missing() {
    let m = Machine::test("m1");
    let p = creation_patch(&m, "local:///a/1", "m1", &json!({"zone": "a"})).unwrap();
    assert_eq!(p["metadata"]["labels"]["node"], "m1");
    assert_eq!(p["metadata"]["annotations"][labels::MACHINE_PRIORITY], "3");
    assert_eq!(
        p["metadata"]["annotations"][LAST_APPLIED_PROVIDER_SPEC],
        r#"{"zone":"a"}"#
    );
    assert_eq!(p["spec"]["providerID"], "local:///a/1");
    let done = Machine::test("m1")
        .with_node("m1")
        .provider_id("local:///a/1")
        .annotation(labels::MACHINE_PRIORITY, "1")
        .annotation(LAST_APPLIED_PROVIDER_SPEC, "{}");
    assert_eq!(
        creation_patch(&done, "local:///a/1", "m1", &json!({})),
        None
    );
}

#[test]
fn created_status_is_pending_with_a_target_and_available_without() {
    use MachinePhase::*;
    let addr = NodeAddress {
        type_: "InternalIP".into(),
        address: "10.0.0.7".into(),
    };
    // (phase before, has target, phase after or None, lastOp state)
    let table = [
        (None, true, Some(Pending), MachineState::Processing),
        (
            Some(CrashLoopBackOff),
            true,
            Some(Pending),
            MachineState::Processing,
        ),
        (Some(Pending), true, None, MachineState::Processing),
        (Some(Running), true, None, MachineState::Processing),
        (Some(Failed), true, None, MachineState::Processing),
        (None, false, Some(Available), MachineState::Successful),
        (
            Some(CrashLoopBackOff),
            false,
            Some(Available),
            MachineState::Successful,
        ),
        (Some(Available), false, None, MachineState::Successful),
        (Some(Failed), false, None, MachineState::Successful),
    ];
    for (before, has_target, after, state) in table {
        let mut m = Machine::test("m1");
        if let Some(p) = before {
            m = m.with_phase(p);
        }
        let s = created_status(&m, has_target, std::slice::from_ref(&addr), t(0));
        let case = format!("{before:?} target={has_target}");
        assert_eq!(
            s.as_ref().map(|s| s.current_status.phase),
            after.map(Some),
            "{case}"
        );
        let Some(s) = s else { continue };
        assert_eq!(s.last_operation.state, Some(state), "{case}");
        assert_eq!(
            s.last_operation.type_,
            Some(MachineOperationType::Create),
            "{case}"
        );
        if has_target {
            assert_eq!(s.last_operation.description, CREATING_DESCRIPTION);
            assert!(s.current_status.timeout_active, "the creation timeout runs");
            assert!(s.addresses.is_empty(), "a node carries the addresses");
        } else {
            assert_eq!(s.last_operation.description, AVAILABLE_DESCRIPTION);
            assert!(!s.current_status.timeout_active, "nothing to time out");
            assert_eq!(s.addresses, vec![addr.clone()], "{case}");
        }
    }
}

#[test]
fn a_node_name_is_needed_only_with_a_target() {
    // (providerID, node name, has target, complete)
    let table = [
        ("local:///a/1", "m1", true, true),
        ("local:///a/1", "", true, false),
        ("", "m1", true, false),
        ("local:///a/1", "", false, true),
        ("local:///a/1", "m1", false, true),
        ("", "m1", false, false),
        ("", "", false, false),
    ];
    for (pid, node, has_target, want) in table {
        assert_eq!(
            vm_ids_complete(pid, node, has_target),
            want,
            "{pid:?} {node:?} target={has_target}"
        );
    }
}

#[test]
fn recheck_after_creation_waits_for_the_join_only_with_a_target() {
    let settings = Settings {
        creation_timeout: Duration::from_secs(120),
        ..Settings::default()
    };
    let m = created_at(Machine::test("m1"), 0);
    // (seconds since creation, has target, wait)
    let table = [
        (0, true, Duration::from_secs(60)),
        (100, true, Duration::from_secs(20)),
        (500, true, Duration::ZERO),
        (0, false, LONG_RETRY),
        (500, false, LONG_RETRY),
    ];
    for (at, has_target, want) in table {
        assert_eq!(
            recheck_after_creation(&m, has_target, &settings, t(at)),
            want,
            "{at}s target={has_target}"
        );
    }
}

#[test]
fn creation_state_machine() {
    use CreationFact::*;
    use CreationStep::*;
    use CreationTransition::Next;
    let vm = |node: &str| VmIds {
        provider_id: "local:///a/1".into(),
        node_name: node.into(),
        addresses: Vec::new(),
    };
    let status = |code| StatusFailed {
        code,
        message: "m".into(),
    };
    let failed = |code, at| CreationTransition::CreateFailed {
        code,
        message: "m".into(),
        at,
    };
    let init_failed = |code| InitializeFailed {
        code,
        message: "m".into(),
    };
    // Every row: (step, fact, machine has a providerID, has target,
    // expected).
    let table: Vec<(CreationStep, CreationFact, bool, bool, CreationTransition)> = vec![
        // C1: a VM found is adopted, never created anew.
        (
            GetVmStatus,
            VmFound(vm("m1")),
            false,
            true,
            Next(RecordVm { initialize: false }),
        ),
        (
            GetVmStatus,
            status(Code::NotFound),
            false,
            true,
            Next(CreateVm),
        ),
        (
            GetVmStatus,
            status(Code::Unimplemented),
            false,
            true,
            Next(CreateVm),
        ),
        // A machine that names its VM keeps it.
        (
            GetVmStatus,
            status(Code::NotFound),
            true,
            true,
            Next(RecordVm { initialize: false }),
        ),
        (
            GetVmStatus,
            status(Code::Uninitialized),
            false,
            true,
            Next(RecordVm { initialize: true }),
        ),
        (
            GetVmStatus,
            status(Code::Unavailable),
            false,
            true,
            failed(Code::Unavailable, Step::CreationStatus),
        ),
        // C2: a new VM is initialized, unless it took an old node's
        // name (only a target cluster has nodes to check).
        (
            CreateVm,
            VmCreated(vm("m1")),
            false,
            true,
            Next(RecordVm { initialize: true }),
        ),
        (
            CreateVm,
            VmCreated(vm("")),
            false,
            true,
            Next(RecordVm { initialize: true }),
        ),
        (
            CreateVm,
            VmCreated(vm("old")),
            false,
            true,
            Next(CheckNodeName),
        ),
        (
            CreateVm,
            VmCreated(vm("old")),
            false,
            false,
            Next(RecordVm { initialize: true }),
        ),
        (
            CreateVm,
            CreateFailed {
                code: Code::ResourceExhausted,
                message: "m".into(),
            },
            false,
            true,
            failed(Code::ResourceExhausted, Step::Create),
        ),
        // C3, C4: the stale node.
        (
            CheckNodeName,
            NodeNameFree,
            false,
            true,
            Next(RecordVm { initialize: true }),
        ),
        (
            CheckNodeName,
            NodeNameTaken,
            false,
            true,
            Next(DeleteStaleVm),
        ),
        (
            DeleteStaleVm,
            StaleVmDeleted,
            false,
            true,
            CreationTransition::StaleNode,
        ),
        (
            DeleteStaleVm,
            StaleVmDeleteFailed,
            false,
            true,
            CreationTransition::Retry(SHORT_RETRY),
        ),
        // C5
        (
            RecordVm { initialize: true },
            Recorded,
            false,
            true,
            Next(InitializeVm),
        ),
        (
            RecordVm { initialize: false },
            Recorded,
            false,
            true,
            Next(VerifyVm),
        ),
        // C6: Unimplemented skips initialization.
        (
            InitializeVm,
            Initialized(vm("m1")),
            true,
            true,
            Next(VerifyVm),
        ),
        (
            InitializeVm,
            init_failed(Code::Unimplemented),
            true,
            true,
            Next(VerifyVm),
        ),
        (
            InitializeVm,
            init_failed(Code::Unavailable),
            true,
            true,
            CreationTransition::InitializeFailed {
                code: Code::Unavailable,
                message: "m".into(),
                after: SHORT_RETRY,
            },
        ),
        (
            InitializeVm,
            init_failed(Code::Internal),
            true,
            true,
            CreationTransition::InitializeFailed {
                code: Code::Internal,
                message: "m".into(),
                after: SHORT_RETRY,
            },
        ),
        // C7
        (VerifyVm, VmNamed, true, true, CreationTransition::Created),
        (
            VerifyVm,
            VmUnnamed,
            false,
            true,
            CreationTransition::CreateFailed {
                code: Code::Internal,
                message: UNNAMED_VM_MESSAGE.into(),
                at: Step::Create,
            },
        ),
        // A fact from another step changes nothing.
        (
            VerifyVm,
            Recorded,
            true,
            true,
            CreationTransition::Retry(SHORT_RETRY),
        ),
        (
            GetVmStatus,
            NodeNameTaken,
            false,
            true,
            CreationTransition::Retry(SHORT_RETRY),
        ),
    ];
    for (step, fact, has_provider_id, has_target, want) in table {
        let cx = CreationContext {
            machine_name: "m1".into(),
            has_provider_id,
            has_target,
            resource_exhausted_retry: Duration::from_secs(600),
        };
        assert_eq!(
            creation_transition(step, &fact, &cx),
            want,
            "{step:?} {fact:?} providerID={has_provider_id} target={has_target}"
        );
    }
}

#[test]
fn vm_ids_are_learned_per_step() {
    let addr = |a: &str| NodeAddress {
        type_: "InternalIP".into(),
        address: a.into(),
    };
    let ids = |pid: &str, node: &str, addrs: &[&str]| VmIds {
        provider_id: pid.into(),
        node_name: node.into(),
        addresses: addrs.iter().map(|a| addr(a)).collect(),
    };
    let known = ids("p1", "n1", &["10.0.0.1"]);
    // (what the pass knew, the fact, what it knows afterwards)
    let table = [
        // The status adopts what it names, and its addresses always.
        (
            known.clone(),
            CreationFact::VmFound(ids("", "", &[])),
            ids("p1", "n1", &[]),
        ),
        (
            known.clone(),
            CreationFact::VmFound(ids("p2", "n2", &["10.0.0.2"])),
            ids("p2", "n2", &["10.0.0.2"]),
        ),
        // A new VM replaces everything.
        (
            known.clone(),
            CreationFact::VmCreated(ids("p2", "", &[])),
            ids("p2", "", &[]),
        ),
        // Initialization fills in only what is missing.
        (
            known.clone(),
            CreationFact::Initialized(ids("p2", "n2", &[])),
            known.clone(),
        ),
        (
            ids("", "", &["10.0.0.1"]),
            CreationFact::Initialized(ids("p2", "n2", &["10.0.0.2"])),
            ids("p2", "n2", &["10.0.0.2"]),
        ),
        (known.clone(), CreationFact::Recorded, known.clone()),
    ];
    for (i, (before, fact, want)) in table.into_iter().enumerate() {
        let mut vm = before;
        vm.learn(&fact);
        assert_eq!(vm, want, "case {i}");
    }
    let m = Machine::test("m1")
        .with_node("n1")
        .provider_id("local:///a/1");
    assert_eq!(VmIds::of(&m), ids("local:///a/1", "n1", &[]));
    assert!(ids("p", "", &[]).complete(false));
    assert!(!ids("p", "", &[]).complete(true));
}

#[test]
fn creation_ends() {
    use MachinePhase::*;
    let settings = Settings {
        creation_timeout: Duration::from_secs(120),
        resource_exhausted_retry: Duration::from_secs(600),
        ..Settings::default()
    };
    let new = created_at(Machine::test("m1"), 0);
    let running = created_at(Machine::test("m1").with_phase(Running), 0);
    let vm = VmIds {
        provider_id: "local:///a/1".into(),
        node_name: "m1".into(),
        addresses: vec![NodeAddress {
            type_: "InternalIP".into(),
            address: "10.0.0.7".into(),
        }],
    };
    let end = |m: &Machine, t_: &CreationTransition, has_target| {
        creation_end(m, t_, &vm, has_target, &settings, t(30)).unwrap()
    };
    let phase = |e: &CreationEnd| e.status.as_ref().and_then(|s| s.current_status.phase);
    let op = |e: &CreationEnd| e.status.clone().unwrap().last_operation;

    assert_eq!(
        creation_end(
            &new,
            &CreationTransition::Next(CreationStep::VerifyVm),
            &vm,
            true,
            &settings,
            t(30)
        ),
        None
    );
    // Created: Pending until the node joins, looked at again by the
    // creation timeout; Available at once without a target.
    let e = end(&new, &CreationTransition::Created, true);
    assert_eq!(phase(&e), Some(Pending));
    assert_eq!(op(&e).description, CREATING_DESCRIPTION);
    assert_eq!((e.after, e.event), (Duration::from_secs(60), None));
    let e = end(&new, &CreationTransition::Created, false);
    assert_eq!(phase(&e), Some(Available));
    assert_eq!(e.status.unwrap().addresses, vm.addresses);
    assert_eq!(e.after, LONG_RETRY);
    // A machine past creation keeps its status.
    let e = end(&running, &CreationTransition::Created, true);
    assert_eq!(e.status, None);

    let e = end(
        &new,
        &CreationTransition::CreateFailed {
            code: Code::ResourceExhausted,
            message: "quota".into(),
            at: Step::Create,
        },
        true,
    );
    assert_eq!(phase(&e), Some(CrashLoopBackOff));
    assert_eq!(op(&e).description, "Cloud provider message - quota");
    assert_eq!(op(&e).error_code, "ResourceExhausted");
    // Cut to the creation timeout (+1s).
    assert_eq!(e.after, Duration::from_secs(91));
    let ev = e.event.unwrap();
    assert_eq!(
        (ev.warning, ev.reason, ev.note.as_str()),
        (true, "CreateFailed", "ResourceExhausted: quota")
    );

    let e = end(
        &running,
        &CreationTransition::InitializeFailed {
            code: Code::Internal,
            message: "boom".into(),
            after: SHORT_RETRY,
        },
        true,
    );
    assert_eq!(phase(&e), Some(Running), "the phase is kept");
    assert_eq!(
        op(&e).description,
        "Provider error: boom. Initialize VM Instance"
    );
    assert_eq!(op(&e).state, Some(MachineState::Failed));
    assert_eq!(e.after, SHORT_RETRY);
    assert_eq!(e.event.unwrap().reason, "InitializeFailed");

    let e = end(&new, &CreationTransition::StaleNode, true);
    assert_eq!(phase(&e), Some(Failed));
    assert_eq!(op(&e).description, STALE_NODE_DESCRIPTION);
    assert_eq!(e.after, LONG_RETRY);
    assert_eq!(e.event.unwrap().reason, "StaleNode");

    let e = end(&new, &CreationTransition::Retry(SHORT_RETRY), true);
    assert_eq!((e.status, e.after, e.event), (None, SHORT_RETRY, None));
}
