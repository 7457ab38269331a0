//! Polling until a condition holds: the one way tests wait for controllers.

use std::time::Duration;

/// How often a condition is polled: fast enough that a test does not wait
/// noticeably longer than the system under test, slow enough not to load
/// the API server the test is watching.
const INTERVAL: Duration = Duration::from_millis(50);

/// What a polled condition returns: `bool` (holds or not) or `Option<T>`
/// (`Some` holds and hands back what it found).
pub trait Outcome {
    /// What [`eventually`] returns once the condition holds.
    type Value;
    fn reached(self) -> Option<Self::Value>;
}

impl Outcome for bool {
    type Value = ();
    fn reached(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Outcome for Option<T> {
    type Value = T;
    fn reached(self) -> Option<T> {
        self
    }
}

/// Polls `check` until it holds and returns what it found; fails the test,
/// naming `what`, once `secs` seconds have passed.
pub async fn eventually<O: Outcome>(
    what: &str,
    secs: u64,
    check: impl AsyncFnMut() -> O,
) -> O::Value {
    eventually_or(what, secs, check, async || {}).await
}

/// [`eventually`], running `report` before failing, so that a timed-out
/// test shows the state it saw (what the objects and the simulator held).
pub async fn eventually_or<O: Outcome>(
    what: &str,
    secs: u64,
    mut check: impl AsyncFnMut() -> O,
    report: impl AsyncFnOnce(),
) -> O::Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await.reached() {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            report().await;
            panic!("timed out waiting for {what} ({secs}s)");
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

/// [`eventually`] for tests without an async runtime (a process or thread
/// watched from plain test code): sleeps the thread between polls.
pub fn eventually_blocking<O: Outcome>(
    what: &str,
    secs: u64,
    mut check: impl FnMut() -> O,
) -> O::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().reached() {
            return v;
        }
        if std::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what} ({secs}s)");
        }
        std::thread::sleep(INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_what_an_option_found_and_unit_for_a_bool() {
        let mut polls = 0;
        let found = eventually("the third poll", 5, async || {
            polls += 1;
            (polls == 3).then_some(polls)
        })
        .await;
        assert_eq!(found, 3);
        let mut held = false;
        eventually("a flag", 5, async || std::mem::replace(&mut held, true)).await;
    }

    #[test]
    fn blocking_returns_what_it_found_and_fails_naming_what() {
        let mut polls = 0;
        let found = eventually_blocking("the second poll", 5, || {
            polls += 1;
            (polls == 2).then_some(polls)
        });
        assert_eq!(found, 2);
        let failed = std::panic::catch_unwind(|| eventually_blocking("never", 0, || false));
        let message = *failed.unwrap_err().downcast::<String>().unwrap();
        assert_eq!(message, "timed out waiting for never (0s)");
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for never (0s)")]
    async fn fails_the_test_naming_what_it_waited_for() {
        eventually("never", 0, async || false).await;
    }

    #[tokio::test]
    #[should_panic(expected = "reported")]
    async fn reports_before_failing() {
        eventually_or("never", 0, async || false, async || panic!("reported")).await;
    }
}
