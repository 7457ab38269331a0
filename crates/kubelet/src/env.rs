//! A container's environment as the kubelet makes it: `envFrom`, then
//! `env` in order, each value expanded with `$(VAR)` references to the
//! variables before it; `valueFrom` reads `fieldRef` (including
//! `status.podIP`), `resourceFieldRef`, `configMapKeyRef` and
//! `secretKeyRef`. Also the `$(VAR)` expansion of command and args.
//!
//! Pure: the executor fetches the ConfigMaps and Secrets a pod names
//! ([`referenced`]) and hands them in as [`Sources`]. A missing required
//! object or key is a [`ConfigError`], which the pod shows as
//! `CreateContainerConfigError`, as upstream.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};

/// What the environment may read besides the pod itself.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    /// By name; `None` when the object does not exist.
    pub config_maps: BTreeMap<String, Option<ConfigMap>>,
    pub secrets: BTreeMap<String, Option<Secret>>,
    pub pod_ip: String,
    pub host_ip: String,
    /// The node's allocatable resources, for `resourceFieldRef` without a
    /// limit (upstream falls back to them too).
    pub allocatable: BTreeMap<String, String>,
}

/// Why a container's configuration cannot be made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("configmap {0:?} not found")]
    ConfigMapMissing(String),
    #[error("secret {0:?} not found")]
    SecretMissing(String),
    #[error("couldn't find key {key} in ConfigMap {namespace}/{name}")]
    ConfigMapKey {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("couldn't find key {key} in Secret {namespace}/{name}")]
    SecretKey {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("unsupported fieldPath {0:?}")]
    FieldPath(String),
    #[error("unsupported resource {0:?}")]
    Resource(String),
}

/// The ConfigMaps and Secrets a pod's environment and volumes name.
pub fn referenced(pod: &Pod) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut cms = BTreeSet::new();
    let mut secrets = BTreeSet::new();
    let Some(spec) = &pod.spec else {
        return (cms, secrets);
    };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for c in containers {
        for e in c.env.iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            if let Some(r) = &from.config_map_key_ref {
                cms.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                secrets.insert(r.name.clone());
            }
        }
        for f in c.env_from.iter().flatten() {
            if let Some(r) = &f.config_map_ref {
                cms.insert(r.name.clone());
            }
            if let Some(r) = &f.secret_ref {
                secrets.insert(r.name.clone());
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(c) = &v.config_map {
            cms.insert(c.name.clone());
        }
        if let Some(s) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            secrets.insert(s);
        }
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(c) = &src.config_map {
                cms.insert(c.name.clone());
            }
            if let Some(s) = &src.secret {
                secrets.insert(s.name.clone());
            }
        }
    }
    (cms, secrets)
}

/// Upstream `expansion.Expand`: `$(NAME)` becomes the value of a defined
/// variable and stays as written otherwise; `$$` is a literal `$`.
pub fn expand(input: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(close) => {
                    let name = &body[..close];
                    match vars(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = body;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `metadata.labels['key']` → `("metadata.labels", "key")`.
fn subscript(path: &str) -> Option<(&str, &str)> {
    let (head, rest) = path.split_once("['")?;
    Some((head, rest.strip_suffix("']")?))
}

/// A `fieldRef` value of the pod.
pub fn field_value(pod: &Pod, path: &str, src: &Sources) -> Result<String, ConfigError> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let v = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => src.pod_ip.clone(),
        "status.hostIP" | "status.hostIPs" => src.host_ip.clone(),
        other => match subscript(other) {
            Some(("metadata.labels", k)) => meta
                .labels
                .as_ref()
                .and_then(|l| l.get(k).cloned())
                .unwrap_or_default(),
            Some(("metadata.annotations", k)) => meta
                .annotations
                .as_ref()
                .and_then(|l| l.get(k).cloned())
                .unwrap_or_default(),
            _ => return Err(ConfigError::FieldPath(other.to_string())),
        },
    };
    Ok(v)
}

/// A `resourceFieldRef` value: the container's limit or request as
/// written, or the node's allocatable amount for an unset limit.
fn resource_value(c: &Container, resource: &str, src: &Sources) -> Result<String, ConfigError> {
    let (kind, name) = resource
        .split_once('.')
        .ok_or_else(|| ConfigError::Resource(resource.to_string()))?;
    let res = c.resources.as_ref();
    let set = match kind {
        "limits" => res.and_then(|r| r.limits.as_ref()),
        "requests" => res.and_then(|r| r.requests.as_ref()),
        _ => return Err(ConfigError::Resource(resource.to_string())),
    };
    if let Some(q) = set.and_then(|m| m.get(name)) {
        return Ok(q.0.clone());
    }
    Ok(src
        .allocatable
        .get(name)
        .cloned()
        .unwrap_or_else(|| "0".to_string()))
}

/// Whether `name` may be an environment variable (upstream's
/// `IsEnvVarName`: letters, digits, `_`, `-`, `.`, not starting with a
/// digit).
fn env_name_ok(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn config_map<'a>(
    src: &'a Sources,
    name: &str,
    optional: bool,
) -> Result<Option<&'a ConfigMap>, ConfigError> {
    match src.config_maps.get(name).and_then(Option::as_ref) {
        Some(cm) => Ok(Some(cm)),
        None if optional => Ok(None),
        None => Err(ConfigError::ConfigMapMissing(name.to_string())),
    }
}

