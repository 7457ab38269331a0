//! The HTTP side of admission for creates and updates: unknown and
//! duplicate fields per `fieldValidation` (they are only visible in the
//! request), schema processing of custom resources, then the admission
//! layer's [`crate::admission::admit`] with the request's attributes.

use apimachinery::ApiError;
use serde_json::Value;

use crate::admission::{self, Attributes, Operation};
use crate::http::fieldvalidation;
use crate::http::resource::Ctx;

/// Admission, schema processing and validation shared by create and update.
/// Returns warnings (unknown fields under `fieldValidation=Warn`, and the
/// admission plugins').
pub async fn admit_and_validate(
    ctx: &Ctx<'_>,
    op: Operation,
    sub: Option<&str>,
    name: &str,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    let res = &ctx.res;
    let dry_run = ctx.query.dry_run()?;
    let mut causes = Vec::new();
    let mode = fieldvalidation::mode(ctx.query)?;
    let mut unknown = Vec::new();
    if let Some(schema) = &res.schema {
        let processed = schema.process(obj, "");
        unknown = processed.pruned;
        causes.extend(processed.causes);
    } else if res.builtin {
        unknown = crate::http::openapi::prune_unknown(res, obj);
    }
    // Duplicate keys are only visible in a JSON body that is the object
    // itself (create, update), not in patches.
    let media = ctx.content_type().split(';').next().unwrap_or("").trim();
    let duplicates = if mode != fieldvalidation::Mode::Ignore
        && (media == "application/json" || media == "*/*")
    {
        fieldvalidation::duplicate_fields(&ctx.body)
    } else {
        Vec::new()
    };
    let mut warnings = fieldvalidation::outcome(mode, &unknown, &duplicates)?;
    let attrs = Attributes {
        operation: op,
        resource: res,
        subresource: sub,
        namespace: ctx.ns(),
        name,
        old,
        dry_run,
        user: admission::current_user(),
    };
    warnings.extend(admission::admit(&ctx.api.admission, &attrs, obj, causes).await?);
    Ok(warnings)
}
