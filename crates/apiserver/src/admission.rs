//! The admission chain: in-process plugins that other crates implement.
//! Mutating plugins run first, in registration order, then validating ones;
//! either may reject a request with an [`ApiError`].

use serde_json::Value;

use apimachinery::ApiError;

use crate::registry::Resource;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub fn as_str(&self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What is being admitted.
pub struct Attributes<'a> {
    pub operation: Operation,
    pub resource: &'a Resource,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// The object before the request (updates and deletes).
    pub old: Option<&'a Value>,
    pub dry_run: bool,
    /// Who sent the request; `None` for the server's own controllers and
    /// when authentication is off.
    pub user: Option<std::sync::Arc<crate::auth::UserInfo>>,
}

/// An admission plugin. Both hooks default to admitting unchanged.
#[async_trait::async_trait]
pub trait AdmissionPlugin: Send + Sync {
    fn name(&self) -> &str;

    /// May change the object (create and update only).
    async fn mutate(&self, _attrs: &Attributes<'_>, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// May reject the object; for deletes `obj` is the object being deleted.
    async fn validate(&self, _attrs: &Attributes<'_>, _obj: &Value) -> Result<(), ApiError> {
        Ok(())
    }
}
