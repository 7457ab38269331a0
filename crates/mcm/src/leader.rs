//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! controller processes only one acts at a time (spec §0: lease 15 s, renew
//! deadline 10 s, retry 2 s; losing the lease ends the process).
//!
//! The protocol is client-go's. Every write is a compare-and-swap on the
//! Lease's resourceVersion, so two candidates never both win one round.
//! Expiry is judged on this process's own monotonic clock, never by
//! comparing the holder's `renewTime` with our wall clock: a candidate
//! takes the lease only after it has seen the same record unchanged for the
//! record's `leaseDurationSeconds`. The holder stops acting once it has not
//! renewed for the renew deadline, which is shorter than the lease
//! duration, so the old leader has stopped before anyone else can acquire.
//! A clean shutdown releases the lease (empty holder), so a successor takes
//! over at once instead of waiting for the lease to run out.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use parking_lot::Mutex;
use rand::Rng;

/// How long a lease is valid, how long the holder keeps trying to renew
/// before it gives up, and how often candidates and the holder try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTiming {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    /// Upstream's `--leader-elect-lease-duration`, `--leader-elect-renew-deadline`
    /// and `--leader-elect-retry-period`.
    fn default() -> Self {
        LeaseTiming {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTiming {
    /// The renew deadline must leave the holder time to stop before the
    /// lease can be taken over, and retries must fit in the deadline.
    pub fn validate(&self) -> Result<(), String> {
        if self.renew_deadline >= self.lease_duration {
            return Err("the renew deadline must be shorter than the lease duration".into());
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(
                "the retry period must be positive and shorter than the renew deadline".into(),
            );
        }
        if self.lease_duration.as_secs() < 1 {
            return Err("the lease duration must be at least one second".into());
        }
        Ok(())
    }
}

/// A unique identity for this process: the host name and a random suffix,
/// as client-go does, so two processes on one host never share a lease.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "trellis".into());
    let suffix: u64 = rand::rng().random();
    format!("{host}_{suffix:016x}")
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("leader election lost: the lease {0} was not renewed within the renew deadline")]
    RenewDeadline(String),
    #[error("leader election lost: {holder} took the lease {lease}")]
    TakenOver { lease: String, holder: String },
}

/// The part of a Lease record whose change proves its holder is alive.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: String,
    renew_time: Option<MicroTime>,
    acquire_time: Option<MicroTime>,
    transitions: i32,
    duration_seconds: i32,
}

impl Record {
    fn of(spec: &LeaseSpec) -> Record {
        Record {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            renew_time: spec.renew_time.clone(),
            acquire_time: spec.acquire_time.clone(),
            transitions: spec.lease_transitions.unwrap_or(0),
            duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
        }
    }
}

/// What one attempt found.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the lease now (acquired or renewed).
    Held,
    /// Someone else holds a lease that has not expired.
    HeldBy(String),
    /// Another candidate wrote first; try again next round.
    Raced,
}

/// One candidate for one Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
    /// The record last seen and when (our monotonic clock) it last changed.
    observed: Mutex<Option<(Record, Instant)>>,
    /// When the last successful acquire or renew was sent: the holder's
    /// renew deadline counts from the moment before the write, which is
    /// never later than anyone's observation of it.
    renewed: Mutex<Option<Instant>>,
}

