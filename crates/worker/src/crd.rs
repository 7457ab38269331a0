//! CustomResourceDefinitions of [`Worker`] and [`Cluster`], generated from the
//! types so the manifests cannot drift from the Rust structs.
//!
//! Names, scope, printer columns and the status subresource follow upstream's
//! generated CRDs (`extensions.gardener.cloud_workers.yaml`,
//! `extensions.gardener.cloud_clusters.yaml`): neither kind has short names
//! or categories; Worker has columns Type, Region, Status, Age and a status
//! subresource, Cluster only Age. Schemas go through kube's structural
//! rewrites (the `CustomResource` derive); raw extension fields carry
//! `x-kubernetes-preserve-unknown-fields`. The fields upstream marks required
//! are put back, because `serde(default)` keeps schemars from doing so.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::core::crd::v1::CustomResourceExt;

use crate::types::{Cluster, Worker};

/// The CRDs of Worker and Cluster.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut worker = Worker::crd();
    require(
        &mut worker,
        "spec",
        &["type", "region", "secretRef", "pools"],
    );
    require_pool_fields(&mut worker);
    accept_seed_timeout_names(&mut worker);
    accept_numeric_thresholds(&mut worker);
    let mut cluster = Cluster::crd();
    require(&mut cluster, "spec", &["cloudProfile", "seed", "shoot"]);
    vec![worker, cluster]
}

/// [`crds`] as one multi-document YAML stream, ready for `kubectl apply -f`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .filter_map(|crd| serde_yaml::to_string(crd).ok())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn root_schema(crd: &mut CustomResourceDefinition) -> Option<&mut JSONSchemaProps> {
    crd.spec
        .versions
        .first_mut()?
        .schema
        .as_mut()?
        .open_api_v3_schema
        .as_mut()
}

fn require(crd: &mut CustomResourceDefinition, property: &str, fields: &[&str]) {
    let Some(schema) = root_schema(crd)
        .and_then(|root| root.properties.as_mut())
        .and_then(|props| props.get_mut(property))
    else {
        return;
    };
    set_required(schema, fields);
}

fn set_required(schema: &mut JSONSchemaProps, fields: &[&str]) {
    let required = schema.required.get_or_insert_with(Vec::new);
    for field in fields {
        if !required.iter().any(|r| r == field) {
            required.push((*field).to_string());
        }
    }
    required.sort();
}

/// The Worker contract's documentation (seed 002) writes a pool's MCM
/// timeouts as `drainTimeout`, `healthTimeout` and `creationTimeout`, the
/// types as `machineDrainTimeout` and so on. The types read both; the
/// schema must list both too, or strict field validation would reject the
/// documented example.
fn accept_seed_timeout_names(crd: &mut CustomResourceDefinition) {
    let Some(settings) = pool_property(crd, "machineControllerManager") else {
        return;
    };
    for (alias, field) in [
        ("drainTimeout", "machineDrainTimeout"),
        ("healthTimeout", "machineHealthTimeout"),
        ("creationTimeout", "machineCreationTimeout"),
    ] {
        if let Some(schema) = settings.get(field).cloned() {
            settings
                .entry(alias.to_string())
                .or_insert(JSONSchemaProps {
                    description: Some(format!(
                        "Alias of {field}, as the Worker contract's documentation writes it."
                    )),
                    ..schema
                });
        }
    }
}

/// The schema of one worker pool (`spec.pools[]`).
fn pool_schema(crd: &mut CustomResourceDefinition) -> Option<&mut JSONSchemaProps> {
    root_schema(crd)
        .and_then(|root| root.properties.as_mut())
        .and_then(|props| props.get_mut("spec"))
        .and_then(|spec| spec.properties.as_mut())
        .and_then(|props| props.get_mut("pools"))
        .and_then(|pools| pools.items.as_mut())
        .and_then(|items| match items {
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray::Schema(s) => Some(s.as_mut()),
            _ => None,
        })
}

/// The properties of the pool's object-valued field `property`
/// (`machineControllerManager`, `clusterAutoscaler`, ...).
fn pool_property<'a>(
    crd: &'a mut CustomResourceDefinition,
    property: &str,
) -> Option<&'a mut std::collections::BTreeMap<String, JSONSchemaProps>> {
    pool_schema(crd)
        .and_then(|pool| pool.properties.as_mut())
        .and_then(|props| props.get_mut(property))
        .and_then(|m| m.properties.as_mut())
}

/// Upstream types the autoscaler's utilization thresholds as strings
/// (`"0.5"`); the contract's documentation writes numbers (`0.5`). The
/// types read both, so the schema accepts any scalar there.
fn accept_numeric_thresholds(crd: &mut CustomResourceDefinition) {
    let Some(settings) = pool_property(crd, "clusterAutoscaler") else {
        return;
    };
    for field in [
        "scaleDownUtilizationThreshold",
        "scaleDownGpuUtilizationThreshold",
    ] {
        if let Some(schema) = settings.get_mut(field) {
            schema.type_ = None;
            schema.nullable = None;
            schema.x_kubernetes_preserve_unknown_fields = Some(true);
        }
    }
}

/// Upstream's pool fields without `omitempty` are required in its schema.
fn require_pool_fields(crd: &mut CustomResourceDefinition) {
    let Some(pool) = pool_schema(crd) else {
        return;
    };
    set_required(
        pool,
        &[
            "name",
            "machineType",
            "minimum",
            "maximum",
            "maxSurge",
            "maxUnavailable",
        ],
    );
}
