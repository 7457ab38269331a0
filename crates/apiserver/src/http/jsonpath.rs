//! The JSONPath subset of CRD additionalPrinterColumns: `.a.b`, `.a[0].b`,
//! `.a[*].b`, `.a['x.y']`, `.a\.b` (escaped dot) and `[?(@.k=="v")]`
//! filters, optionally wrapped in `{}`. kube-apiserver evaluates the full
//! client-go JSONPath; printer columns in the wild stay within this subset,
//! and anything else renders as an empty cell rather than an error.

use serde_json::{Value, json};

/// One step of a parsed JSONPath.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    /// `[?(@.a.b == "x")]` / `!=`.
    Filter {
        path: Vec<String>,
        equal: bool,
        value: Value,
    },
}

/// Parses the JSONPath subset printer columns use: `.a.b`, `.a[0].b`,
/// `.a[*].b`, `.a['x.y']`, `.a\.b` (escaped dot), `[?(@.k=="v")]`, with
/// optional `{}` around. `None` for anything else.
fn parse_jsonpath(p: &str) -> Option<Vec<Step>> {
    let p = p.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(p)
        .trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let chars: Vec<char> = p.chars().collect();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < chars.len() {
        match chars[i] {
            '.' => {
                i += 1;
                let mut name = String::new();
                while i < chars.len() && chars[i] != '.' && chars[i] != '[' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    name.push(chars[i]);
                    i += 1;
                }
                if name == "*" {
                    steps.push(Step::All);
                } else if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                let close = (i..chars.len()).find(|&j| chars[j] == ']')?;
                let inner: String = chars[i + 1..close].iter().collect();
                let inner = inner.trim();
                i = close + 1;
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Some(f) = inner.strip_prefix("?(").and_then(|s| s.strip_suffix(')')) {
                    steps.push(parse_filter(f)?);
                } else if let Some(q) = inner
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                {
                    steps.push(Step::Field(q.to_string()));
                } else {
                    steps.push(Step::Index(inner.parse().ok()?));
                }
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn parse_filter(f: &str) -> Option<Step> {
    let (lhs, rhs, equal) = if let Some((l, r)) = f.split_once("!=") {
        (l, r, false)
    } else {
        let (l, r) = f.split_once("==")?;
        (l, r, true)
    };
    let path: Vec<String> = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let rhs = rhs.trim();
    let value = if let Some(s) = rhs
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .or_else(|| rhs.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')))
    {
        json!(s)
    } else {
        serde_json::from_str(rhs).ok()?
    };
    Some(Step::Filter { path, equal, value })
}

/// Every value `path` selects in `obj`; `None` when the path is not in the
/// supported subset.
pub(crate) fn select<'a>(obj: &'a Value, path: &str) -> Option<Vec<&'a Value>> {
    let steps = parse_jsonpath(path)?;
    let mut cur: Vec<&Value> = vec![obj];
    for step in &steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        if idx >= 0 {
                            next.extend(a.get(idx as usize));
                        }
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { path, equal, value } => {
                    for item in v.as_array().into_iter().flatten() {
                        let mut x = Some(item);
                        for seg in path {
                            x = x.and_then(|x| x.get(seg.as_str()));
                        }
                        if (x == Some(value)) == *equal {
                            next.push(item);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let o = json!({"spec": {"replicas": 3, "items": [{"n": "a"}, {"n": "b"}]},
                       "metadata": {"labels": {"app.kubernetes.io/name": "x", "tier": "web"}},
                       "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Other", "status": "False"}]}});
        let get = |p: &str| {
            select(&o, p)
                .unwrap()
                .into_iter()
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(get(".spec.replicas"), [json!(3)]);
        assert_eq!(get(".spec.items[1].n"), [json!("b")]);
        assert_eq!(get(".spec.items[*].n"), [json!("a"), json!("b")]);
        assert_eq!(get(".metadata.labels.tier"), [json!("web")]);
        assert_eq!(
            get(".metadata.labels['app.kubernetes.io/name']"),
            [json!("x")]
        );
        assert_eq!(
            get(".metadata.labels.app\\.kubernetes\\.io/name"),
            [json!("x")]
        );
        assert_eq!(
            get(".status.conditions[?(@.type==\"Ready\")].status"),
            [json!("True")]
        );
        assert_eq!(get("{.spec.missing}"), Vec::<Value>::new());
        assert!(select(&o, "spec").is_none());
    }
}
