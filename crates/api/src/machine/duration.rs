//! Go-style durations, the wire format of `metav1.Duration` fields such as
//! `drainTimeout` and of the `effective-creation-timeout` annotation.
//!
//! The grammar is Go's `time.ParseDuration`: an optional sign, then one or
//! more decimal numbers each followed by a unit (`ns`, `us`, `µs`, `μs`, `ms`,
//! `s`, `m`, `h`), e.g. `"10m"`, `"1h30m"`, `"1.5s"`; a bare `"0"` is also
//! accepted. Rust's [`Duration`] is unsigned, so negative values are only
//! reported by [`parse_signed_duration`]; [`parse_duration`] refuses them.

use std::fmt;
use std::time::Duration;

/// Why a string is not a Go duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    /// The string (after an optional sign) is empty.
    Empty,
    /// A character appears where a number was expected.
    Invalid,
    /// A number is not followed by a unit, as in `"10"`.
    MissingUnit,
    /// The unit is not one Go knows.
    UnknownUnit(String),
    /// The value does not fit Go's signed 64-bit nanosecond count (~292 years).
    Overflow,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => write!(f, "empty duration"),
            DurationError::Invalid => write!(f, "invalid duration"),
            DurationError::MissingUnit => write!(f, "missing unit in duration"),
            DurationError::UnknownUnit(u) => write!(f, "unknown unit {u:?} in duration"),
            DurationError::Overflow => write!(f, "duration out of range"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses a non-negative Go duration; `None` for anything Go would reject and
/// for negative values, which no MCM timeout can use.
pub fn parse_duration(s: &str) -> Option<Duration> {
    match parse_signed_duration(s) {
        Ok((false, d)) => Some(d),
        Ok((true, d)) if d.is_zero() => Some(d),
        _ => None,
    }
}

/// Parses a Go duration, returning whether it was negative and its magnitude.
pub fn parse_signed_duration(s: &str) -> Result<(bool, Duration), DurationError> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok((negative, Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(DurationError::Empty);
    }
    // Go's limit: |d| <= 2^63 ns for negative values, 2^63 - 1 for positive.
    let limit: u128 = if negative { 1 << 63 } else { (1 << 63) - 1 };
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (number, fraction, after) = leading_number(rest)?;
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit);
        }
        let unit = &after[..unit_len];
        rest = &after[unit_len..];
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3_600 * 1_000_000_000,
            other => return Err(DurationError::UnknownUnit(other.to_string())),
        };
        let whole = number
            .checked_mul(nanos_per_unit)
            .ok_or(DurationError::Overflow)?;
        let part = match fraction {
            Some((digits, scale)) => whole + digits * nanos_per_unit / scale,
            None => whole,
        };
        total = total.checked_add(part).ok_or(DurationError::Overflow)?;
        if total > limit {
            return Err(DurationError::Overflow);
        }
    }
    let secs = (total / 1_000_000_000) as u64;
    let nanos = (total % 1_000_000_000) as u32;
    Ok((negative, Duration::new(secs, nanos)))
}

/// Splits `[0-9]*(\.[0-9]*)?` off the front of `s`: the integer part, the
/// fraction as (digits, 10^count) and the remainder. At least one digit must
/// be present on either side of the dot.
#[allow(clippy::type_complexity)]
fn leading_number(s: &str) -> Result<(u128, Option<(u128, u128)>, &str), DurationError> {
    let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut number: u128 = 0;
    for b in s[..int_len].bytes() {
        number = number
            .checked_mul(10)
            .and_then(|n| n.checked_add(u128::from(b - b'0')))
            .ok_or(DurationError::Overflow)?;
        if number > 1 << 63 {
            return Err(DurationError::Overflow);
        }
    }
    let mut rest = &s[int_len..];
    let mut fraction = None;
    let mut frac_len = 0;
    if let Some(after_dot) = rest.strip_prefix('.') {
        frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
        let (mut digits, mut scale) = (0u128, 1u128);
        // Like Go, digits beyond what the accumulator can hold are ignored:
        // they are below nanosecond precision for every unit.
        for b in after_dot[..frac_len].bytes().take(30) {
            digits = digits * 10 + u128::from(b - b'0');
            scale *= 10;
        }
        fraction = Some((digits, scale));
        rest = &after_dot[frac_len..];
    }
    if int_len == 0 && frac_len == 0 {
        return Err(DurationError::Invalid);
    }
    Ok((number, fraction, rest))
}

