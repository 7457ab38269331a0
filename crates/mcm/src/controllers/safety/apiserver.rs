//! The API-server probe (spec §5): the control and target API servers
//! probed every `--machine-safety-apiserver-statuscheck-period`; down for
//! longer than the timeout freezes the machine controller, and the
//! recovery restarts the health clocks before it is unfrozen.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::Duration;

use api::{Machine, MachinePhase};
use chrono::Utc;
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};

use super::{CONFLICT_ATTEMPTS, SafetyState, is_status};
use crate::controllers::context::Error;
use crate::safety::{self, ApiServerHealth, Outage, ProbeChange};
use crate::time::{to_chrono, to_time};

/// A probe that takes longer than this counts as failed.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// A name no Machine or Node has: its GET answers NotFound from a healthy
/// API server.
const PROBE_NAME: &str = "trellis-safety-apiserver-probe";

/// A check of the API servers the controllers depend on.
pub trait Probe: Send + Sync {
    /// `Ok` when every API server answered; `Err` says which did not.
    fn probe(&self) -> BoxFuture<'_, Result<(), String>>;
}

/// GETs a Machine and a Node that do not exist: NotFound (or, should
/// they exist, the object) means the server answers. Without a target
/// cluster only the control cluster is probed.
pub struct ApiServerProbe {
    pub control: kube::Client,
    pub target: Option<kube::Client>,
    pub namespace: String,
}

fn answered<K>(r: Result<K, kube::Error>, which: &str) -> Result<(), String> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => Ok(()),
        Err(e) => Err(format!("{which} API server: {e}")),
    }
}

impl Probe for ApiServerProbe {
    fn probe(&self) -> BoxFuture<'_, Result<(), String>> {
        async move {
            let machines: Api<Machine> = Api::namespaced(self.control.clone(), &self.namespace);
            let node = async {
                match &self.target {
                    Some(target) => Some(Api::<Node>::all(target.clone()).get(PROBE_NAME).await),
                    None => None,
                }
            };
            let (m, n) = futures::join!(machines.get(PROBE_NAME), node);
            answered(m, "control")?;
            n.map_or(Ok(()), |n| answered(n, "target"))
        }
        .boxed()
    }
}

