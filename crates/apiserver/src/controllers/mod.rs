//! The controllers an API server runs itself, on the storage layer: the
//! garbage collector ([`gc`]), namespace lifecycle ([`namespace`]), CRD
//! lifecycle ([`crd`]), the disruption controller keeping budgets' status
//! current ([`pdb`]), event expiry ([`events`]) and every namespace's
//! `default` ServiceAccount ([`serviceaccount`]).
//!
//! They read and write through [`Storage`] and delete through it with the
//! admission chain as the check (so admission plugins see the server's own
//! deletions, without a user), never through the HTTP verbs.

pub mod crd;
pub mod events;
pub mod gc;
pub mod namespace;
pub mod pdb;
pub mod serviceaccount;

use std::sync::Arc;
use std::time::Duration;

use apimachinery::ApiError;

use crate::admission::{Chain, DeleteAdmission};
use crate::storage::registry::{Registry, Resource};
use crate::storage::{DeleteOptions, Storage};

/// What the controllers work with.
pub struct Context {
    pub storage: Arc<Storage>,
    pub registry: Arc<Registry>,
    pub admission: Arc<Chain>,
    /// How long core/v1 events live.
    pub event_ttl: Duration,
}

impl Context {
    /// Deletes one object as a DELETE request would, with the admission
    /// chain as the check.
    pub async fn delete(
        &self,
        res: &Resource,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(), ApiError> {
        let check = DeleteAdmission {
            chain: &self.admission,
            resource: res,
            namespace: ns,
            name,
            dry_run: opts.dry_run,
        };
        self.storage.delete(res, ns, name, opts, &check).await?;
        Ok(())
    }
}

/// Starts every controller on the current runtime.
pub fn spawn_all(ctx: Arc<Context>) {
    gc::spawn(ctx.clone());
    namespace::spawn(ctx.clone());
    crd::spawn(ctx.clone());
    pdb::spawn(ctx.clone());
    serviceaccount::spawn(ctx.clone());
    events::spawn(ctx);
}

#[cfg(test)]
mod tests;
