//! The local provider's `providerSpec`, parsed and checked as a pure
//! function: anything wrong is an `InvalidArgument` for the caller.
//!
//! ```yaml
//! providerSpec:
//!   bootDelay: 2s            # Go duration; time until the node is Ready (default 0)
//!   zone: zone-a             # providerID and topology label (default "default")
//!   tags:                    # VM tags; hot-updatable through UpdateMachine
//!     kubernetes.io/cluster/shoot--dev--a: "1"   # the VM's cluster (default: the provider's)
//!     kubernetes.io/role/node: "1"
//!   failCreate:              # fault: the first `times` creates of each machine fail
//!     code: ResourceExhausted
//!     times: 3
//!   callDelay: 500ms         # fault: every driver call of the class is this slow
//! ```
//!
//! The cluster tag follows the convention of Gardener's cloud providers
//! (`kubernetes.io/cluster/<name>` in the class's tags), so classes that a
//! worker actuator generates for different shoots keep their VMs apart.

use std::collections::BTreeMap;
use std::time::Duration;

use driver::Code;
use serde::Deserialize;
use serde_json::Value;

/// Prefix of the tag naming the cluster a VM belongs to.
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// Zone used in providerIDs when the spec names none.
pub const DEFAULT_ZONE: &str = "default";

/// The runtime fault "creation fails with a code N times".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailCreate {
    /// The code, by name (`ResourceExhausted` or `RESOURCE_EXHAUSTED`).
    pub code: Code,
    /// How many creates of each machine fail before one succeeds.
    pub times: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    boot_delay: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    fail_create: Option<FailCreate>,
    #[serde(default)]
    call_delay: Option<String>,
    // Tolerated so that a spec written as a typed object (as Gardener's
    // worker actuators do) decodes.
    #[serde(default, rename = "apiVersion")]
    _api_version: Option<String>,
    #[serde(default, rename = "kind")]
    _kind: Option<String>,
}

/// A checked provider spec.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderSpec {
    /// Time from creation until the node turns Ready.
    pub boot_delay: Duration,
    /// The zone, if given.
    pub zone: Option<String>,
    /// VM tags, including the cluster tag if any.
    pub tags: BTreeMap<String, String>,
    /// The creation fault, if armed.
    pub fail_create: Option<FailCreate>,
    /// Delay added to every driver call for this class.
    pub call_delay: Duration,
}

/// Whether `s` can be a label value (and a path segment of a providerID).
pub fn is_label_value(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

fn duration(field: &str, s: Option<&str>) -> Result<Duration, String> {
    match s {
        None => Ok(Duration::ZERO),
        Some(s) => api::parse_duration(s)
            .ok_or_else(|| format!("providerSpec.{field}: {s:?} is not a Go duration like \"2s\"")),
    }
}

impl ProviderSpec {
    /// Parses a class's `providerSpec`; `null` and `{}` give the defaults.
    pub fn parse(v: &Value) -> Result<ProviderSpec, String> {
        let raw: Raw = if v.is_null() {
            serde_json::from_value(Value::Object(Default::default()))
        } else {
            serde_json::from_value(v.clone())
        }
        .map_err(|e| format!("providerSpec: {e}"))?;
        let zone = match raw.zone {
            Some(z) if z.is_empty() || !is_label_value(&z) => {
                return Err(format!(
                    "providerSpec.zone: {z:?} must be a non-empty label value"
                ));
            }
            z => z,
        };
        let clusters: Vec<&str> = raw
            .tags
            .keys()
            .filter_map(|k| k.strip_prefix(CLUSTER_TAG_PREFIX))
            .collect();
        match clusters.as_slice() {
            [] => {}
            [c] if !c.is_empty() => {}
            _ => {
                return Err(format!(
                    "providerSpec.tags: at most one non-empty {CLUSTER_TAG_PREFIX}<name> tag, got {clusters:?}"
                ));
            }
        }
        Ok(ProviderSpec {
            boot_delay: duration("bootDelay", raw.boot_delay.as_deref())?,
            zone,
            tags: raw.tags,
            fail_create: raw
                .fail_create
                .filter(|f| f.times > 0 && f.code != Code::Ok),
            call_delay: duration("callDelay", raw.call_delay.as_deref())?,
        })
    }

    /// The cluster named by the tags, if any.
    pub fn cluster(&self) -> Option<&str> {
        self.tags
            .keys()
            .find_map(|k| k.strip_prefix(CLUSTER_TAG_PREFIX))
    }

    /// The zone, or [`DEFAULT_ZONE`].
    pub fn zone_or_default(&self) -> &str {
        self.zone.as_deref().unwrap_or(DEFAULT_ZONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_valid_specs() {
        let cases = [
            (Value::Null, ProviderSpec::default()),
            (json!({}), ProviderSpec::default()),
            (
                json!({"bootDelay": "1m30s", "zone": "zone-a", "callDelay": "10ms",
                       "apiVersion": "local/v1", "kind": "LocalProviderSpec"}),
                ProviderSpec {
                    boot_delay: Duration::from_secs(90),
                    zone: Some("zone-a".into()),
                    call_delay: Duration::from_millis(10),
                    ..ProviderSpec::default()
                },
            ),
            (
                json!({"failCreate": {"code": "RESOURCE_EXHAUSTED", "times": 3}}),
                ProviderSpec {
                    fail_create: Some(FailCreate {
                        code: Code::ResourceExhausted,
                        times: 3,
                    }),
                    ..ProviderSpec::default()
                },
            ),
            (
                json!({"failCreate": {"code": "Unavailable", "times": 0}}),
                ProviderSpec::default(),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(ProviderSpec::parse(&v).as_ref(), Ok(&want), "{v}");
        }
    }

    #[test]
    fn cluster_comes_from_the_tag() {
        let s = ProviderSpec::parse(&json!({"tags": {
            "kubernetes.io/cluster/shoot--a": "1", "kubernetes.io/role/node": "1"
        }}))
        .unwrap();
        assert_eq!(s.cluster(), Some("shoot--a"));
        assert_eq!(s.zone_or_default(), DEFAULT_ZONE);
        assert_eq!(ProviderSpec::default().cluster(), None);
    }

    #[test]
    fn rejects_invalid_specs() {
        let cases = [
            (json!({"bootDelay": "soon"}), "bootDelay"),
            (json!({"bootDelay": "-1s"}), "bootDelay"),
            (json!({"bootDelay": 5}), "providerSpec"),
            (json!({"zone": ""}), "zone"),
            (json!({"zone": "a/b"}), "zone"),
            (json!({"zonee": "a"}), "unknown field"),
            (
                json!({"failCreate": {"code": "Nope", "times": 1}}),
                "error code \"Nope\"",
            ),
            (
                json!({"tags": {"kubernetes.io/cluster/a": "1", "kubernetes.io/cluster/b": "1"}}),
                "tags",
            ),
            (json!({"tags": {"kubernetes.io/cluster/": "1"}}), "tags"),
            (json!([1, 2]), "providerSpec"),
        ];
        for (v, want) in cases {
            let err = ProviderSpec::parse(&v).expect_err(&v.to_string());
            assert!(err.contains(want), "{v}: {err}");
        }
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "zone-a", "a.b_c", &"x".repeat(63)] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["-a", "a-", "a/b", "a b", &"x".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
