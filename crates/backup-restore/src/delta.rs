//! Delta snapshot contents in upstream's format
//! (`br:pkg/snapshot/snapshotter`): the JSON array of events a watch
//! delivered, each `{"etcdEvent": <mvccpb.Event as Go's encoding/json
//! writes it>, "time": <RFC 3339>}`, followed by the SHA-256 of that JSON
//! (32 raw bytes), which a restore checks before applying anything.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use etcdv3::proto;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Why a delta cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    #[error("delta snapshot is shorter than its hash")]
    Truncated,
    #[error("delta snapshot hash mismatch")]
    HashMismatch,
    #[error("delta snapshot JSON: {0}")]
    Json(String),
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}

/// `[]byte` fields: base64 in Go's JSON, left out when empty.
mod b64 {
    use super::*;
    pub fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        match s {
            None => Ok(Vec::new()),
            Some(s) => STANDARD.decode(s).map_err(serde::de::Error::custom),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct JsonKv {
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    key: Vec<u8>,
    #[serde(default, skip_serializing_if = "is_zero")]
    create_revision: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    mod_revision: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    version: i64,
    #[serde(default, with = "b64", skip_serializing_if = "Vec::is_empty")]
    value: Vec<u8>,
    #[serde(default, skip_serializing_if = "is_zero")]
    lease: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct JsonEtcdEvent {
    #[serde(rename = "type", default, skip_serializing_if = "is_zero_i32")]
    type_: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kv: Option<JsonKv>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prev_kv: Option<JsonKv>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct JsonEvent {
    #[serde(rename = "etcdEvent")]
    etcd_event: JsonEtcdEvent,
    #[serde(default)]
    time: String,
}

fn to_json_kv(kv: &proto::KeyValue) -> JsonKv {
    JsonKv {
        key: kv.key.clone(),
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value.clone(),
        lease: kv.lease,
    }
}

fn from_json_kv(kv: JsonKv) -> proto::KeyValue {
    proto::KeyValue {
        key: kv.key,
        create_revision: kv.create_revision,
        mod_revision: kv.mod_revision,
        version: kv.version,
        value: kv.value,
        lease: kv.lease,
    }
}

/// The object bytes of `events` observed at `time` (RFC 3339).
pub fn encode(events: &[proto::Event], time: &str) -> Vec<u8> {
    let list: Vec<JsonEvent> = events
        .iter()
        .map(|e| JsonEvent {
            etcd_event: JsonEtcdEvent {
                type_: e.r#type,
                kv: e.kv.as_ref().map(to_json_kv),
                prev_kv: e.prev_kv.as_ref().map(to_json_kv),
            },
            time: time.to_string(),
        })
        .collect();
    let mut out = serde_json::to_vec(&list).unwrap_or_else(|_| b"[]".to_vec());
    let hash = Sha256::digest(&out);
    out.extend_from_slice(&hash);
    out
}

/// The events of a delta object, after checking its hash.
pub fn decode(data: &[u8]) -> Result<Vec<proto::Event>, DeltaError> {
    if data.len() < 32 {
        return Err(DeltaError::Truncated);
    }
    let (json, hash) = data.split_at(data.len() - 32);
    if Sha256::digest(json).as_slice() != hash {
        return Err(DeltaError::HashMismatch);
    }
    let list: Vec<JsonEvent> =
        serde_json::from_slice(json).map_err(|e| DeltaError::Json(e.to_string()))?;
    Ok(list
        .into_iter()
        .map(|e| proto::Event {
            r#type: e.etcd_event.type_,
            kv: e.etcd_event.kv.map(from_json_kv),
            prev_kv: e.etcd_event.prev_kv.map(from_json_kv),
        })
        .collect())
}

/// The revision an event happened at.
pub fn revision(e: &proto::Event) -> i64 {
    e.kv.as_ref().map_or(0, |kv| kv.mod_revision)
}

/// Events grouped by revision, in order: one etcd transaction each, so a
/// replay advances the revision exactly as the original writes did.
/// Events at or below `applied` (already in the restored database) are
/// left out.
pub fn by_revision(events: &[proto::Event], applied: i64) -> Vec<(i64, Vec<proto::Event>)> {
    let mut out: Vec<(i64, Vec<proto::Event>)> = Vec::new();
    for e in events {
        let rev = revision(e);
        if rev <= applied {
            continue;
        }
        match out.last_mut() {
            Some((r, group)) if *r == rev => group.push(e.clone()),
            _ => out.push((rev, vec![e.clone()])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, rev: i64) -> proto::Event {
        proto::Event {
            r#type: proto::EventType::Put as i32,
            kv: Some(proto::KeyValue {
                key: key.into(),
                value: value.into(),
                create_revision: rev,
                mod_revision: rev,
                version: 1,
                lease: 0,
            }),
            prev_kv: None,
        }
    }

    fn delete(key: &str, rev: i64) -> proto::Event {
        proto::Event {
            r#type: proto::EventType::Delete as i32,
            kv: Some(proto::KeyValue {
                key: key.into(),
                mod_revision: rev,
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    #[test]
    fn events_round_trip_in_gos_json_shape_with_a_hash() {
        let events = vec![put("/a", "1", 5), delete("/a", 6)];
        let data = encode(&events, "2024-01-01T00:00:00Z");
        let json = std::str::from_utf8(&data[..data.len() - 32]).unwrap();
        // Go's encoding/json of clientv3.Event: omitempty fields left out,
        // bytes as base64, a put has no "type".
        assert_eq!(
            json,
            r#"[{"etcdEvent":{"kv":{"key":"L2E=","create_revision":5,"mod_revision":5,"version":1,"value":"MQ=="}},"time":"2024-01-01T00:00:00Z"},{"etcdEvent":{"type":1,"kv":{"key":"L2E=","mod_revision":6}},"time":"2024-01-01T00:00:00Z"}]"#
        );
        assert_eq!(decode(&data).unwrap(), events);
    }

    #[test]
    fn damaged_deltas_are_refused() {
        let mut data = encode(&[put("/a", "1", 5)], "t");
        assert_eq!(decode(&data[..10]), Err(DeltaError::Truncated));
        data[3] ^= 1;
        assert_eq!(decode(&data), Err(DeltaError::HashMismatch));
        let mut bad = b"{not json".to_vec();
        bad.extend_from_slice(&Sha256::digest(b"{not json"));
        assert!(matches!(decode(&bad), Err(DeltaError::Json(_))));
    }

    #[test]
    fn replays_group_by_revision_and_skip_what_is_applied() {
        let events = vec![put("/a", "1", 5), put("/b", "1", 6), put("/c", "1", 6)];
        let groups = by_revision(&events, 5);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].0, 6);
        assert_eq!(groups[0].1.len(), 2);
        assert_eq!(by_revision(&events, 0).len(), 2);
    }
}
