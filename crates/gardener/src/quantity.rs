//! Just enough of Kubernetes' `resource.Quantity` to compare sizes and CPU
//! counts, as worker admission needs (volume size ≥ `minSize`, kubelet
//! reservations below capacity).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The value of a quantity as a float (bytes for memory and storage, cores
/// for CPU). `None` when the string is not a quantity.
pub fn value(q: &Quantity) -> Option<f64> {
    parse(&q.0)
}

/// Parses a quantity string such as `50Gi`, `500m`, `1.5`, `1e3`.
pub fn parse(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Pi", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Ei", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("n", 1e-9),
        ("u", 1e-6),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = s.strip_suffix(suffix) {
            return number_value(number).map(|n| n * factor);
        }
    }
    number_value(s)
}

fn number_value(s: &str) -> Option<f64> {
    // Rust's float parser also takes `inf` and `NaN`, which are not
    // quantities.
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-' | b'e' | b'E'))
    {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("20G"), Some(20e9));
        assert_eq!(parse("inf"), None);
        assert_eq!(parse("Gi"), None);
    }
}