/// Probes every `period` (every `timeout / 5` while probes fail, so the
/// freeze lands close to `timeout`) and keeps `state` current. After a
/// freeze, the first good probe runs `recover` with the outage; only when
/// it succeeds is the controller unfrozen and every machine requeued.
pub async fn watch_api_servers<F, Fut>(
    state: &SafetyState,
    probe: &dyn Probe,
    period: Duration,
    timeout: Duration,
    mut recover: F,
    shutdown: impl Future<Output = ()>,
) where
    F: FnMut(Outage) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    tokio::pin!(shutdown);
    let mut health = ApiServerHealth::default();
    let probe_timeout = timeout.clamp(Duration::from_millis(100), PROBE_TIMEOUT);
    loop {
        let ok = match tokio::time::timeout(probe_timeout, probe.probe()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "API server probe failed");
                false
            }
            Err(_) => {
                tracing::warn!("API server probe timed out");
                false
            }
        };
        state.reachable.store(ok, Ordering::SeqCst);
        match health.observe(ok, Utc::now(), timeout) {
            ProbeChange::None => {}
            ProbeChange::Freeze => {
                state.frozen.store(true, Ordering::SeqCst);
                tracing::error!(
                    ?timeout,
                    "API server unreachable for longer than the timeout: machine controller frozen"
                );
            }
            ProbeChange::Recover(outage) => match recover(outage).await {
                Ok(()) => {
                    health.recovered(Utc::now());
                    state.frozen.store(false, Ordering::SeqCst);
                    state.requeue_all_machines();
                    tracing::info!(
                        outage_since = %outage.since,
                        "API servers reachable again: machine controller unfrozen"
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "recovery after the API server outage failed; staying frozen")
                }
            },
        }
        let wait = if ok && !health.frozen() {
            period
        } else {
            (timeout / 5).max(Duration::from_millis(10))
        };
        tokio::select! {
            _ = &mut shutdown => return,
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

/// The recovery after an outage: the health-timeout clock of every
/// `Unknown` machine stops for the outage
/// ([`safety::health_clock_after_outage`]); phases are left to the machine
/// controller, which decides them from the nodes as they are now. Returns
/// how many machines were updated.
pub async fn restart_health_clocks(api: &Api<Machine>, outage: &Outage) -> Result<usize, Error> {
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("machines", e))?;
    let mut updated = 0;
    for m in list.items {
        let name = m.name_any();
        let mut m = m;
        for attempt in 0..CONFLICT_ATTEMPTS {
            if m.metadata.deletion_timestamp.is_some() || m.phase() != Some(MachinePhase::Unknown) {
                break;
            }
            let st = m.status.get_or_insert_default();
            let Some(since) = st.current_status.last_update_time.as_ref().map(to_chrono) else {
                break;
            };
            let moved = safety::health_clock_after_outage(since, outage);
            if moved == since {
                break;
            }
            st.current_status.last_update_time = Some(to_time(moved));
            match api.replace_status(&name, &PostParams::default(), &m).await {
                Ok(_) => {
                    updated += 1;
                    tracing::info!(machine = %name, from = %since, to = %moved, "health timeout clock moved past the API server outage");
                    break;
                }
                Err(e) if is_status(&e, 404) => break,
                Err(e) if is_status(&e, 409) && attempt + 1 < CONFLICT_ATTEMPTS => {
                    match api
                        .get_opt(&name)
                        .await
                        .map_err(|e| Error::api(format!("machine {name}"), e))?
                    {
                        Some(fresh) => m = fresh,
                        None => break,
                    }
                }
                Err(e) => return Err(Error::api(format!("status of machine {name}"), e)),
            }
        }
    }
    Ok(updated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use tokio::time::Instant;

    /// A probe that answers from a switch the test flips.
    struct FakeProbe(Arc<AtomicBool>);

    impl Probe for FakeProbe {
        fn probe(&self) -> BoxFuture<'_, Result<(), String>> {
            let up = self.0.load(Ordering::SeqCst);
            async move {
                if up {
                    Ok(())
                } else {
                    Err("injected outage".into())
                }
            }
            .boxed()
        }
    }

    async fn until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn the_frozen_flag_follows_the_probe() {
        let state = Arc::new(SafetyState::default());
        let up = Arc::new(AtomicBool::new(true));
        let probe = FakeProbe(up.clone());
        let outages: Arc<Mutex<Vec<Outage>>> = Arc::default();
        let fail_recovery = Arc::new(AtomicBool::new(true));
        let requeues = state.machine_requeues();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (s, o, f) = (state.clone(), outages.clone(), fail_recovery.clone());
        let task = tokio::spawn(async move {
            let recover = |outage: Outage| {
                o.lock().push(outage);
                let fail = f.load(Ordering::SeqCst);
                async move {
                    if fail {
                        Err(Error::Encode("injected recovery failure".into()))
                    } else {
                        Ok(())
                    }
                }
            };
            watch_api_servers(
                &s,
                &probe,
                Duration::from_millis(20),
                Duration::from_millis(200),
                recover,
                async {
                    let _ = stop_rx.await;
                },
            )
            .await
        });
        until("the first probe", || state.reachable()).await;
        assert!(!state.frozen() && state.may_collect_orphans());

        let down_at = Instant::now();
        up.store(false, Ordering::SeqCst);
        until("unreachable", || !state.reachable()).await;
        assert!(!state.frozen(), "not frozen before the timeout");
        assert!(!state.may_collect_orphans(), "orphans wait at once");
        until("frozen", || state.frozen()).await;
        assert!(down_at.elapsed() >= Duration::from_millis(200));

        // Back up, but the recovery fails: still frozen, retried.
        up.store(true, Ordering::SeqCst);
        until("two recovery attempts", || outages.lock().len() >= 2).await;
        assert!(state.frozen() && !state.may_collect_orphans());
        fail_recovery.store(false, Ordering::SeqCst);
        until("unfrozen", || !state.frozen()).await;
        assert!(state.may_collect_orphans());
        let o = outages.lock().clone();
        assert!(
            o.windows(2)
                .all(|w| w[0].since == w[1].since && w[0].until <= w[1].until)
        );
        // Every machine is requeued once the freeze ends.
        futures::pin_mut!(requeues);
        assert!(
            tokio::time::timeout(Duration::from_secs(1), requeues.next())
                .await
                .is_ok()
        );
        let _ = stop_tx.send(());
        task.await.unwrap();
    }
}
