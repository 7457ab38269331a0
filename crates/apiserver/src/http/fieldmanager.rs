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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use apimachinery::{ApiError, Cause};
use http::HeaderMap;
use serde_json::{Map, Value, json};

use crate::http::request::Query;
use crate::http::shape::{ListKind, Shape};
use crate::object;
use crate::storage::registry::Resource;

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
// Field sets of objects

/// The paths of an object a field set can name.
type Flat<'v> = BTreeMap<Path, Entry<'v>>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Entry<'v> {
    /// An owned leaf, with its value (compared to find changes).
    Leaf(&'v Value),
    /// An owned element or map entry that has owned children.
    Owned,
    /// A granular map that nobody owns by applying it, but that an update
    /// adding it does own (`".": {}`), as kube-apiserver's comparison of
    /// typed objects finds. Go value structs (`spec`, a pod template) are
    /// never added, since the typed object always has them.
    Map,
}

/// The paths an applied configuration owns.
fn owned(flat: Flat<'_>) -> FieldSet {
    flat.into_iter()
        .filter(|(_, e)| *e != Entry::Map)
        .map(|(p, _)| p)
        .collect()
}

/// The field set of a whole object, without the fields nobody owns.
fn flatten<'v>(obj: &'v Value, shape: Shape<'_>) -> Flat<'v> {
    let mut out = Flat::new();
    let Value::Object(root) = obj else {
        return out;
    };
    let mut path = Path::new();
    for (k, v) in root {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        if k == "metadata"
            && let Value::Object(meta) = v
        {
            let meta_shape = shape.field(k);
            path.push("f:metadata".into());
            for (mk, mv) in meta {
                if UNOWNED_META.contains(&mk.as_str()) {
                    continue;
                }
                path.push(format!("f:{mk}"));
                walk(mv, meta_shape.field(mk), false, &mut path, &mut out);
                path.pop();
            }
            path.pop();
            continue;
        }
        path.push(format!("f:{k}"));
        walk(v, shape.field(k), !shape.declared(k), &mut path, &mut out);
        path.pop();
    }
    out
}

fn walk<'v>(
    v: &'v Value,
    shape: Shape<'_>,
    owned_container: bool,
    path: &mut Path,
    out: &mut Flat<'v>,
) {
    match v {
        Value::Object(m) if !m.is_empty() && !shape.is_atomic_map() => {
            if owned_container {
                out.insert(path.clone(), Entry::Owned);
            } else if !shape.always_present() {
                out.insert(path.clone(), Entry::Map);
            }
            for (k, child) in m {
                path.push(format!("f:{k}"));
                walk(child, shape.field(k), !shape.declared(k), path, out);
                path.pop();
            }
        }
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => {
                out.insert(path.clone(), Entry::Leaf(v));
            }
            ListKind::Set => {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone(), Entry::Leaf(item));
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                let item_shape = shape.items();
                let keys: Vec<&str> = keys.iter().collect();
                for (i, item) in items.iter().enumerate() {
                    path.push(element(item, &keys, i));
                    match item {
                        Value::Object(m) => {
                            out.insert(path.clone(), Entry::Owned);
                            for (k, child) in m {
                                path.push(format!("f:{k}"));
                                walk(
                                    child,
                                    item_shape.field(k),
                                    !item_shape.declared(k),
                                    path,
                                    out,
                                );
                                path.pop();
                            }
                        }
                        other => {
                            out.insert(path.clone(), Entry::Leaf(other));
                        }
                    }
                    path.pop();
                }
            }
        },
        _ => {
            out.insert(path.clone(), Entry::Leaf(v));
        }
    }
}

