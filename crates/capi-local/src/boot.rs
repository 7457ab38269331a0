//! What a local VM does with its bootstrap data, as a pure function: the
//! parts of the cloud-init document its kubelet acts on, and whether the
//! bootstrap token in it lets the kubelet join.
//!
//! The data is trellis's node bootstrap document (see
//! `worker::bootstrap`): a bootstrap kubeconfig with the token, the node
//! agent configuration (the kubelet version, which `provider-local` reads
//! itself), and the kubelet command line (`--hostname-override`,
//! `--node-labels`, `--register-with-taints`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Secret, Taint};
use serde_json::Value;

/// Where the bootstrap kubeconfig is written (`worker::bootstrap`).
pub const BOOTSTRAP_KUBECONFIG_PATH: &str = "/var/lib/kubelet/kubeconfig-bootstrap";

/// What the kubelet of a VM booted with the data does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Boot {
    /// The API server it joins.
    pub server: Option<String>,
    /// `<id>.<secret>` it authenticates with.
    pub token: Option<String>,
    /// The node name it registers.
    pub hostname: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
}

/// Reads the data; an error names what is wrong with it.
pub fn parse(data: &str) -> Result<Boot, String> {
    if !data.starts_with("#cloud-config") {
        return Err("the bootstrap data is not a #cloud-config document".into());
    }
    let doc: Value =
        serde_yaml::from_str(data).map_err(|e| format!("the bootstrap data is not YAML: {e}"))?;
    let mut boot = Boot::default();
    if let Some(files) = doc.get("write_files").and_then(Value::as_array) {
        let kubeconfig = files
            .iter()
            .find(|f| f.get("path").and_then(Value::as_str) == Some(BOOTSTRAP_KUBECONFIG_PATH))
            .and_then(|f| f.get("content")?.as_str())
            .and_then(|c| serde_yaml::from_str::<Value>(c).ok());
        if let Some(kc) = kubeconfig {
            boot.server = kc
                .pointer("/clusters/0/cluster/server")
                .and_then(Value::as_str)
                .map(str::to_string);
            boot.token = kc
                .pointer("/users/0/user/token")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    }
    let kubelet = doc
        .get("runcmd")
        .and_then(Value::as_array)
        .and_then(|cmds| {
            cmds.iter().find_map(|c| {
                let args: Vec<&str> = c.as_array()?.iter().filter_map(Value::as_str).collect();
                (args.first() == Some(&"kubelet")).then_some(args)
            })
        })
        .ok_or("the bootstrap data starts no kubelet")?;
    for arg in kubelet.iter().skip(1) {
        let Some((flag, value)) = arg.split_once('=') else {
            continue;
        };
        match flag {
            "--hostname-override" => boot.hostname = Some(value.to_string()),
            "--node-labels" => {
                for kv in value.split(',').filter(|s| !s.is_empty()) {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    boot.labels.insert(k.to_string(), v.to_string());
                }
            }
            "--register-with-taints" => {
                for t in value.split(',').filter(|s| !s.is_empty()) {
                    let (kv, effect) = t
                        .rsplit_once(':')
                        .ok_or_else(|| format!("taint {t:?} has no effect"))?;
                    let (key, v) = match kv.split_once('=') {
                        Some((k, v)) => (k, Some(v.to_string())),
                        None => (kv, None),
                    };
                    boot.taints.push(Taint {
                        key: key.to_string(),
                        value: v,
                        effect: effect.to_string(),
                        time_added: None,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(boot)
}

/// Whether a bootstrap token Secret (kube-system/bootstrap-token-<id>)
/// lets `token` authenticate at `now`: same ID and secret, usable for
/// authentication, not expired.
pub fn token_valid(secret: Option<&Secret>, token: &str, now: DateTime<Utc>) -> Result<(), String> {
    let Some((id, _)) = token.split_once('.') else {
        return Err("the bootstrap token is not of the form <id>.<secret>".into());
    };
    let Some(secret) = secret else {
        return Err(format!(
            "bootstrap token {id} does not exist in the workload cluster"
        ));
    };
    if mcm::machine::token_of(secret).as_deref() != Some(token) {
        return Err(format!("bootstrap token {id} does not match"));
    }
    if mcm::machine::secret_value(secret, "usage-bootstrap-authentication").as_deref()
        != Some("true")
    {
        return Err(format!("bootstrap token {id} may not authenticate"));
    }
    if let Some(exp) = mcm::machine::secret_value(secret, "expiration")
        && let Ok(exp) = DateTime::parse_from_rfc3339(&exp)
        && exp.with_timezone(&Utc) < now
    {
        return Err(format!("bootstrap token {id} expired at {exp}"));
    }
    Ok(())
}

/// The token Secret's name for a token.
pub fn token_secret_name(token: &str) -> Option<String> {
    token
        .split_once('.')
        .map(|(id, _)| mcm::machine::bootstrap_token_secret_name(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(labels: &[(&str, &str)], taints: Vec<Taint>) -> String {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let doc = worker::bootstrap::bootstrap_user_data(&worker::bootstrap::BootstrapConfig {
            pool: "c1",
            kubernetes_version: "1.31.2",
            api_server_url: "https://127.0.0.1:6443",
            ca_data: None,
            node_labels: &labels,
            taints: &taints,
        });
        mcm::machine::substitute_user_data(&doc, "abcdef.0123456789abcdef", "m-1")
    }

    #[test]
    fn reads_what_the_kubelet_acts_on() {
        let taints = vec![
            Taint {
                key: "node.cluster.x-k8s.io/uninitialized".into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            },
            Taint {
                key: "dedicated".into(),
                value: Some("ci".into()),
                effect: "NoExecute".into(),
                ..Taint::default()
            },
        ];
        let b = parse(&data(&[("node.kubernetes.io/pool", "a")], taints.clone())).unwrap();
        assert_eq!(b.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(b.token.as_deref(), Some("abcdef.0123456789abcdef"));
        assert_eq!(b.hostname.as_deref(), Some("m-1"));
        assert_eq!(b.labels["node.kubernetes.io/pool"], "a");
        assert_eq!(b.taints, taints);
    }

    #[test]
    fn bad_data_is_an_error() {
        assert!(
            parse("#!/bin/sh\necho hi")
                .unwrap_err()
                .contains("#cloud-config")
        );
        assert!(
            parse("#cloud-config\nruncmd: [[echo, hi]]\n")
                .unwrap_err()
                .contains("kubelet")
        );
        assert!(parse("#cloud-config\n: [").is_err());
    }

    #[test]
    fn tokens() {
        let now = capi::testing::t0();
        let secret = mcm::machine::bootstrap_token_secret(
            "abcdef",
            "0123456789abcdef",
            now + chrono::Duration::minutes(15),
            "",
        );
        assert_eq!(
            token_valid(Some(&secret), "abcdef.0123456789abcdef", now),
            Ok(())
        );
        assert!(
            token_valid(Some(&secret), "abcdef.wrongwrongwrongw", now)
                .unwrap_err()
                .contains("match")
        );
        assert!(
            token_valid(None, "abcdef.0123456789abcdef", now)
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            token_valid(
                Some(&secret),
                "abcdef.0123456789abcdef",
                now + chrono::Duration::minutes(16)
            )
            .unwrap_err()
            .contains("expired")
        );
        assert!(token_valid(Some(&secret), "nodot", now).is_err());
        assert_eq!(
            token_secret_name("abcdef.x").as_deref(),
            Some("bootstrap-token-abcdef")
        );
    }
}
