//! Bootstrap user data for a pool's machines: a cloud-init document that
//! writes a bootstrap kubeconfig and the node agent's configuration (with
//! the pool's Kubernetes version) and starts the kubelet with the pool's
//! node labels and taints.
//!
//! The document is the same for every machine of a pool; the per-machine
//! parts are placeholders that machine-controller-manager fills in when it
//! creates a machine: [`BOOTSTRAP_TOKEN_PLACEHOLDER`] with a fresh bootstrap
//! token and [`MACHINE_NAME_PLACEHOLDER`] with the machine's name (used as
//! the node name). This is the "bootstrap data" of seed 004 — data a
//! bootstrap provider produces and the infrastructure provider passes to the
//! VM unread — in the shape Gardener gives it: gardenlet's user data secret
//! referenced by `userDataSecretRef`, copied into each class secret.
//!
//! Only labels the kubelet may set on itself (NodeRestriction) go into
//! `--node-labels`; MCM applies the others from the machine's node template
//! once the node has registered.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use serde::Serialize;

use crate::labels::kubelet_node_labels;

/// Replaced by MCM with the machine's bootstrap token.
pub const BOOTSTRAP_TOKEN_PLACEHOLDER: &str = "<<BOOTSTRAP_TOKEN>>";
/// Replaced by MCM with the machine's name.
pub const MACHINE_NAME_PLACEHOLDER: &str = "<<MACHINE_NAME>>";

/// Where the bootstrap token is written on the machine.
pub const BOOTSTRAP_TOKEN_PATH: &str = "/var/lib/gardener-node-agent/credentials/bootstrap-token";
/// Where the machine name is written on the machine.
pub const MACHINE_NAME_PATH: &str = "/var/lib/gardener-node-agent/machine-name";
/// Where the bootstrap kubeconfig is written on the machine.
pub const BOOTSTRAP_KUBECONFIG_PATH: &str = "/var/lib/kubelet/kubeconfig-bootstrap";
/// Where the kubelet writes the kubeconfig it obtains through TLS bootstrapping.
pub const KUBECONFIG_PATH: &str = "/var/lib/kubelet/kubeconfig-real";
/// Where gardener-node-agent's configuration is written on the machine. It
/// names the Kubernetes version whose kubelet the node agent installs, so a
/// machine provider that simulates the node (provider-local) reads the
/// kubelet version from here.
pub const NODE_AGENT_CONFIG_PATH: &str = "/var/lib/gardener-node-agent/config.yaml";
/// `apiVersion` of the node agent's configuration.
pub const NODE_AGENT_CONFIG_API_VERSION: &str = "nodeagent.config.gardener.cloud/v1alpha1";

/// What the user data of one pool depends on.
#[derive(Clone, Copy, Debug)]
pub struct BootstrapConfig<'a> {
    /// Pool name.
    pub pool: &'a str,
    /// Kubernetes version of the pool's kubelets.
    pub kubernetes_version: &'a str,
    /// URL of the shoot's API server.
    pub api_server_url: &'a str,
    /// Base64 PEM bundle of the cluster CA, if the server needs one.
    pub ca_data: Option<&'a str>,
    /// The pool's node labels (all of them; filtered here).
    pub node_labels: &'a BTreeMap<String, String>,
    /// The pool's taints, registered with the node.
    pub taints: &'a [Taint],
}