/// The path element of an associative list's element: `k:` with its key
/// fields (sorted by name, as kube-apiserver writes them), or `i:` when it
/// has none.
fn element(item: &Value, keys: &[&str], index: usize) -> String {
    let key: BTreeMap<&str, &Value> = keys
        .iter()
        .filter_map(|k| item.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
        .collect();
    if key.is_empty() {
        format!("i:{index}")
    } else {
        format!("k:{}", serde_json::to_string(&key).unwrap_or_default())
    }
}

/// The fields a write changed (modified or added) and removed.
struct Comparison {
    changed: FieldSet,
    removed: FieldSet,
}

fn compare(old: &Flat<'_>, new: &Flat<'_>) -> Comparison {
    let mut changed = FieldSet::new();
    let mut removed = FieldSet::new();
    for (p, nv) in new {
        match old.get(p) {
            None => {
                changed.insert(p.clone());
            }
            Some(ov) if ov != nv => {
                changed.insert(p.clone());
            }
            Some(_) => {}
        }
    }
    for p in old.keys() {
        if !new.contains_key(p) {
            removed.insert(p.clone());
        }
    }
    Comparison { changed, removed }
}

/// The part of an applied configuration a write to `sub` may change: only
/// status through `/status`, and no status through the main resource when a
/// status subresource exists (kube-apiserver's reset fields). The rest is
/// neither merged nor owned.
fn reset_fields(applied: &Value, res: &Resource, sub: Option<&str>) -> Value {
    let mut out = applied.clone();
    if let Value::Object(m) = &mut out {
        match sub {
            Some("status") => {
                m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "status"))
            }
            None if res.status_subresource => {
                m.shift_remove("status");
            }
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------
// FieldsV1 and managedFields encoding

/// Decodes a FieldsV1 object into a set.
pub fn decode_fields(v: &Value) -> Option<FieldSet> {
    let mut out = FieldSet::new();
    let mut path = Path::new();
    decode_node(v, &mut path, &mut out)?;
    Some(out)
}

fn decode_node(v: &Value, path: &mut Path, out: &mut FieldSet) -> Option<()> {
    let Value::Object(m) = v else { return None };
    for (k, child) in m {
        if k == "." {
            if !path.is_empty() {
                out.insert(path.clone());
            }
            continue;
        }
        if !["f:", "k:", "v:", "i:"].iter().any(|p| k.starts_with(p)) {
            return None;
        }
        path.push(k.clone());
        match child {
            Value::Object(c) if c.is_empty() => {
                out.insert(path.clone());
            }
            _ => decode_node(child, path, out)?,
        }
        path.pop();
    }
    Some(())
}

/// Encodes a set as FieldsV1: nested objects, `{}` for an owned leaf and
/// `".": {}` first in an owned node that has owned children.
pub fn encode_fields(set: &FieldSet) -> Value {
    let mut root = Map::new();
    let mut iter = set.iter().peekable();
    while let Some(path) = iter.next() {
        if path.is_empty() {
            continue;
        }
        let has_children = iter.peek().is_some_and(|next| next.starts_with(path));
        let mut node = &mut root;
        for el in path {
            let entry = node.entry(el.clone()).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            node = match entry {
                Value::Object(m) => m,
                _ => unreachable!("made an object above"),
            };
        }
        if has_children {
            node.insert(".".into(), json!({}));
        }
    }
    Value::Object(root)
}

/// What a request's or object's `metadata.managedFields` says.
enum Requested {
    /// Absent, empty or undecodable: use the live object's.
    Unset,
    /// `[{}]`: clear ownership.
    Reset,
    Entries(Vec<Managed>),
}

fn requested(obj: &Value) -> Requested {
    let Some(Value::Array(list)) = object::meta(obj).and_then(|m| m.get("managedFields")) else {
        return Requested::Unset;
    };
    if list.is_empty() {
        return Requested::Unset;
    }
    if list
        .iter()
        .all(|e| e.as_object().is_some_and(Map::is_empty))
    {
        return Requested::Reset;
    }
    match list.iter().map(decode_entry).collect::<Option<Vec<_>>>() {
        Some(entries) => Requested::Entries(entries),
        None => Requested::Unset,
    }
}

/// The managers recorded on a stored object (none when they do not decode).
fn live_managers(obj: &Value) -> Vec<Managed> {
    match requested(obj) {
        Requested::Entries(e) => e,
        _ => Vec::new(),
    }
}

fn decode_entry(v: &Value) -> Option<Managed> {
    let m = v.as_object()?;
    let s = |k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    let operation = match m.get("operation").and_then(Value::as_str)? {
        "Apply" => Operation::Apply,
        "Update" => Operation::Update,
        _ => return None,
    };
    let fields = match m.get("fieldsV1") {
        None | Some(Value::Null) => FieldSet::new(),
        Some(f) => {
            if s("fieldsType").as_deref() != Some("FieldsV1") {
                return None;
            }
            decode_fields(f)?
        }
    };
    Some(Managed {
        manager: s("manager").unwrap_or_default(),
        operation,
        api_version: s("apiVersion").unwrap_or_default(),
        time: s("time"),
        subresource: s("subresource").unwrap_or_default(),
        fields,
    })
}

/// The managedFields list, in kube-apiserver's order: Apply before
/// Update, then oldest first, then by manager, apiVersion, subresource.
fn encode_managed(mut managers: Vec<Managed>) -> Value {
    managers.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Value::Array(
        managers
            .into_iter()
            .map(|m| {
                let mut e = Map::new();
                e.insert("manager".into(), json!(m.manager));
                e.insert("operation".into(), json!(m.operation.as_str()));
                e.insert("apiVersion".into(), json!(m.api_version));
                if let Some(t) = m.time {
                    e.insert("time".into(), json!(t));
                }
                e.insert("fieldsType".into(), json!("FieldsV1"));
                e.insert("fieldsV1".into(), encode_fields(&m.fields));
                if !m.subresource.is_empty() {
                    e.insert("subresource".into(), json!(m.subresource));
                }
                Value::Object(e)
            })
            .collect(),
    )
}

fn set_managed(obj: &mut Value, managers: Vec<Managed>) {
    if let Some(m) = object::meta_mut(obj) {
        if managers.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), encode_managed(managers));
        }
    }
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

