//! The etcd configuration one member runs with (br's `/config`): druid's
//! ConfigMap lists every member's advertise URLs as maps member → URLs;
//! the sidecar picks its own entry, names the member after its pod and
//! sets `initial-cluster-state` from what initialization decided. Pure.

use serde_yaml::{Mapping, Value};

/// Why a configuration cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("etcd configuration is not YAML: {0}")]
    Parse(String),
    #[error("etcd configuration has no {field} for member {member:?}")]
    MissingMember { field: String, member: String },
}

/// `member`'s entry of a URL field (a map member → URLs, or one string for
/// every member), comma-joined.
pub(crate) fn urls_for(v: &Value, member: &str) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Mapping(m) => {
            let urls = m.get(Value::String(member.into()))?;
            match urls {
                Value::String(s) => Some(s.clone()),
                Value::Sequence(seq) => Some(
                    seq.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The configuration of member `pod` from druid's `etcd.conf.yaml`.
pub fn member_config(yaml: &str, pod: &str, state: &str) -> Result<String, ConfigError> {
    let mut cfg: Mapping =
        serde_yaml::from_str(yaml).map_err(|e| ConfigError::Parse(e.to_string()))?;
    for field in ["advertise-client-urls", "initial-advertise-peer-urls"] {
        if let Some(v) = cfg.get(field) {
            let urls = urls_for(v, pod).ok_or_else(|| ConfigError::MissingMember {
                field: field.into(),
                member: pod.into(),
            })?;
            cfg.insert(field.into(), Value::String(urls));
        }
    }
    cfg.insert("name".into(), Value::String(pod.into()));
    cfg.insert("initial-cluster-state".into(), Value::String(state.into()));
    serde_yaml::to_string(&cfg).map_err(|e| ConfigError::Parse(e.to_string()))
}

/// A string field of the configuration.
pub fn field(yaml: &str, name: &str) -> Option<String> {
    let cfg: Mapping = serde_yaml::from_str(yaml).ok()?;
    match cfg.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether the configuration has peer TLS (https peer URLs).
pub fn peer_tls(yaml: &str) -> bool {
    field(yaml, "listen-peer-urls").is_some_and(|u| u.starts_with("https://"))
}

/// How many members `initial-cluster` names.
pub fn member_count(yaml: &str) -> usize {
    field(yaml, "initial-cluster").map_or(1, |c| c.split(',').filter(|s| !s.is_empty()).count())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRUID: &str = "name: etcd-abc123\ndata-dir: /var/etcd/data/new.etcd\n\
initial-cluster: e-0=http://e-0.e-peer.ns.svc:2380,e-1=http://e-1.e-peer.ns.svc:2380\n\
initial-cluster-state: new\n\
advertise-client-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2379]\n  e-1: [http://e-1.e-peer.ns.svc:2379]\n\
initial-advertise-peer-urls:\n  e-0: [http://e-0.e-peer.ns.svc:2380]\n  e-1: [http://e-1.e-peer.ns.svc:2380]\n";

    #[test]
    fn a_member_gets_its_own_urls_and_name() {
        let out = member_config(DRUID, "e-1", "existing").unwrap();
        let m: Mapping = serde_yaml::from_str(&out).unwrap();
        assert_eq!(m["name"], Value::from("e-1"));
        assert_eq!(
            m["advertise-client-urls"],
            Value::from("http://e-1.e-peer.ns.svc:2379")
        );
        assert_eq!(
            m["initial-advertise-peer-urls"],
            Value::from("http://e-1.e-peer.ns.svc:2380")
        );
        assert_eq!(m["initial-cluster-state"], Value::from("existing"));
        assert_eq!(member_count(DRUID), 2);
        assert_eq!(
            field(DRUID, "data-dir").as_deref(),
            Some("/var/etcd/data/new.etcd")
        );
    }

    #[test]
    fn peer_tls_is_read_from_the_peer_listen_url() {
        assert!(!peer_tls("listen-peer-urls: http://0.0.0.0:2380\n"));
        assert!(peer_tls("listen-peer-urls: https://0.0.0.0:2380\n"));
        assert!(!peer_tls("name: x\n"));
    }

    #[test]
    fn an_unknown_member_or_bad_yaml_is_an_error() {
        assert_eq!(
            member_config(DRUID, "e-7", "new"),
            Err(ConfigError::MissingMember {
                field: "advertise-client-urls".into(),
                member: "e-7".into()
            })
        );
        assert!(matches!(
            member_config("[1, 2", "e-0", "new"),
            Err(ConfigError::Parse(_))
        ));
        // Plain strings (a hand-written config) pass through.
        let out = member_config("advertise-client-urls: http://x:2379\n", "p", "new").unwrap();
        assert!(
            out.contains("advertise-client-urls: http://x:2379"),
            "{out}"
        );
    }
}
