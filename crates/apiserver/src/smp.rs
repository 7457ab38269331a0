//! Strategic merge patch for built-in kinds (being completed with the
//! kubectl compatibility work). For now: a JSON merge patch that honours the
//! `$patch: delete|replace` directive on maps, drops the other `$` directives,
//! and merges the best-known keyed lists by their merge key.

use apimachinery::ApiError;
use serde_json::Value;

/// Lists merged element-wise by a key, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "volumeDevices" => "name",
        "volumeMounts" => "mountPath",
        "ports" => "containerPort",
        "conditions" => "type",
        "ownerReferences" => "uid",
        "addresses" => "type",
        _ => return None,
    })
}

/// Applies a strategic merge patch to `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    merge(target, patch, "");
    Ok(())
}

fn merge(target: &mut Value, patch: &Value, field: &str) {
    match (target, patch) {
        (t @ Value::Object(_), Value::Object(p)) => {
            if p.get("$patch").and_then(Value::as_str) == Some("replace") {
                let mut p = p.clone();
                p.remove("$patch");
                *t = Value::Object(p);
                return;
            }
            let tm = t.as_object_mut().expect("matched an object");
            for (k, v) in p {
                if k.starts_with('$') {
                    continue;
                }
                if v.is_null() {
                    tm.shift_remove(k);
                    continue;
                }
                match tm.get_mut(k) {
                    Some(existing) => merge(existing, v, k),
                    None => {
                        let mut fresh = Value::Null;
                        merge(&mut fresh, v, k);
                        tm.insert(k.clone(), fresh);
                    }
                }
            }
        }
        (t @ Value::Array(_), Value::Array(p)) if merge_key(field).is_some() => {
            let key = merge_key(field).expect("checked");
            let items = t.as_array_mut().expect("matched an array");
            for pi in p {
                let id = pi.get(key).cloned();
                let pos = id
                    .as_ref()
                    .and_then(|id| items.iter().position(|x| x.get(key) == Some(id)));
                let delete = pi.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        items.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => merge(&mut items[i], pi, ""),
                    (None, false) => {
                        let mut fresh = Value::Null;
                        merge(&mut fresh, pi, "");
                        items.push(fresh);
                    }
                }
            }
        }
        (t, p) => {
            *t = strip(p);
        }
    }
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}