// ---------------------------------------------------------------------------
// Apply

/// What an apply decided.
pub struct Applied {
    /// The object to store, with managedFields set.
    pub object: Value,
}

/// Applies `applied` (already checked to be an object of `res` with the
/// right name) for `manager` over `live` (`None` when the object does not
/// exist yet, in which case `skeleton` — apiVersion, kind, name, namespace —
/// is the starting point).
pub fn apply(
    res: &Resource,
    sub: Option<&str>,
    live: Option<&Value>,
    skeleton: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
) -> Result<Applied, ApiError> {
    apply_at(
        res,
        sub,
        live,
        skeleton,
        applied,
        manager,
        force,
        &object::now_rfc3339(),
    )
}

#[allow(clippy::too_many_arguments)]
fn apply_at(
    res: &Resource,
    sub: Option<&str>,
    live: Option<&Value>,
    skeleton: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
    now: &str,
) -> Result<Applied, ApiError> {
    let shape = Shape::for_resource(res);
    let sub_name = sub.unwrap_or("");
    let mut managers = live.map(live_managers).unwrap_or_default();
    let mut base = live.cloned().unwrap_or_else(|| skeleton.clone());
    if let Some(m) = object::meta_mut(&mut base) {
        m.remove("managedFields");
    }
    let applied = &reset_fields(applied, res, sub);
    let applied_set = owned(flatten(applied, shape));

    let mut merged = merge(Some(&base), applied, shape, "")?;

    let mine = managers
        .iter()
        .position(|m| m.same_owner(manager, Operation::Apply, "", sub_name));
    let (last_set, old_time) = match mine {
        Some(i) => {
            let m = managers.remove(i);
            (m.fields, m.time)
        }
        None => (FieldSet::new(), None),
    };

    // Fields this manager applied before and no longer applies go, unless
    // someone (this manager included, through the new configuration) still
    // owns them.
    let owned: FieldSet = managers
        .iter()
        .flat_map(|m| m.fields.iter().cloned())
        .chain(applied_set.iter().cloned())
        .collect();
    let stale: Vec<&Path> = last_set.iter().filter(|p| !owned.contains(*p)).collect();
    remove_paths(&mut merged, &stale, &owned);

    let cmp = compare(&flatten(&base, shape), &flatten(&merged, shape));
    let mut conflicts: Vec<(String, Path)> = Vec::new();
    for m in &managers {
        for p in m.fields.intersection(&cmp.changed) {
            conflicts.push((m.describe(), p.clone()));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    for m in &mut managers {
        m.fields
            .retain(|p| !cmp.changed.contains(p) && !cmp.removed.contains(p));
    }
    let object_changed = merged != base;
    managers.push(Managed {
        manager: manager.to_string(),
        operation: Operation::Apply,
        api_version: res.api_version(),
        time: if object_changed || old_time.is_none() {
            Some(now.to_string())
        } else {
            old_time
        },
        subresource: sub_name.to_string(),
        fields: applied_set,
    });
    managers.retain(|m| !m.fields.is_empty());
    set_managed(&mut merged, managers);
    Ok(Applied { object: merged })
}

/// The 409 kube-apiserver answers an apply that would change fields other
/// managers own.
fn conflict_error(mut conflicts: Vec<(String, Path)>) -> ApiError {
    conflicts.sort();
    let n = conflicts.len();
    let message = if n == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0,
            display_path(&conflicts[0].1)
        )
    } else {
        let mut lines = Vec::new();
        let mut last: Option<&str> = None;
        for (who, path) in &conflicts {
            if last != Some(who.as_str()) {
                lines.push(format!("conflicts with {who}:"));
                last = Some(who);
            }
            lines.push(format!("- {}", display_path(path)));
        }
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let mut e = ApiError::new(409, "Conflict", message);
    e.causes = conflicts
        .iter()
        .map(|(who, path)| {
            Cause::new(
                "FieldManagerConflict",
                display_path(path),
                format!("conflict with {who}"),
            )
        })
        .collect();
    e
}

/// A path as conflicts print it: `.spec.containers[name="c"].image`.
pub fn display_path(path: &Path) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(k) {
                Ok(m) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                Err(_) => vec![k.to_string()],
            };
            s.push_str(&format!("[{}]", fields.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = el.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        }
    }
    s
}

