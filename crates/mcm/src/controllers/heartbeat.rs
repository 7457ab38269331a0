//! The heartbeat: while the controllers run, they renew the Lease
//! [`crate::serving::HEARTBEAT_LEASE`] in the namespace they serve, and
//! release it (no holder) when they stop cleanly, so admission and `trellis
//! status` can tell a namespace nobody serves from one that is served
//! ([`crate::serving::served`]).
//!
//! This is not leader election: every process that runs the controllers
//! for a namespace renews it (two at once is a misconfiguration the
//! holder flipping between them makes visible). Writes are best effort: a
//! failed renewal is retried next period, and a Lease that is not renewed
//! simply reads as stale.

use std::future::Future;

use chrono::Utc;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

use crate::serving::{HEARTBEAT_DURATION_SECONDS, HEARTBEAT_LEASE, HEARTBEAT_PERIOD};

fn now() -> MicroTime {
    MicroTime(crate::time::to_time(Utc::now()).0)
}

/// The Lease `lease` with `identity` as holder, renewed now; a new holder
/// gets a new acquire time and counts as a transition.
pub fn renewed(lease: Option<Lease>, ns: &str, identity: &str) -> Lease {
    let mut lease = lease.unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(HEARTBEAT_LEASE.to_string()),
            namespace: Some(ns.to_string()),
            ..ObjectMeta::default()
        },
        spec: None,
    });
    let mut spec = lease.spec.take().unwrap_or_default();
    let now = now();
    if spec.holder_identity.as_deref() != Some(identity) {
        if spec.holder_identity.is_some() {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(identity.to_string());
        spec.acquire_time = Some(now.clone());
    }
    spec.renew_time = Some(now);
    spec.lease_duration_seconds = Some(HEARTBEAT_DURATION_SECONDS);
    lease.spec = Some(spec);
    lease
}

async fn renew(api: &Api<Lease>, ns: &str, identity: &str) -> Result<(), kube::Error> {
    match api.get_opt(HEARTBEAT_LEASE).await? {
        None => {
            api.create(&PostParams::default(), &renewed(None, ns, identity))
                .await?;
        }
        Some(lease) => {
            // Guarded by the resourceVersion read above.
            api.replace(
                HEARTBEAT_LEASE,
                &PostParams::default(),
                &renewed(Some(lease), ns, identity),
            )
            .await?;
        }
    }
    Ok(())
}

/// Gives the heartbeat up if this process holds it.
async fn release(api: &Api<Lease>, identity: &str) {
    let Ok(Some(mut lease)) = api.get_opt(HEARTBEAT_LEASE).await else {
        return;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    if spec.holder_identity.as_deref() != Some(identity) {
        return;
    }
    lease.spec = Some(LeaseSpec {
        holder_identity: None,
        renew_time: Some(now()),
        ..spec
    });
    if let Err(e) = api
        .replace(HEARTBEAT_LEASE, &PostParams::default(), &lease)
        .await
    {
        tracing::debug!(error = %e, "releasing the heartbeat lease failed; it runs out instead");
    }
}

/// Renews the heartbeat of namespace `ns` every [`HEARTBEAT_PERIOD`] until
/// `shutdown`, then releases it.
pub async fn run(
    client: kube::Client,
    ns: String,
    identity: String,
    shutdown: impl Future<Output = ()> + Send,
) {
    let api: Api<Lease> = Api::namespaced(client, &ns);
    futures::pin_mut!(shutdown);
    loop {
        if let Err(e) = renew(&api, &ns, &identity).await {
            // A namespace being deleted refuses new objects; anything else
            // is retried next period. Either way the controllers go on.
            tracing::debug!(namespace = %ns, error = %e, "renewing the heartbeat lease failed");
        }
        tokio::select! {
            _ = tokio::time::sleep(HEARTBEAT_PERIOD) => {}
            _ = &mut shutdown => break,
        }
    }
    release(&api, &identity).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_keep_the_holder_and_count_takeovers() {
        let first = renewed(None, "ns", "a");
        assert_eq!(first.metadata.name.as_deref(), Some(HEARTBEAT_LEASE));
        assert_eq!(first.metadata.namespace.as_deref(), Some("ns"));
        let spec = first.spec.clone().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(
            spec.lease_duration_seconds,
            Some(HEARTBEAT_DURATION_SECONDS)
        );
        assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
        assert_eq!(spec.lease_transitions, None);

        let again = renewed(Some(first.clone()), "ns", "a").spec.unwrap();
        assert_eq!(again.acquire_time, spec.acquire_time, "same holder");
        assert_eq!(again.lease_transitions, None);

        let other = renewed(Some(first), "ns", "b").spec.unwrap();
        assert_eq!(other.holder_identity.as_deref(), Some("b"));
        assert_eq!(other.lease_transitions, Some(1));

        // A released lease (no holder) is taken without a transition.
        let mut released = renewed(None, "ns", "a");
        released.spec.as_mut().unwrap().holder_identity = None;
        let taken = renewed(Some(released), "ns", "b").spec.unwrap();
        assert_eq!(taken.lease_transitions, None);
    }
}
