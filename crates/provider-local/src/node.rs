//! What a local VM's kubelet registers, as a pure function of the machine,
//! its class and the VM: the node templates of both, plus the well-known
//! topology labels a cloud's kubelet would set.

use std::collections::BTreeMap;

use api::{Machine, MachineClass};
use k8s_openapi::api::core::v1::{NodeAddress, Secret};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use nodesim::NodeSpec;

/// Builds the node spec for a new VM.
///
/// * labels: `kubernetes.io/arch`, `node.kubernetes.io/instance-type`,
///   `topology.kubernetes.io/region` and `…/zone` from the class's
///   `nodeTemplate` (the zone of the provider spec wins), then the machine's
///   `spec.nodeTemplate.metadata.labels` on top;
/// * annotations and taints: the machine's node template;
/// * capacity: the class's `nodeTemplate.capacity`, with MCM's `gpu` key
///   spelled as the extended resource `nvidia.com/gpu` (and left out when
///   zero), or the simulator's default VM when the class has none;
/// * addresses: `InternalIP` and `Hostname`.
pub fn node_spec(
    machine: &Machine,
    class: &MachineClass,
    node_name: &str,
    provider_id: &str,
    zone: Option<&str>,
    internal_ip: &str,
) -> NodeSpec {
    let template = class.node_template.as_ref();
    let mut labels = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        if !v.is_empty() {
            labels.insert(k.to_string(), v.to_string());
        }
    };
    if let Some(t) = template {
        put(
            "kubernetes.io/arch",
            t.architecture.as_deref().unwrap_or(""),
        );
        put("node.kubernetes.io/instance-type", &t.instance_type);
        put("topology.kubernetes.io/region", &t.region);
        put("topology.kubernetes.io/zone", &t.zone);
    }
    if let Some(z) = zone {
        put("topology.kubernetes.io/zone", z);
    }
    let nt = &machine.spec.node_template;
    labels.extend(nt.metadata.labels.clone().unwrap_or_default());

    let capacity: BTreeMap<String, Quantity> = template
        .map(|t| {
            t.capacity
                .iter()
                .filter_map(|(k, v)| match k.as_str() {
                    "gpu" if v.0 == "0" => None,
                    "gpu" => Some(("nvidia.com/gpu".to_string(), v.clone())),
                    _ => Some((k.clone(), v.clone())),
                })
                .collect()
        })
        .unwrap_or_default();

    NodeSpec {
        name: node_name.to_string(),
        provider_id: provider_id.to_string(),
        labels,
        annotations: nt.metadata.annotations.clone().unwrap_or_default(),
        taints: nt.spec.taints.clone().unwrap_or_default(),
        capacity,
        allocatable: BTreeMap::new(),
        addresses: vec![
            NodeAddress {
                type_: "InternalIP".to_string(),
                address: internal_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".to_string(),
                address: node_name.to_string(),
            },
        ],
        kubelet_version: None,
        boot_delay: Default::default(),
    }
}

/// Where the bootstrap user data writes gardener-node-agent's
/// configuration (Gardener's path).
pub const NODE_AGENT_CONFIG_PATH: &str = "/var/lib/gardener-node-agent/config.yaml";

