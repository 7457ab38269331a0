//! Time arithmetic that cannot panic on odd input (a renew time in the year
//! 9999 plus a threshold is simply "not older").

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `t + d < now`; false when `t + d` is out of range.
pub fn older_than(t: Timestamp, d: SignedDuration, now: Timestamp) -> bool {
    t.checked_add(d).map(|x| x < now).unwrap_or(false)
}

/// `now - t`, zero if `t` is in the future or out of range.
pub fn since(t: Timestamp, now: Timestamp) -> SignedDuration {
    now.duration_since(t).max(SignedDuration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn far_future_times_are_never_older() {
        let max = Timestamp::MAX;
        assert!(!older_than(
            max,
            SignedDuration::from_hours(1),
            Timestamp::now()
        ));
        let t = Timestamp::now() - SignedDuration::from_mins(2);
        assert!(older_than(
            t,
            SignedDuration::from_mins(1),
            Timestamp::now()
        ));
        assert_eq!(since(max, Timestamp::now()), SignedDuration::ZERO);
    }
}
