//! Hot update (seed 003 §2.2.3): whether the class's provider spec differs
//! from the one last applied to the VM.

use api::Machine;
use serde_json::Value;

use super::annotation;

/// Annotation on a machine with the class `providerSpec` (JSON) its VM was
/// created with or last hot-updated to.
pub const LAST_APPLIED_PROVIDER_SPEC: &str = "machine.sapcloud.io/last-applied-provider-spec";

/// Whether the class's provider spec differs from what the VM has, and if
/// so what was applied last (`None` inside for a machine that has no
/// record). Which fields can change without a new VM is the driver's call:
/// `UpdateMachine` applies them and refuses the rest; MCM itself never
/// rolls machines out for class changes.
pub fn hot_update_needed(m: &Machine, provider_spec: &Value) -> Option<Option<Value>> {
    let applied: Option<Value> = annotation(&m.metadata, LAST_APPLIED_PROVIDER_SPEC)
        .and_then(|s| serde_json::from_str(s).ok());
    match &applied {
        Some(a) if a == provider_spec => None,
        _ => Some(applied),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::testing::Fixture;
    use serde_json::json;

    #[test]
    fn hot_updates() {
        let spec = json!({"tags": {"a": "1"}});
        let m = Machine::test("m1");
        assert_eq!(hot_update_needed(&m, &spec), Some(None));
        let m = m.annotation(LAST_APPLIED_PROVIDER_SPEC, r#"{"tags":{"a":"1"}}"#);
        assert_eq!(hot_update_needed(&m, &spec), None);
        let changed = json!({"tags": {"a": "2"}});
        assert_eq!(
            hot_update_needed(&m, &changed),
            Some(Some(json!({"tags": {"a": "1"}})))
        );
    }
}
