//! Secrets: `stringData` is write-only and folded into `data` (base64)
//! before the object is stored; the type defaults to `Opaque`.

use apimachinery::{ApiError, Cause};
use k8s_openapi::api::core::v1 as core;
use serde_json::{Map, Value, json};

use crate::storage::registry::{Resource, Strategy};

#[derive(Debug)]
pub struct Secret;

impl Strategy for Secret {
    fn apply_defaults(&self, _res: &Resource, obj: &mut Value) {
        super::defaults::on(obj, super::defaults::secret);
    }

    fn normalize(&self, res: &Resource, obj: &mut Value) {
        self.apply_defaults(res, obj);
        if let Some(m) = obj.as_object_mut()
            && let Some(Value::Object(sd)) = m.remove("stringData")
        {
            use base64::Engine as _;
            let data = m.entry("data").or_insert_with(|| Value::Object(Map::new()));
            if !data.is_object() {
                *data = Value::Object(Map::new());
            }
            if let Some(d) = data.as_object_mut() {
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    d.insert(
                        k,
                        json!(base64::engine::general_purpose::STANDARD.encode(s)),
                    );
                }
            }
        }
    }

    fn validate(&self, _res: &Resource, obj: &Value) -> Result<Vec<Cause>, ApiError> {
        super::typed::<core::Secret>(obj)?;
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_data_is_folded_into_data_and_type_defaults() {
        let res = crate::strategy::resources()
            .into_iter()
            .find(|r| r.kind == "Secret")
            .unwrap();
        let mut s = json!({"metadata": {"name": "s"}, "stringData": {"a": "hi"}});
        Secret.normalize(&res, &mut s);
        assert_eq!(s["data"]["a"], "aGk=");
        assert_eq!(s["type"], "Opaque");
        assert!(s.get("stringData").is_none());
        assert!(Secret.validate(&res, &s).unwrap().is_empty());
    }
}
