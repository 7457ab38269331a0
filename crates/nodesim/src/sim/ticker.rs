//! The ticker: plans what is due (at every tick, or sooner when woken)
//! and runs the jobs, bounded by the shared permits.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{Job, Shared, Timestamp};

/// The shortest time between two plans brought on by wake-ups: every
/// finished job wakes the ticker, and wake-ups within the gap are served
/// by one plan (of the nodes touched since the last, see `Shared::plan`).
pub(super) const PLAN_GAP: Duration = Duration::from_millis(50);

/// Waits for the next tick, a wake-up (no sooner than [`PLAN_GAP`] after
/// the last plan), or the stop signal; false on stop.
async fn pause(
    shared: &Shared,
    stop: &mut watch::Receiver<bool>,
    last: tokio::time::Instant,
) -> bool {
    let woken = async {
        shared.wake.notified().await;
        tokio::time::sleep_until(last + PLAN_GAP.min(shared.cfg.tick)).await;
    };
    tokio::select! {
        _ = tokio::time::sleep(shared.cfg.tick) => true,
        _ = woken => true,
        r = stop.changed() => r.is_ok() && !*stop.borrow(),
    }
}

pub(super) async fn run_ticker(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut last = tokio::time::Instant::now();
    while pause(&shared, &mut stop, last).await {
        last = tokio::time::Instant::now();
        let jobs = shared.plan(Timestamp::now());
        for job in jobs {
            let permit = tokio::select! {
                p = shared.permits.clone().acquire_owned() => p.expect("semaphore never closed"),
                _ = stop.changed() => return,
            };
            let sh = shared.clone();
            tokio::spawn(async move {
                match job {
                    Job::Node(j) => {
                        let (name, generation) = (j.name.clone(), j.generation);
                        let out = sh.run_node_job(j).await;
                        sh.apply_node_outcome(&name, generation, out);
                    }
                    Job::Pod(j) => {
                        let (key, uid) = (j.key.clone(), j.uid.clone());
                        let result = sh.run_pod_job(j).await;
                        sh.apply_pod_outcome(&key, &uid, result);
                    }
                }
                drop(permit);
            });
        }
    }
}
