//! Field ownership: `metadata.managedFields` and server-side apply.
//!
//! Every write records which manager set which fields. A field set is a set
//! of paths into the object; a path is a list of elements in the FieldsV1
//! encoding kube-apiserver uses: `f:<field>` for map entries, `k:<json>` for
//! an element of an associative list (its key fields), `v:<json>` for an
//! element of a set, `i:<n>` for a list element without keys. Fields owned
//! are the leaves (scalars, atomic lists and maps, empty maps), the elements
//! of associative lists and sets, and entries of free-form maps; granular
//! maps are only the road to them. The FieldsV1 JSON nests the elements,
//! with `".": {}` marking a node that is owned and also has owned children.
//!
//! - A non-apply write (create, update, patch) is an `Update` operation: the
//!   fields it changed or added move to its manager (taken from every other
//!   manager), and fields it removed leave every manager. A write that
//!   changes nothing leaves managedFields alone, so no-op writes stay no-ops.
//! - An apply (`application/apply-patch+yaml`) merges the applied
//!   configuration into the live object by the object's list and map
//!   semantics, makes the manager own exactly the applied fields, removes
//!   the fields it applied last time but no longer applies (unless another
//!   manager owns them), and fails with 409 when it would change a field
//!   another manager owns, unless forced, which takes the field over.
//!
//! Requests cannot forge ownership by accident: a write that omits
//! managedFields (or sends an empty list) keeps the live ones, and
//! `[{}]` resets them, as in kube-apiserver.

mod apply;
mod encoding;
mod fields;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use apimachinery::ApiError;
use http::HeaderMap;
use serde_json::Value;

use crate::http::request::Query;
use crate::http::shape::Shape;
use crate::object;
use crate::storage::registry::Resource;
pub use apply::*;
pub use encoding::*;
use fields::*;

/// kube-apiserver's limit on a field manager name.
const MAX_MANAGER_LEN: usize = 128;

/// Path elements of an owned field, outermost first.
pub type Path = Vec<String>;
/// A set of owned fields.
pub type FieldSet = BTreeSet<Path>;

/// Metadata fields nobody owns: the server sets them, or they identify the
/// object.
const UNOWNED_META: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One decoded `managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Managed {
    pub manager: String,
    pub operation: Operation,
    pub api_version: String,
    pub time: Option<String>,
    pub subresource: String,
    pub fields: FieldSet,
}

impl Managed {
    /// Whether two entries belong to the same manager. Apply entries are
    /// one per manager and subresource; Update entries also per apiVersion.
    fn same_owner(&self, manager: &str, op: Operation, api_version: &str, sub: &str) -> bool {
        self.manager == manager
            && self.operation == op
            && self.subresource == sub
            && (op == Operation::Apply || self.api_version == api_version)
    }

    /// How conflicts name this manager.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

// ---------------------------------------------------------------------------
// Manager names

/// The field manager of a non-apply write: the `fieldManager` parameter, or
/// the User-Agent up to its first `/` (printable characters, at most 128
/// bytes), as kube-apiserver defaults it.
pub fn manager_for(query: &Query, headers: &HeaderMap) -> Result<String, ApiError> {
    if let Some(m) = query.get("fieldManager") {
        validate_manager(m)?;
        return Ok(m.to_string());
    }
    let ua = headers
        .get(http::header::USER_AGENT)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let prefix = ua.split('/').next().unwrap_or("");
    let mut out = String::new();
    for c in prefix.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_MANAGER_LEN {
            break;
        }
        out.push(c);
    }
    Ok(out)
}

pub fn validate_manager(m: &str) -> Result<(), ApiError> {
    if m.len() > MAX_MANAGER_LEN {
        return Err(ApiError::bad_request(format!(
            "fieldManager: Too long: may not be more than {MAX_MANAGER_LEN} bytes"
        )));
    }
    if m.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "fieldManager: Invalid value: {m:?}: must only contain printable characters"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Update operations

/// Records a non-apply write of `new` over `old` (`None` for a create) by
/// `manager` in `new`'s managedFields.
pub fn record_update(
    res: &Resource,
    sub: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
) {
    record_update_at(res, sub, old, new, manager, &object::now_rfc3339());
}

fn record_update_at(
    res: &Resource,
    sub: Option<&str>,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
) {
    let shape = Shape::for_resource(res);
    let mut managers = match requested(new) {
        Requested::Reset => Vec::new(),
        Requested::Entries(e) => e,
        Requested::Unset => old.map(live_managers).unwrap_or_default(),
    };
    let cmp = {
        let old_flat = old.map(|o| flatten(o, shape)).unwrap_or_default();
        compare(&old_flat, &flatten(new, shape))
    };
    for m in &mut managers {
        m.fields
            .retain(|p| !cmp.changed.contains(p) && !cmp.removed.contains(p));
    }
    if !cmp.changed.is_empty() {
        let api_version = res.api_version();
        let sub = sub.unwrap_or("");
        match managers
            .iter_mut()
            .find(|m| m.same_owner(manager, Operation::Update, &api_version, sub))
        {
            Some(m) => {
                m.fields.extend(cmp.changed);
                m.time = Some(now.to_string());
            }
            None => managers.push(Managed {
                manager: manager.to_string(),
                operation: Operation::Update,
                api_version,
                time: Some(now.to_string()),
                subresource: sub.to_string(),
                fields: cmp.changed,
            }),
        }
    }
    managers.retain(|m| !m.fields.is_empty());
    set_managed(new, managers);
}
