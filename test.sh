#!/usr/bin/env bash
# The whole test suite: formatting, then every crate's unit, integration and
# end-to-end tests (the e2e tests share the one trellis binary cargo builds).
set -euo pipefail
cd "$(dirname "$0")"
cargo fmt --all -- --check
cargo test --workspace --locked
