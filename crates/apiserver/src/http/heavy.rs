//! The heavy lane: where requests with large bodies run, so decoding,
//! patching and encoding megabytes cannot stall every small request.

use std::sync::Arc;

use apimachinery::ApiError;

/// Bodies at least this large are decoded, patched and encoded on the
/// heavy lane (see [`HeavyLane`]).
pub const HEAVY_BODY_BYTES: usize = 128 * 1024;
/// Large requests admitted at once (queued or running on the heavy lane);
/// more get 429 with Retry-After, as kube-apiserver's in-flight limit does.
pub const MAX_HEAVY_IN_FLIGHT: usize = 8;

/// Where requests with large bodies run: one thread with its own Tokio
/// runtime. Decoding, patching, validating and encoding a body of megabytes
/// costs CPU for a long stretch without an await; on the shared runtime two
/// such requests would hold both workers of a 2-core machine and stall every
/// small request behind them. On the lane they take at most one core
/// between them, one after another, and the lane hands the memory they
/// peaked at back to the system afterwards.
pub struct HeavyLane {
    handle: tokio::runtime::Handle,
    permits: Arc<tokio::sync::Semaphore>,
    /// Dropping it (with the server) ends the lane's thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl HeavyLane {
    pub fn start() -> std::io::Result<HeavyLane> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("apiserver-heavy".into())
            .spawn(move || {
                let _ = rt.block_on(stopped);
            })?;
        Ok(HeavyLane {
            handle,
            permits: Arc::new(tokio::sync::Semaphore::new(MAX_HEAVY_IN_FLIGHT)),
            _stop: stop,
        })
    }

    /// A place for one large request, or a 429 when the lane is full.
    pub fn admit(&self) -> Result<tokio::sync::OwnedSemaphorePermit, ApiError> {
        self.permits.clone().try_acquire_owned().map_err(|_| {
            let mut e = ApiError::too_many_requests(format!(
                "too many large requests in flight (at most {MAX_HEAVY_IN_FLIGHT} with bodies of \
                 {HEAVY_BODY_BYTES} bytes or more); retry later"
            ));
            e.retry_after_seconds = Some(1);
            e
        })
    }

    /// Runs `work` on the lane and returns its outcome.
    pub async fn run<F>(&self, permit: tokio::sync::OwnedSemaphorePermit, work: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let task = self.handle.spawn(async move {
            let out = work.await;
            drop(permit);
            release_memory();
            out
        });
        match task.await {
            Ok(out) => out,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// Gives memory freed after a large request back to the system. glibc keeps
/// freed heap in its arenas; after a request that peaked at hundreds of MB
/// the process would otherwise stay that large.
fn release_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}
