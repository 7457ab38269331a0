//! The bootstrap data of one node, as a pure function: trellis's node
//! bootstrap document (cloud-init; the format Gardener's worker pools use,
//! rendered by `worker::bootstrap`) with this node's bootstrap token and
//! name filled in, Cluster API's uninitialized taint added to the config's
//! taints, and the Machine's Kubernetes version for the node agent.

use k8s_openapi::api::core::v1::Taint;

use crate::types::TrellisConfigSpec;

/// What one node's data depends on.
#[derive(Clone, Debug)]
pub struct NodeData<'a> {
    pub spec: &'a TrellisConfigSpec,
    /// The Machine's name, which the node registers as.
    pub machine: &'a str,
    /// The Cluster's name (the document's pool line).
    pub cluster: &'a str,
    /// `https://host:port` of the Cluster's `controlPlaneEndpoint`.
    pub api_server_url: &'a str,
    /// The Machine's `spec.version`; the default when unset.
    pub version: &'a str,
    /// `<id>.<secret>`.
    pub token: &'a str,
}

/// The taints a node registers with: Cluster API's uninitialized taint
/// (removed by the Machine controller once labels are synced), then the
/// config's.
pub fn taints(spec: &TrellisConfigSpec) -> Vec<Taint> {
    let mut out = vec![Taint {
        key: capi::types::labels::UNINITIALIZED_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    }];
    out.extend(
        spec.node_taints
            .iter()
            .filter(|t| t.key != capi::types::labels::UNINITIALIZED_TAINT)
            .cloned(),
    );
    out
}

/// The cloud-init document.
pub fn render(d: &NodeData<'_>) -> String {
    let taints = taints(d.spec);
    let version = d.version.trim_start_matches('v');
    let doc = worker::bootstrap::bootstrap_user_data(&worker::bootstrap::BootstrapConfig {
        pool: d.cluster,
        kubernetes_version: version,
        api_server_url: d.api_server_url,
        ca_data: None,
        node_labels: &d.spec.node_labels,
        taints: &taints,
    });
    mcm::machine::substitute_user_data(&doc, d.token, d.machine)
}

/// The Kubernetes version used when the Machine names none.
pub const DEFAULT_VERSION: &str = "v1.32.0";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn renders_token_name_version_labels_and_taints() {
        let spec = TrellisConfigSpec {
            node_labels: BTreeMap::from([
                ("node.kubernetes.io/pool".to_string(), "workers".to_string()),
                ("node-role.kubernetes.io/worker".to_string(), String::new()),
            ]),
            node_taints: vec![Taint {
                key: "dedicated".into(),
                value: Some("ci".into()),
                effect: "NoExecute".into(),
                ..Taint::default()
            }],
        };
        let data = render(&NodeData {
            spec: &spec,
            machine: "md-0-abcde",
            cluster: "c1",
            api_server_url: "https://127.0.0.1:6443",
            version: "v1.31.2",
            token: "abcdef.0123456789abcdef",
        });
        assert!(data.starts_with("#cloud-config\n"), "{data}");
        assert!(data.contains("token: abcdef.0123456789abcdef"), "{data}");
        assert!(data.contains("--hostname-override=md-0-abcde"), "{data}");
        assert!(data.contains("kubernetesVersion: 1.31.2"), "{data}");
        assert!(data.contains("server: https://127.0.0.1:6443"), "{data}");
        assert!(
            data.contains("--register-with-taints=node.cluster.x-k8s.io/uninitialized:NoSchedule,dedicated=ci:NoExecute"),
            "{data}"
        );
        // A kubelet may not label itself with node-role (NodeRestriction).
        assert!(
            data.contains("--node-labels=node.kubernetes.io/pool=workers"),
            "{data}"
        );
        assert!(!data.contains("node-role.kubernetes.io/worker="), "{data}");
        assert!(!data.contains("<<"), "no placeholder left: {data}");
    }
}
