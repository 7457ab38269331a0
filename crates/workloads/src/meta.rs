//! Object metadata as controllers use it: label selectors, controller
//! references, and the claim rules upstream's `ControllerRefManager`
//! applies (adopt matching orphans, release owned objects that stopped
//! matching, never touch what another controller owns), plus the clock
//! conversions between Kubernetes times and chrono.

use std::collections::BTreeMap;

use chrono::{DateTime, SubsecRound, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use serde_json::{Map, Value};

/// A parsed label selector.
#[derive(Clone, Debug)]
pub struct Selector(apimachinery::selector::LabelSelector);

impl Selector {
    /// A `metav1.LabelSelector`; an empty one selects everything (as
    /// `LabelSelectorAsSelector` does), an invalid one is an error.
    pub fn from_label_selector(s: &LabelSelector) -> Result<Selector, String> {
        let v = serde_json::to_value(s).map_err(|e| e.to_string())?;
        // A selector without any field serializes as `{}`: everything.
        apimachinery::selector::LabelSelector::from_json(&v)
            .map(Selector)
            .map_err(|e| e.message)
    }

    /// A Service's `spec.selector` map: every label must match.
    pub fn from_map(m: &BTreeMap<String, String>) -> Selector {
        let labels: Map<String, Value> = m
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        apimachinery::selector::LabelSelector::from_labels(&labels)
            .map(Selector)
            .unwrap_or_else(|_| Selector(apimachinery::selector::LabelSelector::nothing()))
    }

    /// Whether the selector has no requirement at all (selects everything).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let labels: Map<String, Value> = labels
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        self.0.matches(&labels)
    }
}

/// What a controller needs to know about itself to claim objects.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
    /// The owner is being deleted: it neither adopts nor releases.
    pub deleting: bool,
}

