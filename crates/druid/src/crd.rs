//! The CustomResourceDefinitions of Etcd and EtcdCopyBackupsTask,
//! generated from the types (so they cannot drift), with upstream's names,
//! printer columns, and status and scale subresources. The fields upstream
//! requires are put back, since `serde(default)` keeps schemars from
//! marking them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::core::crd::v1::CustomResourceExt;

use crate::types::{Etcd, EtcdCopyBackupsTask};

/// Both CRDs.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut etcd = Etcd::crd();
    require(&mut etcd, &["spec"], &["labels", "replicas"]);
    let mut task = EtcdCopyBackupsTask::crd();
    require(&mut task, &["spec"], &["sourceStore", "targetStore"]);
    vec![etcd, task]
}

/// [`crds`] as one multi-document YAML stream, for `kubectl apply -f`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .filter_map(|crd| serde_yaml::to_string(crd).ok())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn require(crd: &mut CustomResourceDefinition, path: &[&str], fields: &[&str]) {
    let mut schema: Option<&mut JSONSchemaProps> = crd
        .spec
        .versions
        .first_mut()
        .and_then(|v| v.schema.as_mut())
        .and_then(|s| s.open_api_v3_schema.as_mut());
    for step in path {
        schema = schema
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut(*step));
    }
    let Some(schema) = schema else { return };
    let required = schema.required.get_or_insert_with(Vec::new);
    for f in fields {
        if !required.iter().any(|r| r == f) {
            required.push(f.to_string());
        }
    }
    required.sort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_columns_and_subresources_follow_upstream() {
        let crds = crds();
        let etcd = &crds[0];
        assert_eq!(
            etcd.metadata.name.as_deref(),
            Some("etcds.druid.gardener.cloud")
        );
        assert_eq!(etcd.spec.names.singular.as_deref(), Some("etcd"));
        let v = &etcd.spec.versions[0];
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(sub.status.is_some());
        let scale = sub.scale.as_ref().expect("scale");
        assert_eq!(scale.spec_replicas_path, ".spec.replicas");
        let cols: Vec<_> = v
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            [
                "Ready",
                "Quorate",
                "All Members Ready",
                "Backup Ready",
                "Age",
                "Cluster Size",
                "Current Replicas",
                "Ready Replicas"
            ]
        );
        let spec = &v
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap()
            .properties
            .as_ref()
            .unwrap()["spec"];
        assert_eq!(spec.required.as_ref().unwrap(), &["labels", "replicas"]);
        assert_eq!(
            crds[1].metadata.name.as_deref(),
            Some("etcdcopybackupstasks.druid.gardener.cloud")
        );
        assert!(crds_yaml().contains("kind: CustomResourceDefinition"));
    }
}
