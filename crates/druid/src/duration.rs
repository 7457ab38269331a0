//! Go `time.Duration` strings (`20s`, `1m30s`, `300ms`, `12h`) as the
//! Etcd spec writes them.

use std::time::Duration;

/// Parses a Go duration; `None` for anything Go would reject (negative
/// durations included: no Etcd field may be negative).
pub fn parse(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total = 0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += value * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("20s", Some(20_000)),
            ("1m30s", Some(90_000)),
            ("300ms", Some(300)),
            ("12h", Some(43_200_000)),
            ("1.5s", Some(1_500)),
            ("0", Some(0)),
            ("", None),
            ("5", None),
            ("-1s", None),
            ("3d", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(input).map(|d| d.as_millis() as u64),
                want,
                "{input:?}"
            );
        }
    }
}