/// The kubelet version a VM booted with `secret`'s `userData` runs, as the
/// kubelet reports it (`v1.31.2`).
///
/// On a real node, gardener-node-agent installs the kubelet of the version
/// its configuration names; the simulated node reads the same place: the
/// cloud-init `write_files` entry for [`NODE_AGENT_CONFIG_PATH`] and its
/// `controllers.operatingSystemConfig.kubernetesVersion`. User data of
/// another shape (or none) yields `None`, and the simulator's default
/// version is reported.
pub fn kubelet_version(secret: &Secret) -> Option<String> {
    let data = secret.data.as_ref()?.get("userData")?;
    let doc: serde_json::Value = serde_yaml::from_slice(&data.0).ok()?;
    let config = doc
        .get("write_files")?
        .as_array()?
        .iter()
        .find(|f| f.get("path").and_then(|p| p.as_str()) == Some(NODE_AGENT_CONFIG_PATH))?
        .get("content")?
        .as_str()?;
    let config: serde_json::Value = serde_yaml::from_str(config).ok()?;
    let version = config
        .pointer("/controllers/operatingSystemConfig/kubernetesVersion")?
        .as_str()?
        .trim();
    if version.is_empty() {
        return None;
    }
    Some(if version.starts_with('v') {
        version.to_string()
    } else {
        format!("v{version}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::NodeTemplate;
    use k8s_openapi::api::core::v1::Taint;

    #[test]
    fn combines_class_and_machine_templates() {
        let mut class = MachineClass::test("c1");
        class.node_template = Some(NodeTemplate {
            capacity: BTreeMap::from([
                ("cpu".to_string(), Quantity("4".into())),
                ("memory".to_string(), Quantity("16Gi".into())),
                ("gpu".to_string(), Quantity("0".into())),
            ]),
            instance_type: "m5.xlarge".into(),
            region: "eu-1".into(),
            zone: "eu-1a".into(),
            architecture: Some("arm64".into()),
            ..NodeTemplate::default()
        });
        let mut machine = Machine::test("m1");
        machine.spec.node_template.metadata.labels = Some(BTreeMap::from([(
            "pool".to_string(),
            "workers".to_string(),
        )]));
        machine.spec.node_template.metadata.annotations =
            Some(BTreeMap::from([("a".to_string(), "b".to_string())]));
        machine.spec.node_template.spec.taints = Some(vec![Taint {
            key: "k".into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);

        let spec = node_spec(
            &machine,
            &class,
            "m1",
            "local:///z/1",
            Some("z"),
            "10.250.0.1",
        );
        let labels: Vec<(&str, &str)> = spec
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("kubernetes.io/arch", "arm64"),
                ("node.kubernetes.io/instance-type", "m5.xlarge"),
                ("pool", "workers"),
                ("topology.kubernetes.io/region", "eu-1"),
                ("topology.kubernetes.io/zone", "z"),
            ]
        );
        assert_eq!(spec.annotations["a"], "b");
        assert_eq!(spec.taints[0].key, "k");
        assert_eq!(spec.capacity.keys().collect::<Vec<_>>(), ["cpu", "memory"]);
        assert_eq!(spec.internal_ip(), Some("10.250.0.1"));
    }

    #[test]
    fn without_templates_only_the_basics() {
        let class = MachineClass::test("c1");
        let spec = node_spec(&Machine::test("m1"), &class, "m1", "p", None, "10.250.0.2");
        assert!(spec.labels.is_empty() && spec.capacity.is_empty());
        assert_eq!(spec.addresses.len(), 2);
    }

    fn secret_with(user_data: &str) -> Secret {
        Secret {
            data: Some(BTreeMap::from([(
                "userData".to_string(),
                k8s_openapi::ByteString(user_data.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        }
    }

    #[test]
    fn kubelet_version_is_read_from_the_node_agent_configuration() {
        let doc = |version: &str| {
            format!(
                "#cloud-config\nwrite_files:\n- path: /var/lib/other\n  content: x\n\
                 - path: {NODE_AGENT_CONFIG_PATH}\n  permissions: '0600'\n  content: |\n    \
                 apiVersion: nodeagent.config.gardener.cloud/v1alpha1\n    \
                 kind: NodeAgentConfiguration\n    controllers:\n      \
                 operatingSystemConfig:\n        kubernetesVersion: {version}\n\
                 runcmd: [[kubelet]]\n"
            )
        };
        let rows: [(String, Option<&str>); 6] = [
            (doc("1.31.2"), Some("v1.31.2")),
            (doc("v1.30.0"), Some("v1.30.0")),
            (doc("''"), None),
            ("#!/bin/bash\necho hello\n".to_string(), None),
            ("write_files: {not: a list}\n".to_string(), None),
            (":\n  - [unbalanced".to_string(), None),
        ];
        for (user_data, want) in rows {
            assert_eq!(
                kubelet_version(&secret_with(&user_data)).as_deref(),
                want,
                "{user_data}"
            );
        }
        assert_eq!(kubelet_version(&Secret::default()), None);
    }
}
