//! Pruning: dropping the fields a schema does not know, as kube-apiserver
//! does to custom resources before defaulting and validation.

use serde_json::Value;

use super::*;

/// Prunes `v` under `node`; `None` means no schema at all, under which every
/// field of an object is unknown.
pub(super) fn prune_value(
    node: Option<&Node>,
    v: &mut Value,
    path: &Path,
    resource_root: bool,
    out: &mut Vec<String>,
) {
    let Some(node) = node else {
        prune_everything(v, path, out);
        return;
    };
    match v {
        Value::Object(map) => map.retain(|k, child| {
            let cp = path.field(k);
            if resource_root || node.embedded {
                match k.as_str() {
                    "apiVersion" | "kind" => return true,
                    // The API server owns the metadata of the resource itself.
                    "metadata" if resource_root => return true,
                    "metadata" => {
                        prune_object_meta(child, &cp, out);
                        return true;
                    }
                    _ => {}
                }
            }
            if let Some(p) = node.property(k) {
                prune_value(Some(p), child, &cp, false, out);
                return true;
            }
            match &node.additional {
                Additional::Schema(a) => {
                    prune_value(Some(a), child, &path.key(k), false, out);
                    true
                }
                Additional::Any => true,
                Additional::Unspecified if node.preserve_unknown => true,
                Additional::Unspecified => {
                    out.push(cp.render_dotted());
                    false
                }
            }
        }),
        Value::Array(items) => {
            if node.items.is_none() && node.preserve_unknown {
                return;
            }
            for (i, item) in items.iter_mut().enumerate() {
                prune_value(node.items.as_deref(), item, &path.index(i), false, out);
            }
        }
        _ => {}
    }
}

fn prune_everything(v: &mut Value, path: &Path, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for k in map.keys() {
                out.push(path.field(k).render_dotted());
            }
            map.clear();
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                prune_everything(item, &path.index(i), out);
            }
        }
        _ => {}
    }
}

fn prune_object_meta(v: &mut Value, path: &Path, out: &mut Vec<String>) {
    if let Value::Object(map) = v {
        map.retain(|k, _| {
            let keep = OBJECT_META_FIELDS.contains(&k.as_str());
            if !keep {
                out.push(path.field(k).render_dotted());
            }
            keep
        });
    }
}
