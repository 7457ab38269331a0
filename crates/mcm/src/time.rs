//! Conversions between the Kubernetes `Time` (a jiff timestamp in
//! k8s-openapi) and the chrono times the planners reason in.

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub fn to_chrono(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().max(0) as u32)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

pub fn to_time(t: DateTime<Utc>) -> Time {
    Time(
        Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let now = DateTime::from_timestamp(1_700_000_123, 456_000_000).unwrap();
        assert_eq!(to_chrono(&to_time(now)), now);
    }
}
