//! DELETE on a collection: every object the namespace, label and field
//! selectors match is deleted as one DELETE would; the deleted objects come
//! back as a list.

use apimachinery::ApiError;
use http::StatusCode;
use serde_json::json;

use crate::admission::DeleteAdmission;
use crate::http::body::delete_options;
use crate::http::list::filter_from_query;
use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::object;
use crate::storage::codec;
use crate::storage::select::Summary;

pub async fn delete_collection(ctx: &Ctx<'_>) -> Result<Reply, ApiError> {
    let opts = delete_options(&ctx.body, ctx.query)?;
    let filter = filter_from_query(&ctx.res, ctx.ns(), ctx.query)?;
    let prefix = match ctx.ns() {
        Some(ns) => ctx.res.namespace_prefix(ns),
        None => ctx.res.prefix(),
    };
    let kvs = ctx.api.storage.range(&prefix).await?;
    let mut items = Vec::new();
    for kv in kvs {
        let v = codec::to_served(&ctx.res, codec::decode(&kv.value, kv.mod_revision)?);
        if !filter.matches(&Summary::of(&v, &ctx.res.selectable_fields())) {
            continue;
        }
        let ns = object::meta_str(&v, "namespace").map(str::to_string);
        let name = object::name(&v);
        let check = DeleteAdmission {
            chain: &ctx.api.admission,
            resource: &ctx.res,
            namespace: ns.as_deref(),
            name,
            dry_run: opts.dry_run,
        };
        match ctx
            .api
            .storage
            .delete(&ctx.res, ns.as_deref(), name, &opts, &check)
            .await
        {
            Ok(_) => items.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let list = json!({
        "kind": ctx.res.list_kind,
        "apiVersion": ctx.res.api_version(),
        "metadata": {"resourceVersion": ctx.api.storage.store().current_revision().to_string()},
        "items": items,
    });
    Ok(Reply::value(StatusCode::OK, &list))
}
