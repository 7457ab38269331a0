//! Machine-template hashes: a machine set is named `<deployment>-<hash>` where
//! the hash is FNV-32a over the template (and the collision count), written
//! with the consonant-and-digit alphabet Kubernetes uses so names never spell
//! words.

/// FNV-1a, 32 bit.
pub fn fnv32a(data: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in data {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Maps each character of `s` into `bcdfghjklmnpqrstvwxz2456789`, as
/// Kubernetes' SafeEncodeString does.
pub fn safe_encode(s: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes()
        .map(|b| ALPHABET[(b as usize) % ALPHABET.len()] as char)
        .collect()
}

/// The template hash (decimal, for the `machine-template-hash` label) of a
/// template's canonical JSON with its own hash label removed, salted with
/// the collision count.
pub fn template_hash(template: &serde_json::Value, collision_count: Option<i32>) -> u32 {
    let mut t = template.clone();
    if let Some(labels) = t
        .pointer_mut("/metadata/labels")
        .and_then(serde_json::Value::as_object_mut)
    {
        labels.remove("machine-template-hash");
    }
    let mut bytes = serde_json::to_vec(&canonical(&t)).unwrap_or_default();
    if let Some(c) = collision_count {
        bytes.extend_from_slice(&c.to_le_bytes());
    }
    fnv32a(&bytes)
}

/// Keys sorted at every level, so equal templates hash equally whatever
/// order their fields arrived in.
fn canonical(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            serde_json::Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        serde_json::Value::Array(a) => serde_json::Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// `<deployment>-<first 5 characters of the encoded hash>`.
pub fn machine_set_name(deployment: &str, hash: u32) -> String {
    let enc = safe_encode(&hash.to_string());
    format!("{deployment}-{}", &enc[..enc.len().min(5)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fnv_reference_values() {
        assert_eq!(fnv32a(b""), 0x811c9dc5);
        assert_eq!(fnv32a(b"a"), 0xe40c292c);
        assert_eq!(fnv32a(b"foobar"), 0xbf9cf968);
    }

    #[test]
    fn hash_ignores_field_order_and_own_label() {
        let a = json!({"metadata": {"labels": {"app": "x", "machine-template-hash": "1"}}, "spec": {"class": {"name": "c", "kind": "MachineClass"}}});
        let b = json!({"spec": {"class": {"kind": "MachineClass", "name": "c"}}, "metadata": {"labels": {"app": "x"}}});
        assert_eq!(template_hash(&a, None), template_hash(&b, None));
        assert_ne!(
            template_hash(&a, None),
            template_hash(&a, Some(1)),
            "collisions change the hash"
        );
        let c = json!({"spec": {"class": {"kind": "MachineClass", "name": "other"}}, "metadata": {"labels": {"app": "x"}}});
        assert_ne!(template_hash(&a, None), template_hash(&c, None));
    }

    #[test]
    fn names_use_the_safe_alphabet() {
        let n = machine_set_name("web", 123456789);
        assert!(n.starts_with("web-"));
        assert_eq!(n.len(), "web-".len() + 5);
        assert!(
            n[4..]
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
        );
    }
}