impl Owner {
    pub fn of(api_version: &str, kind: &str, meta: &ObjectMeta) -> Owner {
        Owner {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }

    /// `metav1.NewControllerRef`: controller and blocking owner deletion.
    pub fn controller_ref(&self) -> OwnerReference {
        OwnerReference {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// The controller reference of an object, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// Whether `meta` is controlled by the object with `uid`.
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

/// How a controller stands to one candidate object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// Owned and matching: the controller manages it.
    Owned,
    /// An orphan that matches: adopt it (then it is managed).
    Adopt,
    /// Owned but no longer matching: release it (then it is not managed).
    Release,
    /// Someone else's, or an orphan that does not match: leave it alone.
    Ignore,
}

/// `ControllerRefManager.ClaimObject`: whether `owner` manages `obj`
/// (which `matches` its selector, and passes any extra filter the caller
/// folded into `matches`).
pub fn claim(owner: &Owner, obj: &ObjectMeta, matches: bool) -> Claim {
    match controller_of(obj) {
        Some(r) if r.uid != owner.uid => Claim::Ignore,
        Some(_) if matches => Claim::Owned,
        // Owned but no longer selected; a deleting owner keeps it so the
        // garbage collector can still find it.
        Some(_) if owner.deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None => {
            let same_namespace =
                owner.namespace.is_empty() || obj.namespace.as_deref() == Some(&owner.namespace);
            if owner.deleting || !matches || obj.deletion_timestamp.is_some() || !same_namespace {
                Claim::Ignore
            } else {
                Claim::Adopt
            }
        }
    }
}

/// The merge patch that adopts an object: its owner references with the
/// controller reference added, guarded by its resource version (a 409
/// means someone changed it first; the next pass decides again).
pub fn adopt_patch(owner: &Owner, obj: &ObjectMeta) -> Value {
    let mut refs: Vec<OwnerReference> = obj.owner_references.clone().unwrap_or_default();
    refs.retain(|r| r.uid != owner.uid);
    refs.push(owner.controller_ref());
    serde_json::json!({"metadata": {
        "ownerReferences": refs,
        "resourceVersion": obj.resource_version,
    }})
}

/// The merge patch that releases an object: its owner references without
/// the owner's, guarded by its resource version. An empty list is sent as
/// `null` so no `ownerReferences: []` is stored.
pub fn release_patch(owner: &Owner, obj: &ObjectMeta) -> Value {
    let refs: Vec<OwnerReference> = obj
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.uid != owner.uid)
        .collect();
    let refs = if refs.is_empty() {
        Value::Null
    } else {
        serde_json::to_value(refs).unwrap_or(Value::Null)
    };
    serde_json::json!({"metadata": {
        "ownerReferences": refs,
        "resourceVersion": obj.resource_version,
    }})
}

/// The API's clock resolution: times are stored in whole seconds, so
/// planners reason in whole seconds too and a status they compute twice
/// compares equal.
pub fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(0)
}

pub fn to_chrono(t: &Time) -> DateTime<Utc> {
    mcm::time::to_chrono(t)
}

pub fn to_time(t: DateTime<Utc>) -> Time {
    mcm::time::to_time(whole_seconds(t))
}

/// The object's creation time (the epoch when unset, so sorting by age
/// puts it first, as Go's zero time does).
pub fn created(meta: &ObjectMeta) -> DateTime<Utc> {
    meta.creation_timestamp
        .as_ref()
        .map(to_chrono)
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

/// Characters `generateName` draws from: no vowels, so names never spell
/// words.
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A name as the API server's `generateName` makes it: the prefix (cut to
/// 58 characters) and five random characters. Controllers choose the name
/// themselves so they know it before the create returns, which lets them
/// expect it in their cache without a race; they also send `generateName`
/// so the object reads as upstream's.
pub fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    let cut: String = prefix.chars().take(58).collect();
    let suffix: String = (0..5)
        .map(|_| NAME_ALPHABET[rng.random_range(0..NAME_ALPHABET.len())] as char)
        .collect();
    format!("{cut}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(owner_uid: Option<&str>, deleting: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            resource_version: Some("7".into()),
            owner_references: owner_uid.map(|u| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: u.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            deletion_timestamp: deleting.then(|| to_time(Utc::now())),
            ..ObjectMeta::default()
        }
    }

    fn owner(deleting: bool) -> Owner {
        Owner {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            namespace: "ns".into(),
            uid: "u1".into(),
            deleting,
        }
    }

    #[test]
    fn claim_table() {
        let cases = [
            // (object owner, object deleting, matches, owner deleting, want)
            (Some("u1"), false, true, false, Claim::Owned),
            (Some("u1"), false, false, false, Claim::Release),
            (Some("u1"), false, false, true, Claim::Ignore),
            (Some("u2"), false, true, false, Claim::Ignore),
            (None, false, true, false, Claim::Adopt),
            (None, false, false, false, Claim::Ignore),
            (None, true, true, false, Claim::Ignore),
            (None, false, true, true, Claim::Ignore),
        ];
        for (obj_owner, obj_deleting, matches, owner_deleting, want) in cases {
            let got = claim(
                &owner(owner_deleting),
                &meta(obj_owner, obj_deleting),
                matches,
            );
            assert_eq!(
                got, want,
                "{obj_owner:?} {obj_deleting} {matches} {owner_deleting}"
            );
        }
        // Never adopt across namespaces.
        let mut other = meta(None, false);
        other.namespace = Some("other".into());
        assert_eq!(claim(&owner(false), &other, true), Claim::Ignore);
    }

    #[test]
    fn adopt_and_release_patches_keep_other_owners_and_guard_the_version() {
        let mut m = meta(Some("u1"), false);
        let o = owner(false);
        let released = release_patch(&o, &m);
        assert_eq!(released["metadata"]["ownerReferences"], Value::Null);
        assert_eq!(released["metadata"]["resourceVersion"], "7");
        m.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "c".into(),
            uid: "other".into(),
            ..OwnerReference::default()
        }]);
        let adopted = adopt_patch(&o, &m);
        let refs = adopted["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(refs.len(), 2);
        assert_eq!(refs[1]["uid"], "u1");
        assert_eq!(refs[1]["controller"], true);
    }

    #[test]
    fn selectors() {
        let sel = Selector::from_label_selector(&LabelSelector {
            match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            ..LabelSelector::default()
        })
        .unwrap();
        let web = BTreeMap::from([("app".to_string(), "web".to_string())]);
        assert!(sel.matches(Some(&web)));
        assert!(!sel.matches(None));
        let all = Selector::from_label_selector(&LabelSelector::default()).unwrap();
        assert!(all.is_empty() && all.matches(None));
        assert!(Selector::from_map(&web).matches(Some(&web)));
    }

    #[test]
    fn generated_names_look_like_the_servers() {
        let n = generate_name("web-7c5d-");
        assert!(n.starts_with("web-7c5d-"));
        assert_eq!(n.len(), "web-7c5d-".len() + 5);
        assert!(n[9..].bytes().all(|b| NAME_ALPHABET.contains(&b)));
        assert_eq!(generate_name(&"x".repeat(80)).len(), 63);
    }
}