/// Merges an applied configuration into a live value: maps entry by entry
/// (a `null` removes), associative lists element by element, sets as
/// unions, anything else replaced.
fn merge(
    live: Option<&Value>,
    applied: &Value,
    shape: Shape<'_>,
    at: &str,
) -> Result<Value, ApiError> {
    match applied {
        Value::Object(am) if !shape.is_atomic_map() => {
            let mut out = match live {
                Some(Value::Object(lm)) => lm.clone(),
                _ => Map::new(),
            };
            for (k, av) in am {
                if av.is_null() {
                    out.shift_remove(k);
                    continue;
                }
                let child = merge(out.get(k), av, shape.field(k), &format!("{at}.{k}"))?;
                out.insert(k.clone(), child);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => match shape.list_kind() {
            ListKind::Atomic => Ok(applied.clone()),
            ListKind::Set => {
                let mut out = match live {
                    Some(Value::Array(l)) => l.clone(),
                    _ => Vec::new(),
                };
                let mut seen: std::collections::HashSet<String> =
                    out.iter().map(Value::to_string).collect();
                for item in items {
                    if seen.insert(item.to_string()) {
                        out.push(item.clone());
                    }
                }
                Ok(Value::Array(out))
            }
            ListKind::Map(keys) => {
                let keys: Vec<&str> = keys.iter().collect();
                let item_shape = shape.items();
                let mut out = match live {
                    Some(Value::Array(l)) => l.clone(),
                    _ => Vec::new(),
                };
                let mut index: HashMap<String, usize> = HashMap::new();
                for (i, item) in out.iter().enumerate() {
                    index.entry(element(item, &keys, usize::MAX)).or_insert(i);
                }
                let mut applied_keys = std::collections::HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let el = element(item, &keys, i);
                    if !item.is_object() || el.starts_with("i:") {
                        return Err(ApiError::bad_request(format!(
                            "{at}: element {i} must be an object with key fields {keys:?}"
                        )));
                    }
                    if !applied_keys.insert(el.clone()) {
                        return Err(ApiError::bad_request(format!(
                            "{at}: duplicate entries for key {}",
                            display_path(&vec![el])
                        )));
                    }
                    match index.get(&el) {
                        Some(&j) => {
                            let m = merge(Some(&out[j]), item, item_shape, &format!("{at}[{i}]"))?;
                            out[j] = m;
                        }
                        None => {
                            index.insert(el, out.len());
                            out.push(merge(None, item, item_shape, &format!("{at}[{i}]"))?);
                        }
                    }
                }
                Ok(Value::Array(out))
            }
        },
        other => Ok(other.clone()),
    }
}

/// Removes the values at `paths` (sorted) from `obj`, then any map the
/// removal left empty that nobody owns. A field whose own entry is stale
/// but below which something is still owned stays (kubectl's migration
/// from client-side apply gives the applier `".": {}` on maps such as
/// labels whose entries it keeps applying); a stale list element goes
/// whole, as in kube-apiserver.
fn remove_paths(obj: &mut Value, paths: &[&Path], owned: &FieldSet) {
    let mut last_removed: Option<&Path> = None;
    for path in paths {
        if last_removed.is_some_and(|r| path.starts_with(r)) {
            continue;
        }
        let is_field = path.last().is_some_and(|e| e.starts_with("f:"));
        if is_field && has_owned_below(owned, path) {
            continue;
        }
        if remove_at(obj, path) {
            last_removed = Some(path);
            // Drop emptied parents reached through map fields.
            let mut n = path.len() - 1;
            while n >= 2 {
                let parent = &path[..n];
                let empty =
                    get_at(obj, parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty));
                if !empty || owned.contains(&parent.to_vec()) || !parent[n - 1].starts_with("f:") {
                    break;
                }
                remove_at(obj, parent);
                n -= 1;
            }
        }
    }
}

