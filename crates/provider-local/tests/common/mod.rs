//! What the provider tests share beyond the test kit (whose embedded
//! cluster serves as both control and target cluster): the class fixture.

#![allow(dead_code)]

use std::collections::BTreeMap;

use api::MachineClass;
use driver::conformance::ClassFixture;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

pub use testkit::bare_cluster as start;
pub use testkit::sim::fast;

/// A local class in namespace `default` with the given provider spec, and
/// its secret.
pub fn class(name: &str, provider_spec: Value) -> ClassFixture {
    let mut machine_class = MachineClass::new(name, "local", provider_spec);
    machine_class.metadata.namespace = Some("default".into());
    ClassFixture {
        machine_class,
        secret: Secret {
            metadata: ObjectMeta {
                name: Some(format!("{name}-secret")),
                namespace: Some("default".into()),
                ..ObjectMeta::default()
            },
            string_data: Some(BTreeMap::from([(
                "userData".to_string(),
                "#cloud-config".to_string(),
            )])),
            ..Secret::default()
        },
    }
}
