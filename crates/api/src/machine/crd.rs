//! CustomResourceDefinitions generated from the types, so the manifests can
//! never drift from the Rust structs.
//!
//! Names, short names, printer columns and subresources follow upstream's
//! generated CRDs (`kubernetes/crds/machine.sapcloud.io_*.yaml`): short names
//! `mcc`, `mc`, `mcs`, `mcd`; no categories; status on the three controlled
//! kinds and scale on machine sets and deployments without a label selector
//! path. Schemas go through kube's structural rewrites, the same pipeline the
//! `CustomResource` derive uses.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
    CustomResourceDefinitionVersion, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::crd::v1::CustomResourceExt;

use super::machine_class::MachineClass;
use super::machine_deployment::MachineDeployment;
use super::machine_set::MachineSet;
use super::types::Machine;

/// The CRDs of all four kinds, classes first because machines refer to them.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        MachineClass::crd(),
        Machine::crd(),
        MachineSet::crd(),
        MachineDeployment::crd(),
    ]
}

/// [`crds`] as one multi-document YAML stream, ready for `kubectl apply -f`.
pub fn crds_yaml() -> String {
    crds()
        .iter()
        .map(|crd| serde_yaml::to_string(crd).expect("a CRD always serializes to YAML"))
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The schema of `T` as the `CustomResource` derive would generate it.
fn structural_schema<T: schemars::JsonSchema>() -> JSONSchemaProps {
    let generator = schemars::generate::SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(schemars::transform::AddNullable::default())
        .with_transform(kube::core::schema::StructuralSchemaRewriter)
        .with_transform(kube::core::schema::OptionalEnum)
        .with_transform(kube::core::schema::OptionalIntOrString)
        .into_generator();
    serde_json::to_value(generator.into_root_schema_for::<T>())
        .and_then(serde_json::from_value)
        .expect("schemars output is a valid JSONSchemaProps")
}

impl CustomResourceExt for MachineClass {
    fn crd() -> CustomResourceDefinition {
        let mut schema = structural_schema::<MachineClass>();
        // Upstream requires the provider spec; `serde(default)` keeps schemars
        // from saying so, because Rust callers may still build classes
        // without one.
        schema.required = Some(vec!["providerSpec".to_string()]);
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(Self::crd_name().to_string()),
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: crate::API_GROUP.to_string(),
                names: CustomResourceDefinitionNames {
                    kind: "MachineClass".to_string(),
                    list_kind: None,
                    plural: "machineclasses".to_string(),
                    singular: Some("machineclass".to_string()),
                    short_names: Some(vec!["mcc".to_string()]),
                    categories: None,
                },
                scope: "Namespaced".to_string(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: crate::API_VERSION.to_string(),
                    served: true,
                    storage: true,
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(schema),
                    }),
                    ..CustomResourceDefinitionVersion::default()
                }],
                ..CustomResourceDefinitionSpec::default()
            },
            status: None,
        }
    }

    fn crd_name() -> &'static str {
        "machineclasses.machine.sapcloud.io"
    }

    fn api_resource() -> kube::core::ApiResource {
        kube::core::ApiResource::erase::<Self>(&())
    }

    fn shortnames() -> &'static [&'static str] {
        &["mcc"]
    }
}
