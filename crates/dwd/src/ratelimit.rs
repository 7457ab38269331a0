//! The client-side rate limit of `--kube-api-qps` and `--kube-api-burst`:
//! client-go's token bucket as a tower layer on the seed client, so the
//! flags mean what they mean upstream (kube-rs has no such limit).
//!
//! Each request reserves a token; when none is left it waits until its
//! reservation is due. Reservations are handed out in call order, so
//! waiting requests go in order and the bucket never overdraws.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A token bucket holding at most `burst` tokens, refilled at `qps`.
#[derive(Debug)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    /// Tokens at `at`; negative while requests wait for reservations.
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket. client-go's zero values mean its defaults (5, 10).
    pub fn new(qps: f64, burst: u32, now: Instant) -> Bucket {
        let qps = if qps > 0.0 && qps.is_finite() {
            qps
        } else {
            5.0
        };
        let burst = if burst > 0 { f64::from(burst) } else { 10.0 };
        Bucket {
            qps,
            burst,
            tokens: burst,
            at: now,
        }
    }

    /// Takes a token and says how long the request waits for it.
    pub fn reserve(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now.max(self.at);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// The layer: one bucket shared by every request of the client.
#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl RateLimitLayer {
    pub fn new(qps: f64, burst: u32) -> RateLimitLayer {
        RateLimitLayer {
            bucket: Arc::new(Mutex::new(Bucket::new(qps, burst, Instant::now()))),
        }
    }
}

impl<S> tower::Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
        }
    }
}

/// A service whose calls wait for their token first.
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Req> tower::Service<Req> for RateLimited<S>
where
    S: tower::Service<Req>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let wait = self.bucket.lock().reserve(Instant::now());
        // The inner future does nothing until polled, so the request is
        // sent only after the wait.
        let call = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            call.await
        })
    }
}

/// A seed client with the rate limit in front of kube-rs's stack.
pub fn client(config: kube::Config, qps: f64, burst: u32) -> Result<kube::Client, kube::Error> {
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&RateLimitLayer::new(qps, burst))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_free_then_requests_are_paced_at_qps() {
        let t0 = Instant::now();
        let mut b = Bucket::new(5.0, 10, t0);
        let waits: Vec<Duration> = (0..12).map(|_| b.reserve(t0)).collect();
        assert!(waits[..10].iter().all(Duration::is_zero), "{waits:?}");
        assert_eq!(waits[10], Duration::from_millis(200));
        assert_eq!(waits[11], Duration::from_millis(400));
        // A second later five tokens came back, two of them owed to the
        // waiting requests: three are free.
        let t1 = t0 + Duration::from_secs(1);
        let waits: Vec<Duration> = (0..4).map(|_| b.reserve(t1)).collect();
        assert_eq!(waits[..3], [Duration::ZERO; 3]);
        assert_eq!(waits[3], Duration::from_millis(200));
        // A long pause refills to the burst, no more.
        let later = t0 + Duration::from_secs(60);
        let waits: Vec<Duration> = (0..11).map(|_| b.reserve(later)).collect();
        assert!(waits[..10].iter().all(Duration::is_zero));
        assert_eq!(waits[10], Duration::from_millis(200));
    }

    #[test]
    fn zero_flags_mean_client_gos_defaults() {
        let t0 = Instant::now();
        let mut b = Bucket::new(0.0, 0, t0);
        let free = (0..20).take_while(|_| b.reserve(t0).is_zero()).count();
        assert_eq!(free, 10);
    }
}
