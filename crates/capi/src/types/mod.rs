//! The cluster.x-k8s.io/v1beta1 kinds, serialized as upstream's Go types
//! write them, and their CRD manifests generated from the Rust types (so
//! the two can never drift), with upstream's short names, category
//! `cluster-api`, printer columns, scale subresources and contract labels.

pub mod cluster;
pub mod common;
pub mod labels;
pub mod machine;
pub mod machinedeployment;
pub mod machinehealthcheck;
pub mod machineset;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::crd::v1::CustomResourceExt;

pub use cluster::{Cluster, ClusterSpec, ClusterStatus};
pub use common::{ApiEndpoint, Condition, FailureDomainSpec, MachineAddress, TemplateMeta};
pub use machine::{
    Bootstrap, Machine, MachineDeletionStatus, MachineSpec, MachineStatus, MachineTemplateSpec,
};
pub use machinedeployment::{
    MachineDeployment, MachineDeploymentSpec, MachineDeploymentStatus, MachineDeploymentStrategy,
    RemediationStrategy, RollingUpdate,
};
pub use machinehealthcheck::{
    MachineHealthCheck, MachineHealthCheckSpec, MachineHealthCheckStatus, UnhealthyCondition,
    UnhealthyMachine,
};
pub use machineset::{MachineNamingStrategy, MachineSet, MachineSetSpec, MachineSetStatus};

/// The API group of the core kinds.
pub const GROUP: &str = "cluster.x-k8s.io";
/// The version trellis stores and serves.
pub const VERSION: &str = "v1beta1";
/// `apiVersion` of the core kinds.
pub const API_VERSION: &str = "cluster.x-k8s.io/v1beta1";

/// The CRDs of the core kinds, Cluster first because everything names it.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Cluster::crd(),
        Machine::crd(),
        MachineSet::crd(),
        MachineDeployment::crd(),
        MachineHealthCheck::crd(),
    ]
}

/// Any CRDs as one multi-document YAML stream, ready for `kubectl apply -f`.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> String {
    crds.iter()
        .map(|crd| serde_yaml::to_string(crd).expect("a CRD always serializes to YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// [`crds`] as YAML.
pub fn crds_yaml() -> String {
    to_yaml(&crds())
}
