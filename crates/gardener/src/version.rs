//! Semantic versions as Gardener reads them, and kubelet version
//! constraints.
//!
//! Gardener parses versions leniently (Masterminds semver): a leading `v`
//! and missing minor or patch parts are accepted, so `1.30` and `v1.30.0`
//! name the same version. Constraints such as `>= 1.26, < 1.31` or
//! `~1.29 || ^1.31.2` follow the same library's rules. The parser here is
//! our own; it supports the operators profiles use in practice and reports
//! anything else as an error instead of guessing.

use std::cmp::Ordering;

use semver::{BuildMetadata, Prerelease, Version};

/// Parses a version leniently: optional `v`, one to three numeric parts,
/// optional pre-release and build suffixes. `None` when it is not a version.
pub fn parse(input: &str) -> Option<Version> {
    parse_partial(input).map(|p| p.version)
}

/// A parsed version and how many of its numeric parts were written.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Partial {
    version: Version,
    /// 1 for `1`, 2 for `1.2`, 3 for `1.2.3`; wildcards (`1.x`) stop the count.
    parts: usize,
}

fn parse_partial(input: &str) -> Option<Partial> {
    let s = input.trim();
    let s = s.strip_prefix('v').unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    let (core, build) = match s.split_once('+') {
        Some((c, b)) => (c, Some(b)),
        None => (s, None),
    };
    let (core, pre) = match core.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (core, None),
    };
    let mut numbers = [0u64; 3];
    let mut parts = 0;
    let mut wildcard = false;
    for (i, piece) in core.split('.').enumerate() {
        if i >= 3 {
            return None;
        }
        if matches!(piece, "x" | "X" | "*") {
            wildcard = true;
            continue;
        }
        if wildcard || piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        numbers[i] = piece.parse().ok()?;
        parts = i + 1;
    }
    let mut version = Version::new(numbers[0], numbers[1], numbers[2]);
    if let Some(p) = pre {
        version.pre = Prerelease::new(p).ok()?;
    }
    if let Some(b) = build {
        version.build = BuildMetadata::new(b).ok()?;
    }
    Some(Partial { version, parts })
}

/// Compares two version strings; unparsable strings sort before every
/// version and among themselves lexically, so sorting never fails.
pub fn compare(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp_precedence(&y),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => a.cmp(b),
    }
}

/// `major.minor` of a version.
pub fn major_minor(v: &Version) -> (u64, u64) {
    (v.major, v.minor)
}

/// Whether `s` is a strict `major.minor.patch` Kubernetes version.
pub fn is_kubernetes_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A version constraint: alternatives (`||`) of conjunctions (`,` or
/// blank) of comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Constraint {
    alternatives: Vec<Vec<Clause>>,
}

/// One comparison, as the interval of versions it admits.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Clause {
    lower: Option<(Version, bool)>,
    upper: Option<(Version, bool)>,
    /// `!=`: admits everything outside the interval.
    negated: bool,
    /// The constraint itself names a pre-release; otherwise pre-release
    /// versions never match (Masterminds' rule).
    allows_prerelease: bool,
}

impl Clause {
    fn matches(&self, v: &Version) -> bool {
        if !v.pre.is_empty() && !self.allows_prerelease {
            return false;
        }
        let above = match &self.lower {
            None => true,
            Some((l, inclusive)) => match v.cmp_precedence(l) {
                Ordering::Greater => true,
                Ordering::Equal => *inclusive,
                Ordering::Less => false,
            },
        };
        let below = match &self.upper {
            None => true,
            Some((u, inclusive)) => match v.cmp_precedence(u) {
                Ordering::Less => true,
                Ordering::Equal => *inclusive,
                Ordering::Greater => false,
            },
        };
        (above && below) != self.negated
    }
}

/// The first version above everything a partial version covers: `1.2` →
/// `1.3.0`, `1` → `2.0.0`, `1.2.3` → `1.2.4`.
fn bump(p: &Partial) -> Version {
    let v = &p.version;
    match p.parts {
        0 => Version::new(u64::MAX, 0, 0),
        1 => Version::new(v.major.saturating_add(1), 0, 0),
        2 => Version::new(v.major, v.minor.saturating_add(1), 0),
        _ => Version::new(v.major, v.minor, v.patch.saturating_add(1)),
    }
}

fn base(p: &Partial) -> Version {
    let mut v = p.version.clone();
    v.build = BuildMetadata::EMPTY;
    v
}

