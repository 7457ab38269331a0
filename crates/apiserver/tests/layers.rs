//! The API server's layers, checked from its source: dependencies run one
//! way,
//!
//! ```text
//! server ─► http, auth, controllers ─► admission ─► strategy ─► storage ─► object
//! ```
//!
//! Every `crate::…` and `super::…` path in non-test code is resolved to the
//! top-level module it names; a module may use its own layer and the ones
//! below it, never one above. The peers of one layer (http, auth,
//! controllers) may use each other only without a cycle between them. A
//! top-level module missing from [`LAYERS`] fails the test, so a new module
//! has to be given a place.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules and their rank (0 is the top). `lib.rs` is the crate
/// root: it declares the modules and re-exports paths for other crates, and
/// belongs to no layer.
const LAYERS: &[(&str, u8)] = &[
    ("server", 0),
    // The embedded-cluster builder: like the server, it wires things.
    ("cluster", 0),
    ("http", 1),
    ("auth", 1),
    ("controllers", 1),
    ("admission", 2),
    ("strategy", 3),
    ("storage", 4),
    ("object", 5),
    ("error", 5),
];

fn rank(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reading src") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `src/http/list.rs` → `[http, list]`,
/// `src/http/mod.rs` → `[http]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments and without test code: test
/// modules (a `tests.rs` file, a `#[cfg(test)] mod …;` declaration, a
/// `#[cfg(test)] mod … { … }` block, or the one item after any other
/// `#[cfg(test)]`) may use any layer for their fixtures.
fn code_of(file: &Path, text: &str) -> String {
    if file.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let lines: Vec<&str> = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            out.push(lines[i]);
            i += 1;
            continue;
        }
        // Skip the item the attribute applies to: up to the end of its
        // first line if that closes it (`mod x;`), else to the brace that
        // closes its block.
        i += 1;
        let mut depth = 0i32;
        let mut opened = false;
        while i < lines.len() {
            let line = lines[i];
            i += 1;
            depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
            opened |= line.contains('{');
            if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    out.join("\n")
}

/// The top-level modules a piece of code names through `crate::` (also
/// `crate::{a, b}`) and `super::` paths, given the module it is in.
fn references(code: &str, module: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = code.as_bytes();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let at_word_start =
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if at_word_start && rest.starts_with("crate::") {
            let after = &rest["crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name = ident(item.trim());
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            } else {
                let name = ident(after);
                if !name.is_empty() {
                    out.insert(name);
                }
            }
            i += "crate::".len();
            continue;
        }
        if at_word_start && rest.starts_with("super::") {
            // Count the `super::` hops, then name what they reach.
            let mut hops = 0;
            let mut r = rest;
            while let Some(next) = r.strip_prefix("super::") {
                hops += 1;
                r = next;
            }
            let parent_len = module.len().saturating_sub(hops);
            let target = if parent_len > 0 {
                module[0].clone()
            } else {
                ident(r)
            };
            if !target.is_empty() {
                out.insert(target);
            }
            i += "super::".len() * hops;
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    out
}

#[test]
fn dependencies_run_one_way() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    // Edges between different top-level modules, for the cycle check.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        let Some(top) = module.first() else {
            continue; // lib.rs, the crate root
        };
        let Some(from) = rank(top) else {
            problems.push(format!(
                "{}: top-level module `{top}` has no layer in tests/layers.rs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("reading a source file");
        for target in references(&code_of(file, &text), &module) {
            if target == *top {
                continue;
            }
            let Some(to) = rank(&target) else {
                // A crate-root re-export (`crate::Server`) or an item of
                // the root: only the top layer may use those.
                if from != 0 {
                    problems.push(format!(
                        "{}: uses `crate::{target}`, which is no layer (a crate-root re-export?)",
                        file.display()
                    ));
                }
                continue;
            };
            if to < from {
                problems.push(format!(
                    "{}: `{top}` (layer {from}) uses `{target}` (layer {to}), a layer above it",
                    file.display()
                ));
            }
            edges.entry(top.clone()).or_default().insert(target);
        }
    }
    // No cycle between top-level modules (peers of one layer included).
    for start in edges.keys() {
        let mut stack: Vec<(String, Vec<String>)> = vec![(start.clone(), vec![start.clone()])];
        let mut seen = BTreeSet::new();
        while let Some((node, path)) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if next == start {
                    problems.push(format!("a cycle: {} → {start}", path.join(" → ")));
                } else if seen.insert(next.clone()) {
                    let mut p = path.clone();
                    p.push(next.clone());
                    stack.push((next.clone(), p));
                }
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "the layer rule is broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_back_edges_and_cycles() {
    let module = vec!["storage".to_string(), "codec".to_string()];
    let code = "use crate::{object, http::Reply};\nfn f() { super::super::strategy::x(); super::keys::y(); }";
    let refs = references(code, &module);
    assert_eq!(
        refs,
        ["http", "object", "storage", "strategy"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    let file = Path::new("src/storage/codec.rs");
    let code = code_of(
        file,
        "use crate::object; // crate::http\n#[cfg(test)]\nuse crate::server;",
    );
    assert_eq!(
        references(&code, &module),
        ["object".to_string()].into_iter().collect()
    );
    assert!(rank("http") < rank("storage"));
}
