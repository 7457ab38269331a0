//! The string formats a schema may name (`date-time`, `uuid`, `cidr`, ...)
//! and the checks behind them, as kube-openapi implements them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The formats that are checked; any other format is accepted unchecked, as
/// Kubernetes does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    Int32,
    Int64,
    DateTime,
    Date,
    Byte,
    Uuid,
    Duration,
    Hostname,
    Ipv4,
    Ipv6,
    Cidr,
    Email,
    Mac,
    Other,
}

impl Format {
    pub(super) fn parse(s: &str) -> Format {
        match s {
            "int32" => Format::Int32,
            "int64" => Format::Int64,
            "date-time" | "datetime" => Format::DateTime,
            "date" => Format::Date,
            "byte" => Format::Byte,
            "uuid" | "uuid3" | "uuid4" | "uuid5" => Format::Uuid,
            "duration" => Format::Duration,
            "hostname" => Format::Hostname,
            "ipv4" => Format::Ipv4,
            "ipv6" => Format::Ipv6,
            "cidr" => Format::Cidr,
            "email" => Format::Email,
            "mac" => Format::Mac,
            _ => Format::Other,
        }
    }

    /// Whether a string conforms. The integer formats constrain numbers, not
    /// strings, so any string passes them.
    pub(super) fn admits_str(self, s: &str) -> bool {
        match self {
            Format::DateTime => is_date_time(s),
            Format::Date => is_date(s.as_bytes()),
            Format::Byte => is_base64(s),
            Format::Uuid => is_uuid(s),
            Format::Duration => is_duration(s),
            Format::Hostname => is_hostname(s),
            Format::Ipv4 => s.parse::<Ipv4Addr>().is_ok(),
            Format::Ipv6 => s.parse::<Ipv6Addr>().is_ok(),
            Format::Cidr => is_cidr(s),
            Format::Email => is_email(s),
            Format::Mac => is_mac(s),
            Format::Int32 | Format::Int64 | Format::Other => true,
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Format::DateTime => "a date-time in RFC 3339 form, such as 2006-01-02T15:04:05Z",
            Format::Date => "a date in the form 2006-01-02",
            Format::Byte => "base64-encoded data",
            Format::Uuid => "a UUID",
            Format::Duration => "a duration such as 30s, 1h30m or 500ms",
            Format::Hostname => "an RFC 1123 hostname",
            Format::Ipv4 => "an IPv4 address",
            Format::Ipv6 => "an IPv6 address",
            Format::Cidr => "a CIDR such as 10.0.0.0/8",
            Format::Email => "an email address",
            Format::Mac => "a MAC address",
            Format::Int32 => "a 32-bit signed integer (format int32)",
            Format::Int64 => "a 64-bit signed integer (format int64)",
            Format::Other => "valid",
        }
    }
}

fn number_of(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        _ => 0,
    }
}

/// `YYYY-MM-DD`, a real calendar day.
fn is_date(b: &[u8]) -> bool {
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (
        b.get(0..4).and_then(number_of),
        b.get(5..7).and_then(number_of),
        b.get(8..10).and_then(number_of),
    ) else {
        return false;
    };
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

/// `HH:MM:SS` with a leap second allowed.
fn is_time(b: &[u8]) -> bool {
    if b.len() != 8 || b.get(2) != Some(&b':') || b.get(5) != Some(&b':') {
        return false;
    }
    matches!(
        (
            b.get(0..2).and_then(number_of),
            b.get(3..5).and_then(number_of),
            b.get(6..8).and_then(number_of),
        ),
        (Some(h), Some(m), Some(s)) if h < 24 && m < 60 && s <= 60
    )
}

/// RFC 3339 date-time. Like Kubernetes (go-openapi strfmt) the zone may be
/// left out, meaning local time.
fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 19
        || !b.get(0..10).is_some_and(is_date)
        || !matches!(b.get(10), Some(b'T' | b't'))
        || !b.get(11..19).is_some_and(is_time)
    {
        return false;
    }
    let mut rest = b.get(19..).unwrap_or_default();
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        rest = frac.get(digits..).unwrap_or_default();
    }
    match rest {
        [] | [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => matches!(
            (number_of(&[*h1, *h2]), number_of(&[*m1, *m2])),
            (Some(h), Some(m)) if h < 24 && m < 60
        ),
        _ => false,
    }
}

/// Standard base64 with padding, as Go's `base64.StdEncoding` decodes it
/// (which skips line breaks).
fn is_base64(s: &str) -> bool {
    let body: Vec<u8> = s.bytes().filter(|b| *b != b'\n' && *b != b'\r').collect();
    if !body.len().is_multiple_of(4) {
        return false;
    }
    let pad = body.iter().rev().take_while(|b| **b == b'=').count();
    if pad > 2 {
        return false;
    }
    body.iter()
        .take(body.len() - pad)
        .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

/// Hyphenated or plain hexadecimal UUIDs, either case.
fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    match b.len() {
        32 => b.iter().all(u8::is_ascii_hexdigit),
        36 => b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        }),
        _ => false,
    }
}

/// Go's `time.ParseDuration` syntax (`300ms`, `-1.5h`, `2h45m`), plus days
/// and weeks, which Kubernetes' duration format also takes.
fn is_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest = rest.get(int_len..).unwrap_or_default();
        let mut frac_len = 0;
        if let Some(after) = rest.strip_prefix('.') {
            frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            rest = after.get(frac_len..).unwrap_or_default();
        }
        if int_len + frac_len == 0 {
            return false;
        }
        let unit_len: usize = rest
            .chars()
            .take_while(|c| !c.is_ascii_digit() && *c != '.')
            .map(char::len_utf8)
            .sum();
        let unit = rest.get(..unit_len).unwrap_or_default();
        if !matches!(
            unit,
            "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h" | "d" | "w"
        ) {
            return false;
        }
        rest = rest.get(unit_len..).unwrap_or_default();
    }
    true
}

/// RFC 1123 hostnames; letters beyond ASCII are allowed, as Kubernetes'
/// (internationalised) hostname format allows them.
fn is_hostname(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() || s.len() > 253 {
        return false;
    }
    s.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    })
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    let max = match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => 32,
        Ok(IpAddr::V6(_)) => 128,
        Err(_) => return false,
    };
    bits.len() <= 3 && number_of(bits.as_bytes()).is_some_and(|b| b <= max)
}

/// `local@domain`, optionally as `Name <local@domain>`.
fn is_email(s: &str) -> bool {
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => inner.get(open + 1..).unwrap_or_default(),
        _ => s,
    };
    let Some((local, domain)) = addr.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && !local.contains(|c: char| c.is_whitespace() || c == '<' || c == '>')
        && is_hostname(domain)
}

/// IEEE 802 MAC-48, EUI-64 or 20-octet InfiniBand addresses, with `:` or `-`.
fn is_mac(s: &str) -> bool {
    let sep = if s.contains('-') { '-' } else { ':' };
    let groups: Vec<&str> = s.split(sep).collect();
    matches!(groups.len(), 6 | 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit()))
}