fn secret<'a>(
    src: &'a Sources,
    name: &str,
    optional: bool,
) -> Result<Option<&'a Secret>, ConfigError> {
    match src.secrets.get(name).and_then(Option::as_ref) {
        Some(s) => Ok(Some(s)),
        None if optional => Ok(None),
        None => Err(ConfigError::SecretMissing(name.to_string())),
    }
}

/// A ConfigMap's keys and values, text and binary alike.
pub fn config_map_entries(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    out
}

/// A Secret's keys and decoded values.
pub fn secret_entries(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

fn set(vars: &mut Vec<(String, String)>, k: String, v: String) {
    match vars.iter_mut().find(|(n, _)| *n == k) {
        Some(slot) => slot.1 = v,
        None => vars.push((k, v)),
    }
}

/// The container's environment, in order, later names replacing earlier
/// ones at their first position.
pub fn container_env(
    pod: &Pod,
    c: &Container,
    src: &Sources,
) -> Result<Vec<(String, String)>, ConfigError> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let mut vars: Vec<(String, String)> = Vec::new();
    for from in c.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let entries = if let Some(r) = &from.config_map_ref {
            config_map(src, &r.name, r.optional.unwrap_or(false))?.map(config_map_entries)
        } else if let Some(r) = &from.secret_ref {
            secret(src, &r.name, r.optional.unwrap_or(false))?.map(secret_entries)
        } else {
            None
        };
        for (k, v) in entries.into_iter().flatten() {
            let name = format!("{prefix}{k}");
            // Upstream skips invalid names (and records an event).
            if env_name_ok(&name) {
                set(&mut vars, name, String::from_utf8_lossy(&v).into_owned());
            }
        }
    }
    for e in c.env.iter().flatten() {
        let value = match &e.value_from {
            None => {
                let raw = e.value.clone().unwrap_or_default();
                let lookup = |n: &str| {
                    vars.iter()
                        .rev()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| v.clone())
                };
                expand(&raw, &lookup)
            }
            Some(from) => {
                if let Some(f) = &from.field_ref {
                    field_value(pod, &f.field_path, src)?
                } else if let Some(r) = &from.resource_field_ref {
                    resource_value(c, &r.resource, src)?
                } else if let Some(r) = &from.config_map_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    match config_map(src, &r.name, optional)? {
                        None => continue,
                        Some(cm) => match config_map_entries(cm).remove(&r.key) {
                            Some(v) => String::from_utf8_lossy(&v).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(ConfigError::ConfigMapKey {
                                    namespace: ns,
                                    name: r.name.clone(),
                                    key: r.key.clone(),
                                });
                            }
                        },
                    }
                } else if let Some(r) = &from.secret_key_ref {
                    let optional = r.optional.unwrap_or(false);
                    match secret(src, &r.name, optional)? {
                        None => continue,
                        Some(s) => match secret_entries(s).remove(&r.key) {
                            Some(v) => String::from_utf8_lossy(&v).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(ConfigError::SecretKey {
                                    namespace: ns,
                                    name: r.name.clone(),
                                    key: r.key.clone(),
                                });
                            }
                        },
                    }
                } else {
                    String::new()
                }
            }
        };
        set(&mut vars, e.name.clone(), value);
    }
    Ok(vars)
}