/// Formats a duration the way Go's `Duration.String` does (`"1h30m0s"`,
/// `"1.5s"`, `"250ms"`, `"0s"`), for annotations that Go code parses back.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let seconds_total = nanos / 1_000_000_000;
    let sub_second = nanos % 1_000_000_000;
    let seconds = decimal((seconds_total % 60) * 1_000_000_000 + sub_second, 9);
    let minutes_total = seconds_total / 60;
    let hours = minutes_total / 60;
    let minutes = minutes_total % 60;
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / 10^places` written with the shortest exact fraction.
fn decimal(value: u128, places: u32) -> String {
    let scale = 10u128.pow(places);
    let (whole, frac) = (value / scale, value % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:0width$}", width = places as usize);
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("0", Some(Duration::ZERO)),
            ("+0", Some(Duration::ZERO)),
            ("-0", Some(Duration::ZERO)),
            ("20s", Some(Duration::from_secs(20))),
            ("10m", Some(Duration::from_secs(600))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("1h30m0s", Some(Duration::from_secs(5400))),
            ("500ms", Some(Duration::from_millis(500))),
            ("1.5s", Some(Duration::from_millis(1500))),
            (".5m", Some(Duration::from_secs(30))),
            ("2.h", Some(Duration::from_secs(7200))),
            ("3us", Some(Duration::from_micros(3))),
            ("3µs", Some(Duration::from_micros(3))),
            ("3μs", Some(Duration::from_micros(3))),
            ("7ns", Some(Duration::from_nanos(7))),
            ("1h1m1s1ms1us1ns", Some(Duration::new(3661, 1_001_001))),
            ("96h", Some(Duration::from_secs(96 * 3600))),
            (
                "2562047h47m16.854775807s",
                Some(Duration::new(9_223_372_036, 854_775_807)),
            ),
            ("", None),
            ("-", None),
            ("10", None),
            ("s", None),
            (".s", None),
            ("1d", None),
            ("1 h", None),
            ("1h-5m", None),
            ("-5m", None),
            ("2562047h47m16.854775808s", None),
            ("99999999999999999999h", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input), *want, "parse_duration({input:?})");
        }
    }

    #[test]
    fn reports_sign_and_errors() {
        assert_eq!(
            parse_signed_duration("-5m"),
            Ok((true, Duration::from_secs(300)))
        );
        assert_eq!(parse_signed_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_signed_duration("5"), Err(DurationError::MissingUnit));
        assert_eq!(
            parse_signed_duration("5d"),
            Err(DurationError::UnknownUnit("d".into()))
        );
        assert_eq!(parse_signed_duration("x"), Err(DurationError::Invalid));
        // Go accepts exactly 2^63 ns only when negative.
        assert!(parse_signed_duration("-2562047h47m16.854775808s").is_ok());
    }

    #[test]
    fn formats_like_go() {
        let cases: &[(Duration, &str)] = &[
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(5), "5ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(20), "20s"),
            (Duration::from_secs(600), "10m0s"),
            (Duration::from_secs(5400), "1h30m0s"),
            (Duration::from_secs(96 * 3600), "96h0m0s"),
        ];
        for (d, want) in cases {
            assert_eq!(format_duration(*d), *want);
            assert_eq!(parse_duration(want), Some(*d), "round trip {want}");
        }
    }
}
