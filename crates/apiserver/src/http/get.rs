//! GET of one object (and of its `/status`), as JSON or as the Table or
//! PartialObjectMetadata the Accept header asks for.

use apimachinery::ApiError;

use crate::http::reply::Reply;
use crate::http::resource::Ctx;
use crate::storage::codec;

pub async fn get(ctx: &Ctx<'_>, name: &str) -> Result<Reply, ApiError> {
    let kv = ctx
        .api
        .storage
        .get(&ctx.key(name))
        .await?
        .ok_or_else(|| ctx.not_found(name))?;
    crate::http::table::get_reply(ctx, codec::render(&ctx.res, &kv.value, kv.mod_revision)?)
}