/// Command and args with `$(VAR)` expanded from the container's
/// environment.
pub fn expand_all(words: &[String], env: &[(String, String)]) -> Vec<String> {
    let lookup = |n: &str| {
        env.iter()
            .rev()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    words.iter().map(|w| expand(w, &lookup)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |n| m.get(n).cloned()
    }

    #[test]
    fn expansion_table() {
        let v = vars(&[("A", "1"), ("B", "two")]);
        for (input, want) in [
            ("$(A)", "1"),
            ("x$(A)y$(B)z", "x1ytwoz"),
            ("$(C)", "$(C)"),
            ("$$(A)", "$(A)"),
            ("$$", "$"),
            ("$(A", "$(A"),
            ("a$b", "a$b"),
            ("$", "$"),
            ("", ""),
            ("ünï$(B)", "ünïtwo"),
        ] {
            assert_eq!(expand(input, &v), want, "{input:?}");
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-0", "namespace": "ns", "uid": "u-1",
                         "labels": {"app": "web"}, "annotations": {"a": "b"}},
            "spec": {"nodeName": "box", "containers": [{
                "name": "c", "image": "trellis.dev/exec",
                "resources": {"limits": {"memory": "64Mi"}},
                "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": "CM_"},
                            {"secretRef": {"name": "gone", "optional": true}}],
                "env": [
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "URL", "value": "http://$(POD_IP):80/$(NAME)/$(LATER)"},
                    {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "s", "key": "password"}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "mode"}}},
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
                    {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "OPT", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "nope", "optional": true}}},
                    {"name": "CM_mode", "value": "overridden"},
                    {"name": "LATER", "value": "z"},
                ],
            }]},
        }))
        .unwrap()
    }

    fn sources() -> Sources {
        let cm: ConfigMap =
            serde_json::from_value(json!({"data": {"mode": "fast", "bad key": "x"}})).unwrap();
        let s: Secret = serde_json::from_value(json!({"data": {"password": "c2VjcmV0"}})).unwrap();
        Sources {
            config_maps: [("cm".to_string(), Some(cm))].into(),
            secrets: [("s".to_string(), Some(s)), ("gone".to_string(), None)].into(),
            pod_ip: "127.1.0.5".into(),
            host_ip: "127.0.0.1".into(),
            allocatable: [("cpu".to_string(), "2".to_string())].into(),
        }
    }

    #[test]
    fn environment_in_order_with_every_source() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let env = container_env(&p, c, &sources()).unwrap();
        let got: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            got,
            [
                ("CM_mode", "overridden"),
                ("POD_IP", "127.1.0.5"),
                ("NAME", "web-0"),
                ("APP", "web"),
                ("URL", "http://127.1.0.5:80/web-0/$(LATER)"),
                ("PASS", "secret"),
                ("MODE", "fast"),
                ("MEM", "64Mi"),
                ("CPU", "2"),
                ("LATER", "z"),
            ]
        );
        let argv = expand_all(&["--x=$(POD_IP)".into(), "$(NONE)".into()], &env);
        assert_eq!(argv, ["--x=127.1.0.5", "$(NONE)"]);
        let (cms, secrets) = referenced(&p);
        assert_eq!(cms.into_iter().collect::<Vec<_>>(), ["cm"]);
        assert_eq!(secrets.into_iter().collect::<Vec<_>>(), ["gone", "s"]);
    }

    #[test]
    fn missing_objects_and_keys_are_config_errors() {
        let p = pod();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let mut src = sources();
        src.secrets.insert("s".into(), None);
        assert_eq!(
            container_env(&p, c, &src),
            Err(ConfigError::SecretMissing("s".into()))
        );
        let mut src = sources();
        src.config_maps
            .insert("cm".into(), Some(ConfigMap::default()));
        assert_eq!(
            container_env(&p, c, &src),
            Err(ConfigError::ConfigMapKey {
                namespace: "ns".into(),
                name: "cm".into(),
                key: "mode".into()
            })
        );
        let mut bad = c.clone();
        bad.env = Some(vec![
            serde_json::from_value(
                json!({"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}),
            )
            .unwrap(),
        ]);
        bad.env_from = None;
        assert_eq!(
            container_env(&p, &bad, &sources()),
            Err(ConfigError::FieldPath("spec.bogus".into()))
        );
    }
}
