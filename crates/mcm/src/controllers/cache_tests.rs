//! The indexes against the store they index: every lookup must answer
//! what a scan of the whole store would, across adds, updates, deletes,
//! relabels, owner changes and relists.

use super::*;
use api::testing::{Fixture, TEST_NAMESPACE};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use watcher::Event;

fn set(name: &str) -> MachineSet {
    let mut s = MachineSet::test(name);
    s.metadata.uid = Some(format!("uid-{name}"));
    s
}

/// What a scan of the whole store answers for `key` (the old way).
fn scan(cache: &Cache<Machine>, key: &IndexKey) -> Vec<String> {
    let mut out: Vec<String> = cache
        .state()
        .iter()
        .filter(|m| machine_keys(m).contains(key))
        .map(|m| m.name_any())
        .collect();
    out.sort();
    out
}

fn names(found: Vec<Arc<Machine>>) -> Vec<String> {
    let mut out: Vec<String> = found.iter().map(|m| m.name_any()).collect();
    out.sort();
    out
}

fn ns(s: &str) -> (String, String) {
    (TEST_NAMESPACE.to_string(), s.to_string())
}

#[test]
fn lookups_follow_adds_updates_relabels_owner_changes_and_deletes() {
    let (cache, mut w) = cache(machine_keys);
    let (a, b) = (set("a"), set("b"));
    let by_owner = |uid: &str| names(cache.by(&IndexKey::Controller(uid.into())));
    let by_node = |n: &str| names(cache.by(&IndexKey::Node(n.into())));
    let class = |c: &str| {
        let (ns, c) = ns(c);
        cache.count(&IndexKey::Class(ns, c))
    };

    w.apply(&Event::Apply(Machine::test("m1").owned_by(&a)));
    w.apply(&Event::Apply(
        Machine::test("m2").owned_by(&a).with_node("n2"),
    ));
    w.apply(&Event::Apply(
        Machine::test("m3").owned_by(&b).class("other"),
    ));
    assert_eq!(by_owner("uid-a"), ["m1", "m2"]);
    assert_eq!(by_owner("uid-b"), ["m3"]);
    assert_eq!(by_node("n2"), ["m2"]);
    assert_eq!((class("test-class"), class("other")), (2, 1));

    // A status update changes no key; the index still answers.
    w.apply(&Event::Apply(Machine::test("m1").owned_by(&a).running()));
    assert_eq!(by_owner("uid-a"), ["m1", "m2"]);
    assert_eq!(
        cache.by(&IndexKey::Name("m1".into()))[0].phase(),
        Some(api::MachinePhase::Running)
    );

    // Relabelled to another node, and to another class.
    w.apply(&Event::Apply(
        Machine::test("m2").owned_by(&a).with_node("n9"),
    ));
    assert!(by_node("n2").is_empty());
    assert_eq!(by_node("n9"), ["m2"]);
    w.apply(&Event::Apply(
        Machine::test("m1").owned_by(&a).class("other"),
    ));
    assert_eq!((class("test-class"), class("other")), (1, 2));

    // Adopted by another owner; then orphaned (no controller reference).
    w.apply(&Event::Apply(
        Machine::test("m1").owned_by(&b).class("other"),
    ));
    assert_eq!(by_owner("uid-a"), ["m2"]);
    assert_eq!(by_owner("uid-b"), ["m1", "m3"]);
    let mut orphan = Machine::test("m3").owned_by(&b).class("other");
    orphan.metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(false),
        ..orphan.metadata.owner_references.unwrap().remove(0)
    }]);
    w.apply(&Event::Apply(orphan));
    assert_eq!(by_owner("uid-b"), ["m1"]);

    // Deleted.
    w.apply(&Event::Delete(Machine::test("m2")));
    assert!(by_owner("uid-a").is_empty());
    assert!(by_node("n9").is_empty());
    assert_eq!(cache.state().len(), 2);
}

