//! `metav1.Time` as a chrono timestamp.
//!
//! k8s-openapi's `Time` wraps a jiff timestamp, while every caller in trellis
//! (controllers, the API server) passes `chrono::DateTime<Utc>` as `now`.
//! Keeping one time type in the domain layer avoids converting on every
//! comparison of an expiration date with `now`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time, written as RFC 3339 with second precision and a `Z`
/// suffix, exactly like Go's `metav1.Time`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub DateTime<Utc>);

impl Time {
    /// Parses an RFC 3339 timestamp; `None` for anything else.
    pub fn parse(s: &str) -> Option<Time> {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Time(t.with_timezone(&Utc)))
    }
}

impl From<DateTime<Utc>> for Time {
    fn from(t: DateTime<Utc>) -> Time {
        Time(t)
    }
}

/// From k8s-openapi's `metav1.Time`, which the Worker types use: a Worker's
/// last operation is Gardener's own type and carries this one.
impl From<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> for Time {
    fn from(t: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Time {
        // jiff splits a timestamp before 1970 into negative seconds and a
        // negative fraction; chrono wants a non-negative fraction.
        let (mut secs, mut nanos) = (t.0.as_second(), t.0.subsec_nanosecond());
        if nanos < 0 {
            secs -= 1;
            nanos += 1_000_000_000;
        }
        Time(DateTime::from_timestamp(secs, nanos as u32).unwrap_or_default())
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Secs, true))
    }
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Time {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Time, D::Error> {
        let s = String::deserialize(d)?;
        Time::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not an RFC 3339 timestamp")))
    }
}

impl schemars::JsonSchema for Time {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Time".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "date-time"})
    }
}
