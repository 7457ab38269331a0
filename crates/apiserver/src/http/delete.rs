//! DELETE of one object: DeleteOptions from the body and query, the
//! kind's own check on deleting (immortal namespaces), then the storage
//! layer's delete with the admission chain as its check.

use apimachinery::ApiError;
use http::StatusCode;

use crate::admission::DeleteAdmission;
use crate::http::body::delete_options;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;

pub async fn delete(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let opts = delete_options(&ctx.body, ctx.query)?;
    // An admission check, so it comes before existence and holds for dry
    // runs too.
    ctx.res.strategy.check_delete(&ctx.res, name)?;
    let check = DeleteAdmission {
        chain: &ctx.api.admission,
        resource: &ctx.res,
        namespace: ctx.ns(),
        name,
        dry_run: opts.dry_run,
    };
    let out = ctx
        .api
        .storage
        .delete(&ctx.res, ctx.ns(), name, &opts, &check)
        .await?;
    Ok(Reply::output(StatusCode::OK, out))
}