/// Whether `owned` has a path that extends `path`: those sort right after
/// it.
fn has_owned_below(owned: &FieldSet, path: &Path) -> bool {
    use std::ops::Bound::{Excluded, Unbounded};
    owned
        .range::<Path, _>((Excluded(path), Unbounded))
        .next()
        .is_some_and(|next| next.starts_with(path))
}

fn matches_element(item: &Value, el: &str) -> bool {
    if let Some(k) = el.strip_prefix("k:") {
        match serde_json::from_str::<Map<String, Value>>(k) {
            Ok(key) => key.iter().all(|(f, v)| item.get(f) == Some(v)),
            Err(_) => false,
        }
    } else if let Some(v) = el.strip_prefix("v:") {
        serde_json::from_str::<Value>(v).is_ok_and(|v| *item == v)
    } else {
        false
    }
}

fn child_mut<'v>(v: &'v mut Value, el: &str) -> Option<&'v mut Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return v.as_object_mut()?.get_mut(f);
    }
    if let Some(i) = el.strip_prefix("i:") {
        return v.as_array_mut()?.get_mut(i.parse::<usize>().ok()?);
    }
    v.as_array_mut()?
        .iter_mut()
        .find(|item| matches_element(item, el))
}

fn get_at<'v>(obj: &'v Value, path: &[String]) -> Option<&'v Value> {
    let mut cur = obj;
    for el in path {
        cur = if let Some(f) = el.strip_prefix("f:") {
            cur.as_object()?.get(f)?
        } else if let Some(i) = el.strip_prefix("i:") {
            cur.as_array()?.get(i.parse::<usize>().ok()?)?
        } else {
            cur.as_array()?
                .iter()
                .find(|item| matches_element(item, el))?
        };
    }
    Some(cur)
}

