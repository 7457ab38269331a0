//! The repository's structure rules (issue 17), checked from the sources so
//! they stay true: no source file in `crates/*/src` over 1,000 lines, and
//! `anyhow` only in the binary crate.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 1000;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .expect("reading crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn no_source_file_is_over_a_thousand_lines() {
    let mut files = Vec::new();
    for dir in crate_dirs() {
        rust_files(&dir.join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} source files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).ok()?.lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split these along a seam (ARCHITECTURE.md):\n{}",
        long.join("\n")
    );
}

#[test]
fn anyhow_is_only_in_the_binary() {
    let mut offenders = Vec::new();
    for dir in crate_dirs() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if name == "trellis" {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("a manifest");
        if manifest
            .lines()
            .any(|l| l.trim_start().starts_with("anyhow"))
        {
            offenders.push(name);
        }
    }
    assert!(
        offenders.is_empty(),
        "library crates return typed errors, not anyhow: {offenders:?}"
    );
}
