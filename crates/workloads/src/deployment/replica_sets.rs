//! A Deployment's ReplicaSets as its template makes them: semantic
//! template equality (ignoring the pod-template hash), finding the new
//! set among the old, building and naming it (with collision detection),
//! and the revision, revision-history and replica annotations the sets
//! carry.

use super::*;

pub(super) fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

pub fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, names::REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(super) fn int_annotation(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(&rs.metadata, key).and_then(|v| v.parse().ok())
}

/// A template as `apiequality.Semantic.DeepEqual` compares it: absent,
/// null, empty maps and empty lists are all the same.
fn semantic(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k, semantic(v)))
                .filter(|(_, v)| !is_empty(v))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(semantic).collect()),
        other => other,
    }
}

pub(super) fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `EqualIgnoreHash`: equal templates, ignoring the hash label.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
            l.remove(names::POD_TEMPLATE_HASH);
        }
        semantic(serde_json::to_value(t).unwrap_or(Value::Null))
    };
    strip(a) == strip(b)
}

/// Upstream's `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub(super) fn by_age(a: &ReplicaSet, b: &ReplicaSet) -> std::cmp::Ordering {
    created(&a.metadata)
        .cmp(&created(&b.metadata))
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// The ReplicaSet running the Deployment's current template, if any (the
/// oldest, should there be several).
pub fn find_new<'a>(d: &Deployment, sets: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    let t = template(d);
    let mut matching: Vec<&ReplicaSet> = sets
        .iter()
        .copied()
        .filter(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|rt| equal_ignore_hash(rt, &t))
        })
        .collect();
    matching.sort_by(|a, b| by_age(a, b));
    matching.first().copied()
}

/// The ReplicaSet a Deployment creates for its template, with `replicas`.
pub fn new_replica_set(d: &Deployment, replicas: i32, revision: i64) -> ReplicaSet {
    let collision = d.status.as_ref().and_then(|s| s.collision_count);
    let mut t = template(d);
    let hash = crate::hash::pod_template_hash(&t, collision);
    t.metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(names::POD_TEMPLATE_HASH.into(), hash.clone());
    let mut selector: LabelSelector = d
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(names::POD_TEMPLATE_HASH.into(), hash.clone());
    let owner = Owner::of("apps/v1", "Deployment", &d.metadata).controller_ref();
    let mut rs = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", meta::name(&d.metadata))),
            namespace: d.metadata.namespace.clone(),
            labels: t.metadata.as_ref().and_then(|m| m.labels.clone()),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
            selector,
            template: Some(t),
        }),
        status: None,
    };
    set_new_annotations(d, &mut rs, revision, false);
    rs
}

/// Whether an `AlreadyExists` for the new set's name is a hash collision:
/// the existing set is not this Deployment's, or runs another template.
pub fn collision(d: &Deployment, existing: &ReplicaSet) -> bool {
    let ours = meta::is_controlled_by(
        &existing.metadata,
        d.metadata.uid.as_deref().unwrap_or_default(),
    );
    let same = existing
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .is_some_and(|t| equal_ignore_hash(t, &template(d)));
    !(ours && same)
}

/// `SetNewReplicaSetAnnotations`: copy the Deployment's annotations, raise
/// the revision (remembering the old one when rolling back to this set),
/// and on creation record the desired and maximum replicas. Returns
/// whether anything changed.
pub(super) fn set_new_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let annotations = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) || annotations.get(k) == Some(v) {
            continue;
        }
        annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    let old = annotations.get(names::REVISION).cloned();
    let old_int = match old.as_deref().map(str::parse::<i64>) {
        None => 0,
        Some(Ok(v)) => v,
        // Upstream leaves a set with an unreadable revision alone.
        Some(Err(_)) => return changed,
    };
    if old_int < new_revision {
        annotations.insert(names::REVISION.into(), new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = annotations
                .get(names::REVISION_HISTORY)
                .cloned()
                .unwrap_or_default();
            if history.is_empty() {
                annotations.insert(names::REVISION_HISTORY.into(), old);
            } else {
                let mut parts: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                while total > MAX_REVISION_HISTORY_CHARS && !parts.is_empty() {
                    total -= parts[0].len() + 1;
                    parts.remove(0);
                }
                if total <= MAX_REVISION_HISTORY_CHARS {
                    parts.push(&old);
                    annotations.insert(names::REVISION_HISTORY.into(), parts.join(","));
                }
            }
        }
    }
    if !exists {
        let r = replicas(d);
        changed |= set_replicas_annotations(rs, r, r + max_surge(d));
    }
    changed
}

/// Records the Deployment's replicas and maximum on a set; returns whether
/// they changed.
pub(super) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i32, max: i32) -> bool {
    let a = rs.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let mut changed = false;
    for (k, v) in [
        (names::DESIRED_REPLICAS, desired),
        (names::MAX_REPLICAS, max),
    ] {
        if a.get(k).map(String::as_str) != Some(v.to_string().as_str()) {
            a.insert(k.into(), v.to_string());
            changed = true;
        }
    }
    changed
}