impl LeaderElector {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timing: LeaseTiming,
    ) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timing,
            observed: Mutex::new(None),
            renewed: Mutex::new(None),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Waits until this candidate holds the lease. API errors are retried
    /// every retry period (with jitter, so candidates spread out).
    pub async fn acquire(&self) {
        let mut logged_holder = String::new();
        loop {
            match tokio::time::timeout(self.timing.renew_deadline, self.try_acquire_or_renew())
                .await
            {
                Ok(Ok(Attempt::Held)) => {
                    tracing::info!(lease = %self.name, identity = %self.identity, "acquired the leader lease");
                    return;
                }
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    if holder != logged_holder {
                        tracing::info!(lease = %self.name, %holder, "waiting for the leader lease");
                        logged_holder = holder;
                    }
                }
                Ok(Ok(Attempt::Raced)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.name, error = %e, "acquiring the leader lease")
                }
                Err(_) => {
                    tracing::warn!(lease = %self.name, "acquiring the leader lease timed out")
                }
            }
            tokio::time::sleep(jittered(self.timing.retry_period)).await;
        }
    }

    /// Renews the lease every retry period while it is held; returns why
    /// leadership was lost: no successful renewal within the renew
    /// deadline, or another holder in the record. Never returns while the
    /// lease is held.
    pub async fn hold(&self) -> Error {
        let renewed = || self.renewed.lock().unwrap_or_else(Instant::now);
        loop {
            tokio::time::sleep(self.timing.retry_period).await;
            let left = self
                .timing
                .renew_deadline
                .saturating_sub(renewed().elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(Attempt::Held)) => {}
                Ok(Ok(Attempt::HeldBy(holder))) => {
                    return Error::TakenOver {
                        lease: self.name.clone(),
                        holder,
                    };
                }
                // A lost race or an API error: retry until the deadline.
                Ok(Ok(Attempt::Raced)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.name, error = %e, "renewing the leader lease")
                }
                Err(_) => {}
            }
            if renewed().elapsed() >= self.timing.renew_deadline {
                return Error::RenewDeadline(self.name.clone());
            }
        }
    }

    /// Gives the lease up (empty holder, one-second duration) if this
    /// candidate still holds it, so a successor need not wait for it to
    /// expire. Best effort: on failure the lease simply runs out.
    pub async fn release(&self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return;
        }
        let now = MicroTime(Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(now.clone()),
            acquire_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..LeaseSpec::default()
        });
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the leader lease"),
            Err(e) => tracing::warn!(lease = %self.name, error = %e, "releasing the leader lease"),
        }
    }

    /// Remembers `record`, restarting the expiry clock when it changed.
    fn observe(&self, record: Record) -> Instant {
        let mut observed = self.observed.lock();
        match observed.as_ref() {
            Some((old, at)) if *old == record => *at,
            _ => {
                let now = Instant::now();
                *observed = Some((record, now));
                now
            }
        }
    }

    async fn try_acquire_or_renew(&self) -> Result<Attempt, kube::Error> {
        let started = Instant::now();
        let now = MicroTime(Timestamp::now());
        let duration_seconds = self
            .timing
            .lease_duration
            .as_secs()
            .clamp(1, i32::MAX as u64) as i32;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let spec = LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(duration_seconds),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            };
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observe(Record::of(&spec));
                    *self.renewed.lock() = Some(started);
                    Ok(Attempt::Held)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Raced),
                Err(e) => Err(e),
            };
        };
        let old = lease.spec.clone().unwrap_or_default();
        let record = Record::of(&old);
        let seen_since = self.observe(record.clone());
        let ours = record.holder == self.identity;
        if !record.holder.is_empty() && !ours {
            let valid_for = Duration::from_secs(record.duration_seconds.max(0) as u64);
            if seen_since.elapsed() < valid_for {
                return Ok(Attempt::HeldBy(record.holder));
            }
        }
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_seconds),
            acquire_time: if ours {
                old.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if ours {
                record.transitions
            } else {
                record.transitions + 1
            }),
            ..old
        };
        lease.spec = Some(spec.clone());
        // `replace` sends the resourceVersion we read: a write by anyone
        // since then makes this a 409 instead of overwriting it.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observe(Record::of(&spec));
                *self.renewed.lock() = Some(started);
                Ok(Attempt::Held)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Attempt::Raced),
            Err(e) => Err(e),
        }
    }
}

/// Up to 20% later than `d`, so candidates started together do not retry
/// in lockstep.
fn jittered(d: Duration) -> Duration {
    let extra = rand::rng().random_range(0.0..0.2);
    d.mul_f64(1.0 + extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_is_validated() {
        assert!(LeaseTiming::default().validate().is_ok());
        let bad = [
            LeaseTiming {
                renew_deadline: Duration::from_secs(15),
                ..LeaseTiming::default()
            },
            LeaseTiming {
                retry_period: Duration::from_secs(10),
                ..LeaseTiming::default()
            },
            LeaseTiming {
                retry_period: Duration::ZERO,
                ..LeaseTiming::default()
            },
        ];
        for t in bad {
            assert!(t.validate().is_err(), "{t:?}");
        }
    }

    #[test]
    fn identities_are_unique() {
        assert_ne!(default_identity(), default_identity());
    }
}