#[derive(Serialize)]
struct CloudConfig {
    write_files: Vec<WriteFile>,
    runcmd: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct WriteFile {
    path: String,
    permissions: String,
    content: String,
}

/// The part of gardener-node-agent's `NodeAgentConfiguration` the
/// bootstrap needs: the API server and the Kubernetes version of the
/// kubelet to install.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAgentConfiguration<'a> {
    api_version: &'static str,
    kind: &'static str,
    api_server: NodeAgentApiServer<'a>,
    controllers: NodeAgentControllers<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAgentApiServer<'a> {
    server: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ca_bundle: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAgentControllers<'a> {
    operating_system_config: NodeAgentOsc<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeAgentOsc<'a> {
    kubernetes_version: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Kubeconfig {
    api_version: &'static str,
    kind: &'static str,
    clusters: Vec<Named<ClusterEntry>>,
    users: Vec<Named<UserEntry>>,
    contexts: Vec<Named<ContextEntry>>,
    current_context: &'static str,
}

#[derive(Serialize)]
struct Named<T> {
    name: &'static str,
    #[serde(flatten)]
    value: T,
}

#[derive(Serialize)]
struct ClusterEntry {
    cluster: ClusterData,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct ClusterData {
    server: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority_data: Option<String>,
}

#[derive(Serialize)]
struct UserEntry {
    user: UserData,
}

#[derive(Serialize)]
struct UserData {
    token: &'static str,
}

#[derive(Serialize)]
struct ContextEntry {
    context: ContextData,
}

#[derive(Serialize)]
struct ContextData {
    cluster: &'static str,
    user: &'static str,
}

/// `key=value:Effect`, the kubelet's `--register-with-taints` syntax.
fn taint_flag(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(v) if !v.is_empty() => format!("{}={v}:{}", taint.key, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

/// The kubelet command line of a pool's machines.
pub fn kubelet_command(config: &BootstrapConfig<'_>) -> Vec<String> {
    let mut cmd = vec![
        "kubelet".to_string(),
        format!("--bootstrap-kubeconfig={BOOTSTRAP_KUBECONFIG_PATH}"),
        format!("--kubeconfig={KUBECONFIG_PATH}"),
        format!("--hostname-override={MACHINE_NAME_PLACEHOLDER}"),
    ];
    let node_labels = kubelet_node_labels(config.node_labels);
    if !node_labels.is_empty() {
        let joined: Vec<String> = node_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        cmd.push(format!("--node-labels={}", joined.join(",")));
    }
    if !config.taints.is_empty() {
        let joined: Vec<String> = config.taints.iter().map(taint_flag).collect();
        cmd.push(format!("--register-with-taints={}", joined.join(",")));
    }
    cmd
}

/// The cloud-init document for a pool (`#cloud-config` first line).
pub fn bootstrap_user_data(config: &BootstrapConfig<'_>) -> String {
    let kubeconfig = Kubeconfig {
        api_version: "v1",
        kind: "Config",
        clusters: vec![Named {
            name: "default",
            value: ClusterEntry {
                cluster: ClusterData {
                    server: config.api_server_url.to_string(),
                    certificate_authority_data: config.ca_data.map(str::to_string),
                },
            },
        }],
        users: vec![Named {
            name: "kubelet-bootstrap",
            value: UserEntry {
                user: UserData {
                    token: BOOTSTRAP_TOKEN_PLACEHOLDER,
                },
            },
        }],
        contexts: vec![Named {
            name: "kubelet-bootstrap@default",
            value: ContextEntry {
                context: ContextData {
                    cluster: "default",
                    user: "kubelet-bootstrap",
                },
            },
        }],
        current_context: "kubelet-bootstrap@default",
    };
    let document = CloudConfig {
        write_files: vec![
            WriteFile {
                path: BOOTSTRAP_TOKEN_PATH.to_string(),
                permissions: "0600".to_string(),
                content: BOOTSTRAP_TOKEN_PLACEHOLDER.to_string(),
            },
            WriteFile {
                path: MACHINE_NAME_PATH.to_string(),
                permissions: "0644".to_string(),
                content: MACHINE_NAME_PLACEHOLDER.to_string(),
            },
            WriteFile {
                path: BOOTSTRAP_KUBECONFIG_PATH.to_string(),
                permissions: "0600".to_string(),
                content: serde_yaml::to_string(&kubeconfig).unwrap_or_default(),
            },
            WriteFile {
                path: NODE_AGENT_CONFIG_PATH.to_string(),
                permissions: "0600".to_string(),
                content: serde_yaml::to_string(&NodeAgentConfiguration {
                    api_version: NODE_AGENT_CONFIG_API_VERSION,
                    kind: "NodeAgentConfiguration",
                    api_server: NodeAgentApiServer {
                        server: config.api_server_url,
                        ca_bundle: config.ca_data,
                    },
                    controllers: NodeAgentControllers {
                        operating_system_config: NodeAgentOsc {
                            kubernetes_version: config.kubernetes_version,
                        },
                    },
                })
                .unwrap_or_default(),
            },
        ],
        runcmd: vec![kubelet_command(config)],
    };
    format!(
        "#cloud-config\n# worker pool {}, kubernetes {}\n{}",
        config.pool,
        config.kubernetes_version,
        serde_yaml::to_string(&document).unwrap_or_default()
    )
}
