#!/usr/bin/env bash
# The whole test suite: formatting, then every crate's unit, integration and
# end-to-end tests (the e2e tests share the one trellis binary cargo builds;
# they drive the real kubectl and curl, which the machine image has).
set -euo pipefail
cd "$(dirname "$0")"
# The OpenAPI documents are checked with an off-the-shelf validator.
if ! python3 -c 'import openapi_spec_validator' 2>/dev/null; then
  python3 -m pip install -q openapi-spec-validator >/dev/null 2>&1 \
    || echo "warning: openapi-spec-validator could not be installed; that check will be skipped"
fi
cargo fmt --all -- --check
cargo test --workspace --locked