/// Removes the value at `path`; whether there was one.
fn remove_at(obj: &mut Value, path: &[String]) -> bool {
    let Some((last, parent_path)) = path.split_last() else {
        return false;
    };
    let mut parent = obj;
    for el in parent_path {
        match child_mut(parent, el) {
            Some(c) => parent = c,
            None => return false,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        return parent
            .as_object_mut()
            .is_some_and(|m| m.shift_remove(f).is_some());
    }
    if last.starts_with("i:") {
        // Positions shift as elements go; elements without keys are left
        // to their other owners.
        return false;
    }
    match parent.as_array_mut() {
        Some(items) => {
            let before = items.len();
            items.retain(|item| !matches_element(item, last));
            items.len() != before
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2025-01-01T00:00:00Z";
    const T1: &str = "2025-01-01T00:01:00Z";

    fn res(group: &str, kind: &str) -> Resource {
        crate::strategy::resources()
            .into_iter()
            .find(|r| r.group == group && r.kind == kind)
            .expect("a served kind")
    }

    fn set(paths: &[&[&str]]) -> FieldSet {
        paths
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect()
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default", "labels": {"app": "d"}},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "d"}},
                "template": {
                    "metadata": {"labels": {"app": "d"}},
                    "spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
                },
            },
        })
    }

    fn skeleton() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}})
    }

    fn managers(obj: &Value) -> Vec<Managed> {
        live_managers(obj)
    }

    #[test]
    fn fields_v1_round_trip_and_encoding() {
        let d = deployment(1, "nginx");
        let fields: FieldSet = owned(flatten(&d, Shape::for_resource(&res("apps", "Deployment"))));
        let enc = encode_fields(&fields);
        assert_eq!(
            enc,
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {
                            ".": {}, "f:image": {}, "f:name": {},
                            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                                ".": {}, "f:containerPort": {}, "f:protocol": {},
                            }},
                        }}},
                    },
                },
            })
        );
        assert_eq!(decode_fields(&enc).unwrap(), fields);
        // "." must come first, as kube-apiserver writes it.
        let text = enc.to_string();
        assert!(text.contains(r#"{".":{},"f:image""#), "{text}");
        assert!(decode_fields(&json!({"x:bad": {}})).is_none());
        assert!(decode_fields(&json!({"f:a": 1})).is_none());
    }

    #[test]
    fn finalizers_are_set_items_and_display_paths() {
        let cm = json!({"metadata": {"name": "c", "finalizers": ["a/b"]}, "data": {"k": "v"}});
        let fields: FieldSet = owned(flatten(&cm, Shape::for_resource(&res("", "ConfigMap"))));
        assert_eq!(
            fields,
            set(&[
                &["f:data", "f:k"],
                &["f:metadata", "f:finalizers", "v:\"a/b\""]
            ])
        );
        assert_eq!(
            display_path(&vec![
                "f:metadata".into(),
                "f:finalizers".into(),
                "v:\"a/b\"".into()
            ]),
            ".metadata.finalizers[=\"a/b\"]"
        );
        assert_eq!(
            display_path(&vec![
                "f:spec".into(),
                "k:{\"containerPort\":80,\"protocol\":\"TCP\"}".into(),
                "f:x".into()
            ]),
            ".spec[containerPort=80,protocol=\"TCP\"].x"
        );
    }

    #[test]
    fn updates_take_changed_fields_and_drop_removed_ones() {
        let r = res("apps", "Deployment");
        let mut created = deployment(1, "nginx");
        record_update_at(&r, None, None, &mut created, "creator", T0);
        let m = managers(&created);
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].manager.as_str(), m[0].operation, m[0].time.as_deref()),
            ("creator", Operation::Update, Some(T0))
        );
        assert_eq!(m[0].api_version, "apps/v1");

        // Another manager changes the image and removes the label.
        let mut edited = created.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("nginx:2");
        edited["metadata"].as_object_mut().unwrap().remove("labels");
        record_update_at(&r, None, Some(&created), &mut edited, "editor", T1);
        let m = managers(&edited);
        assert_eq!(m.len(), 2);
        let image: Path = [
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            "k:{\"name\":\"c\"}",
            "f:image",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let label: Path = ["f:metadata", "f:labels", "f:app"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let creator = m.iter().find(|x| x.manager == "creator").unwrap();
        let editor = m.iter().find(|x| x.manager == "editor").unwrap();
        assert!(!creator.fields.contains(&image) && !creator.fields.contains(&label));
        assert_eq!(editor.fields, [image].into_iter().collect());
        assert_eq!(
            creator.time.as_deref(),
            Some(T0),
            "untouched managers keep their time"
        );

        // A no-op write keeps managedFields exactly.
        let mut same = edited.clone();
        record_update_at(
            &r,
            None,
            Some(&edited),
            &mut same,
            "third",
            "2030-01-01T00:00:00Z",
        );
        assert_eq!(same, edited);

        // `[{}]` resets; an empty list keeps the live entries.
        let mut reset = edited.clone();
        reset["metadata"]["managedFields"] = json!([{}]);
        record_update_at(&r, None, Some(&edited), &mut reset, "x", T1);
        assert!(reset["metadata"].get("managedFields").is_none());
        let mut keep = edited.clone();
        keep["metadata"]["managedFields"] = json!([]);
        record_update_at(&r, None, Some(&edited), &mut keep, "x", T1);
        assert_eq!(keep, edited);
    }

    #[test]
    fn apply_owns_removes_and_conflicts() {
        let r = res("apps", "Deployment");
        let first = apply_at(
            &r,
            None,
            None,
            &skeleton(),
            &deployment(1, "nginx"),
            "a",
            false,
            T0,
        )
        .unwrap()
        .object;
        let m = managers(&first);
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].operation, m[0].manager.as_str()),
            (Operation::Apply, "a")
        );

        // Re-applying without the label removes it.
        let mut less = deployment(1, "nginx");
        less["metadata"].as_object_mut().unwrap().remove("labels");
        let second = apply_at(&r, None, Some(&first), &skeleton(), &less, "a", false, T1)
            .unwrap()
            .object;
        assert!(second["metadata"].get("labels").is_none(), "{second}");

        // Another manager applying a different replicas value conflicts.
        let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 3}});
        let e = apply_at(&r, None, Some(&second), &skeleton(), &other, "b", false, T1)
            .err()
            .unwrap();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"a\": .spec.replicas"
        );
        assert_eq!(e.causes[0].reason, "FieldManagerConflict");
        assert_eq!(e.causes[0].field, ".spec.replicas");
        assert_eq!(e.causes[0].message, "conflict with \"a\"");

        // The same value is shared, not a conflict.
        let same = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 1}});
        let shared = apply_at(&r, None, Some(&second), &skeleton(), &same, "b", false, T1)
            .unwrap()
            .object;
        assert_eq!(managers(&shared).len(), 2);

        // Force takes it over; the first manager then drops it without
        // removing the field.
        let forced = apply_at(&r, None, Some(&second), &skeleton(), &other, "b", true, T1)
            .unwrap()
            .object;
        assert_eq!(forced["spec"]["replicas"], 3);
        let a = managers(&forced)
            .into_iter()
            .find(|m| m.manager == "a")
            .unwrap();
        assert!(
            !a.fields
                .iter()
                .any(|p| p.ends_with(&["f:replicas".to_string()]))
        );
        let mut without = deployment(1, "nginx");
        without["spec"].as_object_mut().unwrap().remove("replicas");
        let after = apply_at(
            &r,
            None,
            Some(&forced),
            &skeleton(),
            &without,
            "a",
            false,
            T1,
        )
        .unwrap()
        .object;
        assert_eq!(after["spec"]["replicas"], 3, "b still owns replicas");
    }

    #[test]
    fn update_managers_conflict_with_their_api_version() {
        let r = res("apps", "Deployment");
        let mut created = deployment(1, "nginx");
        record_update_at(
            &r,
            None,
            None,
            &mut created,
            "kubectl-client-side-apply",
            T0,
        );
        let other = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let e = apply_at(
            &r,
            None,
            Some(&created),
            &skeleton(),
            &other,
            "b",
            false,
            T1,
        )
        .err()
        .unwrap();
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"kubectl-client-side-apply\" using apps/v1:\n- .spec.replicas\n- .spec.template.spec.containers[name=\"c\"].image"
        );
        assert_eq!(e.causes.len(), 2);
    }

    #[test]
    fn apply_drops_containers_it_no_longer_applies() {
        let r = res("apps", "Deployment");
        let mut two = deployment(1, "nginx");
        two["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "side", "image": "busybox"}));
        let first = apply_at(&r, None, None, &skeleton(), &two, "a", false, T0)
            .unwrap()
            .object;
        let second = apply_at(
            &r,
            None,
            Some(&first),
            &skeleton(),
            &deployment(1, "nginx"),
            "a",
            false,
            T1,
        )
        .unwrap()
        .object;
        let names: Vec<&str> = second["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["c"]);
    }

    #[test]
    fn maps_owned_whole_stay_while_their_entries_are_applied() {
        // kubectl's client-side → server-side migration hands the applier
        // the client-side set, `".": {}` on labels included; the next
        // apply no longer names the map itself but still its entries.
        let r = res("apps", "Deployment");
        let mut live = apply_at(
            &r,
            None,
            None,
            &skeleton(),
            &deployment(1, "nginx"),
            "kubectl",
            false,
            T0,
        )
        .unwrap()
        .object;
        let mut fields = managers(&live)[0].fields.clone();
        fields.insert(vec!["f:metadata".into(), "f:labels".into()]);
        fields.insert(vec![
            "f:spec".into(),
            "f:template".into(),
            "f:metadata".into(),
            "f:labels".into(),
        ]);
        set_managed(
            &mut live,
            vec![Managed {
                manager: "kubectl".into(),
                operation: Operation::Apply,
                api_version: "apps/v1".into(),
                time: Some(T0.into()),
                subresource: String::new(),
                fields,
            }],
        );
        let again = apply_at(
            &r,
            None,
            Some(&live),
            &skeleton(),
            &deployment(1, "nginx"),
            "kubectl",
            false,
            T1,
        )
        .unwrap()
        .object;
        assert_eq!(again["metadata"]["labels"], json!({"app": "d"}));
        assert_eq!(
            again["spec"]["template"]["metadata"]["labels"],
            json!({"app": "d"})
        );
    }

    #[test]
    fn status_is_not_owned_through_the_main_resource() {
        let r = res("apps", "Deployment");
        let mut d = deployment(1, "nginx");
        d["status"] = json!({"replicas": 5});
        let out = apply_at(&r, None, None, &skeleton(), &d, "a", false, T0)
            .unwrap()
            .object;
        let m = managers(&out);
        assert!(!m[0].fields.iter().any(|p| p[0] == "f:status"));
    }

    #[test]
    fn bad_applied_lists_are_rejected() {
        let r = res("apps", "Deployment");
        let mut dup = deployment(1, "nginx");
        dup["spec"]["template"]["spec"]["containers"] = json!([{"name": "c"}, {"name": "c"}]);
        assert_eq!(
            apply_at(&r, None, None, &skeleton(), &dup, "a", false, T0)
                .err()
                .unwrap()
                .code,
            400
        );
        let mut keyless = deployment(1, "nginx");
        keyless["spec"]["template"]["spec"]["containers"] = json!([{"image": "x"}]);
        assert_eq!(
            apply_at(&r, None, None, &skeleton(), &keyless, "a", false, T0)
                .err()
                .unwrap()
                .code,
            400
        );
    }

    #[test]
    fn manager_names_from_user_agent() {
        let q = Query::parse(None);
        let mut h = HeaderMap::new();
        h.insert(
            http::header::USER_AGENT,
            "kubectl/v1.32.4 (linux/amd64) kubernetes/abc"
                .parse()
                .unwrap(),
        );
        assert_eq!(manager_for(&q, &h).unwrap(), "kubectl");
        let q = Query::parse(Some("fieldManager=mine"));
        assert_eq!(manager_for(&q, &h).unwrap(), "mine");
        let long = format!("fieldManager={}", "x".repeat(200));
        assert_eq!(
            manager_for(&Query::parse(Some(&long)), &h)
                .unwrap_err()
                .code,
            400
        );
        h.insert(http::header::USER_AGENT, "y".repeat(300).parse().unwrap());
        assert_eq!(manager_for(&Query::parse(None), &h).unwrap().len(), 128);
    }
}