fn clause(op: &str, operand: &str) -> Result<Clause, String> {
    let p = parse_partial(operand).ok_or_else(|| format!("{operand:?} is not a version"))?;
    let allows_prerelease = !p.version.pre.is_empty();
    let exact = p.parts == 3;
    let lo = base(&p);
    let (lower, upper, negated) = match op {
        "" | "=" | "==" => {
            if exact {
                (Some((lo.clone(), true)), Some((lo, true)), false)
            } else {
                (Some((lo, true)), Some((bump(&p), false)), false)
            }
        }
        "!=" => {
            if exact {
                (Some((lo.clone(), true)), Some((lo, true)), true)
            } else {
                (Some((lo, true)), Some((bump(&p), false)), true)
            }
        }
        ">" => {
            if exact {
                (Some((lo, false)), None, false)
            } else {
                (Some((bump(&p), true)), None, false)
            }
        }
        ">=" | "=>" => (Some((lo, true)), None, false),
        "<" => (None, Some((lo, false)), false),
        "<=" | "=<" => {
            if exact {
                (None, Some((lo, true)), false)
            } else {
                (None, Some((bump(&p), false)), false)
            }
        }
        "~" | "~>" => {
            // Patch-level changes; `~1` allows minor changes like `1.x`.
            let upper = if p.parts <= 1 {
                Version::new(lo.major.saturating_add(1), 0, 0)
            } else {
                Version::new(lo.major, lo.minor.saturating_add(1), 0)
            };
            (Some((lo, true)), Some((upper, false)), false)
        }
        "^" => {
            // Changes that do not modify the left-most non-zero part.
            let upper = if lo.major > 0 || p.parts <= 1 {
                Version::new(lo.major.saturating_add(1), 0, 0)
            } else if lo.minor > 0 || p.parts == 2 {
                Version::new(0, lo.minor.saturating_add(1), 0)
            } else {
                Version::new(0, 0, lo.patch.saturating_add(1))
            };
            (Some((lo, true)), Some((upper, false)), false)
        }
        other => return Err(format!("unknown operator {other:?}")),
    };
    Ok(Clause {
        lower,
        upper,
        negated,
        allows_prerelease,
    })
}

const OPERATORS: &[&str] = &[
    "!=", ">=", "=>", "<=", "=<", "~>", "==", ">", "<", "=", "~", "^",
];

fn split_operator(token: &str) -> (&str, &str) {
    for op in OPERATORS {
        if let Some(rest) = token.strip_prefix(op) {
            return (op, rest);
        }
    }
    ("", token)
}

impl Constraint {
    /// Parses a constraint; the error says what could not be read.
    pub fn parse(input: &str) -> Result<Constraint, String> {
        let mut alternatives = Vec::new();
        for group in input.split("||") {
            let tokens: Vec<&str> = group
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .collect();
            if tokens.is_empty() {
                return Err(format!("empty constraint in {input:?}"));
            }
            let mut clauses = Vec::new();
            let mut i = 0;
            while i < tokens.len() {
                let (op, mut operand) = split_operator(tokens[i]);
                i += 1;
                if operand.is_empty() {
                    operand = tokens
                        .get(i)
                        .ok_or_else(|| format!("operator {op:?} without a version"))?;
                    i += 1;
                }
                // Hyphen range `1.2 - 1.4`: inclusive on both ends.
                if op.is_empty() && tokens.get(i) == Some(&"-") {
                    let end = tokens
                        .get(i + 1)
                        .ok_or_else(|| format!("range from {operand:?} without an end"))?;
                    clauses.push(clause(">=", operand)?);
                    clauses.push(clause("<=", end)?);
                    i += 2;
                    continue;
                }
                clauses.push(clause(op, operand)?);
            }
            alternatives.push(clauses);
        }
        Ok(Constraint { alternatives })
    }

    /// Whether `v` satisfies the constraint.
    pub fn matches(&self, v: &Version) -> bool {
        self.alternatives
            .iter()
            .any(|all| all.iter().all(|c| c.matches(v)))
    }

    /// Whether the version string satisfies the constraint; an unparsable
    /// version never does.
    pub fn matches_str(&self, v: &str) -> bool {
        parse(v).is_some_and(|v| self.matches(&v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_parsing() {
        assert_eq!(parse("v1.30"), Some(Version::new(1, 30, 0)));
        assert_eq!(parse("1"), Some(Version::new(1, 0, 0)));
        assert_eq!(
            parse("1592.2.0-gen2").map(|v| v.pre.to_string()),
            Some("gen2".into())
        );
        assert_eq!(parse("1.2.3.4"), None);
        assert_eq!(parse("abc"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn ordering_puts_prereleases_first() {
        assert_eq!(compare("1.0.0-rc1", "1.0.0"), Ordering::Less);
        assert_eq!(compare("1.10.0", "1.9.9"), Ordering::Greater);
        assert_eq!(compare("garbage", "0.0.1"), Ordering::Less);
    }

    #[test]
    fn constraints() {
        let cases = [
            (">= 1.26", "1.26.0", true),
            (">= 1.26", "1.25.9", false),
            (">=1.26, <1.31", "1.30.5", true),
            (">=1.26, <1.31", "1.31.0", false),
            ("< 1.30", "1.29.9", true),
            ("> 1.29", "1.29.9", false),
            ("> 1.29", "1.30.0", true),
            ("<= 1.29", "1.29.9", true),
            ("~1.29", "1.29.4", true),
            ("~1.29", "1.30.0", false),
            ("^1.2.3", "1.9.0", true),
            ("^0.2.3", "0.3.0", false),
            ("1.29.x", "1.29.7", true),
            ("!= 1.29.1", "1.29.1", false),
            ("!= 1.29.1", "1.29.2", true),
            ("< 1.20 || >= 1.30", "1.31.0", true),
            ("< 1.20 || >= 1.30", "1.25.0", false),
            ("1.26 - 1.28", "1.28.9", true),
            ("1.26 - 1.28", "1.29.0", false),
            (">= 1.26", "1.30.0-rc.1", false),
        ];
        for (c, v, want) in cases {
            let parsed = Constraint::parse(c).unwrap_or_else(|e| panic!("{c}: {e}"));
            assert_eq!(parsed.matches_str(v), want, "{c} vs {v}");
        }
    }

    #[test]
    fn bad_constraints_are_errors() {
        assert!(Constraint::parse(">=").is_err());
        assert!(Constraint::parse(">= banana").is_err());
        assert!(Constraint::parse("").is_err());
        assert!(Constraint::parse("1.2 || ").is_err());
    }
}
