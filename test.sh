#!/usr/bin/env bash
# The whole test suite: formatting, then every crate's unit, integration and
# end-to-end tests (the e2e tests share the one trellis binary cargo builds;
# they drive the real kubectl and curl, which the machine image has).
set -euo pipefail
cd "$(dirname "$0")"
# Off-the-shelf checkers from PyPI: the OpenAPI documents are validated with
# openapi-spec-validator, and schemathesis fuzzes the API for 5xx answers.
for module in openapi_spec_validator schemathesis; do
  if ! python3 -c "import $module" 2>/dev/null; then
    package=${module//_/-}
    python3 -m pip install -q "$package" >/dev/null 2>&1 \
      || echo "warning: $package could not be installed; its check will be skipped"
  fi
done
# Enough schemathesis examples per operation to exercise every endpoint
# while keeping CI short.
export ST_MAX_EXAMPLES="${ST_MAX_EXAMPLES:-25}"
cargo fmt --all -- --check
cargo test --workspace --locked