#[test]
fn a_relist_swaps_the_index_with_the_store() {
    let (cache, mut w) = cache(machine_keys);
    let a = set("a");
    w.apply(&Event::Init);
    w.apply(&Event::InitApply(Machine::test("m1").owned_by(&a)));
    w.apply(&Event::InitDone);
    let key = IndexKey::Controller("uid-a".into());
    assert_eq!(names(cache.by(&key)), ["m1"]);

    // During the relist both keep serving the old state …
    w.apply(&Event::Init);
    w.apply(&Event::InitApply(Machine::test("m2").owned_by(&a)));
    assert_eq!(names(cache.by(&key)), ["m1"]);
    assert_eq!(cache.state().len(), 1);
    // … and afterwards both show only what was relisted.
    w.apply(&Event::InitDone);
    assert_eq!(names(cache.by(&key)), ["m2"]);
    assert_eq!(scan(&cache, &key), ["m2"]);
}

#[test]
fn sets_and_nodes_are_indexed_by_controller_and_machine_name() {
    let (sets, mut w) = cache(set_keys);
    let mut s = set("s1");
    s.metadata.owner_references = Some(vec![OwnerReference {
        controller: Some(true),
        uid: "md-uid".into(),
        ..OwnerReference::default()
    }]);
    w.apply(&Event::Apply(s));
    w.apply(&Event::Apply(set("s2")));
    assert_eq!(sets.count(&IndexKey::Controller("md-uid".into())), 1);

    let (nodes, mut w) = cache(node_keys);
    let node = |name: &str, machine: Option<&str>| {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        if let Some(m) = machine {
            n.metadata.labels =
                Some([(labels::NODE_MACHINE_NAME.to_string(), m.to_string())].into());
        }
        n
    };
    w.apply(&Event::Apply(node("n1", Some("m1"))));
    w.apply(&Event::Apply(node("n2", None)));
    let found = nodes.by(&IndexKey::MachineName("m1".into()));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].name_any(), "n1");
    w.apply(&Event::Apply(node("n1", None)));
    assert!(nodes.by(&IndexKey::MachineName("m1".into())).is_empty());
}

/// Random event sequences: after every event, every key answers what a
/// scan of the store answers.
#[test]
fn random_event_sequences_keep_the_index_equal_to_a_scan() {
    let sets = [set("a"), set("b"), set("c")];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let (cache, mut w) = cache(machine_keys);
    let mut relisting: Option<Vec<Machine>> = None;
    for _ in 0..3000 {
        let name = format!("m{}", next(12));
        let mut m = Machine::test(&name).owned_by(&sets[next(3) as usize]);
        if next(2) == 0 {
            m = m.with_node(&format!("n{}", next(4)));
        }
        if next(3) == 0 {
            m = m.class("other");
        }
        if next(4) == 0 {
            m = m.label(labels::NAME, &format!("md{}", next(2)));
        }
        let ev = match (relisting.is_some(), next(10)) {
            (false, 0) => Event::Init,
            (false, 1..=3) => Event::Delete(m),
            (false, _) => Event::Apply(m),
            (true, 0) => Event::InitDone,
            (true, _) => Event::InitApply(m),
        };
        match &ev {
            Event::Init => relisting = Some(Vec::new()),
            Event::InitDone => relisting = None,
            _ => {}
        }
        w.apply(&ev);
        let mut keys: Vec<IndexKey> = (0..4).map(|i| IndexKey::Node(format!("n{i}"))).collect();
        keys.extend(
            sets.iter()
                .map(|s| IndexKey::Controller(s.metadata.uid.clone().unwrap())),
        );
        keys.extend(["test-class", "other"].map(|c| IndexKey::Class(ns(c).0, c.into())));
        keys.extend(["md0", "md1", "a", "b"].map(|g| IndexKey::Group(ns(g).0, g.into())));
        keys.extend((0..12).map(|i| IndexKey::Name(format!("m{i}"))));
        for key in &keys {
            assert_eq!(names(cache.by(key)), scan(&cache, key), "{key:?}");
            assert_eq!(cache.count(key), scan(&cache, key).len(), "{key:?}");
        }
    }
}
