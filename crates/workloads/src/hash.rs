//! Template hashes that name ReplicaSets (`<deployment>-<hash>`, the
//! `pod-template-hash` label) and ControllerRevisions (`<set>-<hash>`):
//! FNV-32a, salted with the collision count, written in decimal and
//! mapped onto the consonant-and-digit alphabet, as upstream's
//! `ComputeHash` and `HashControllerRevision` do. Upstream hashes Go's
//! printed struct; we hash the object's canonical JSON (keys sorted), so
//! values differ from a real cluster's but keep their shape and
//! stability: equal templates hash equally whatever order their fields
//! arrived in.

use serde_json::Value;

/// Keys sorted at every level.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The safe-encoded FNV-32a of `bytes` salted with `collision_count` the
/// way upstream salts it (the count as a little-endian 32-bit value in an
/// 8-byte buffer).
pub fn salted(bytes: &[u8], collision_count: Option<i32>) -> String {
    let mut data = bytes.to_vec();
    if let Some(c) = collision_count {
        let mut salt = [0u8; 8];
        salt[..4].copy_from_slice(&(c as u32).to_le_bytes());
        data.extend_from_slice(&salt);
    }
    mcm::hash::safe_encode(&mcm::hash::fnv32a(&data).to_string())
}

/// `controller.ComputeHash` of a pod template.
pub fn pod_template_hash(
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
    collision_count: Option<i32>,
) -> String {
    let v = serde_json::to_value(template).unwrap_or(Value::Null);
    let bytes = serde_json::to_vec(&canonical(&v)).unwrap_or_default();
    salted(&bytes, collision_count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use serde_json::json;

    fn template(v: Value) -> PodTemplateSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn equal_templates_hash_equally_and_collisions_salt() {
        let a = template(json!({"metadata": {"labels": {"app": "web", "tier": "x"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}));
        let b = template(
            json!({"spec": {"containers": [{"image": "nginx", "name": "c"}]},
            "metadata": {"labels": {"tier": "x", "app": "web"}}}),
        );
        assert_eq!(pod_template_hash(&a, None), pod_template_hash(&b, None));
        assert_ne!(pod_template_hash(&a, None), pod_template_hash(&a, Some(1)));
        let c = template(json!({"metadata": {"labels": {"app": "web", "tier": "x"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}));
        assert_ne!(pod_template_hash(&a, None), pod_template_hash(&c, None));
        let h = pod_template_hash(&a, None);
        assert!(!h.is_empty() && h.len() <= 10);
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }
}
