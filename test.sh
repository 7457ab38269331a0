#!/usr/bin/env bash
# The whole test suite: formatting, then every crate's unit, integration and
# end-to-end tests (the e2e tests share the one trellis binary cargo builds;
# they drive the real kubectl and curl, which the machine image has).
set -euo pipefail
cd "$(dirname "$0")"
# Off-the-shelf checkers from PyPI: the OpenAPI documents are validated with
# openapi-spec-validator, and schemathesis fuzzes the API for 5xx answers.
# grpcio and grpcio-tools (module:package) run the Python machine provider
# of examples/grpc-provider-python under the driver conformance kit.
for entry in openapi_spec_validator schemathesis grpc:grpcio grpc_tools:grpcio-tools; do
  module=${entry%%:*}
  if ! python3 -c "import $module" 2>/dev/null; then
    package=${entry#*:}
    [ "$package" = "$entry" ] && package=${module//_/-}
    python3 -m pip install -q "$package" >/dev/null 2>&1 \
      || echo "warning: $package could not be installed; its check will be skipped"
  fi
done
# Enough schemathesis examples per operation to exercise every endpoint
# while keeping CI short.
export ST_MAX_EXAMPLES="${ST_MAX_EXAMPLES:-25}"
# The etcd store backend's and etcd-druid's tests run real etcd members:
# Debian's etcd-server (and etcdctl from etcd-client, which restores
# snapshots). The tests install it themselves when missing; doing it here
# once keeps parallel test binaries from racing for apt's lock.
if ! command -v etcd >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client; } >/dev/null 2>&1 \
    || echo "warning: etcd-server could not be installed; the etcd tests will skip"
fi
cargo fmt --all -- --check
cargo test --workspace --locked
# The machine controllers' scenarios again with the driver behind gRPC
# (router on loopback, provider SDK), as with `trellis provider local`. The
# test binaries built above are run directly: `cargo test -p mcm` would
# resolve features for mcm alone and rebuild half the workspace.
mcm_tests=$(cargo test --workspace --locked --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["target"]["kind"] == ["test"]
            and m["manifest_path"].endswith("/crates/mcm/Cargo.toml")):
        print(m["executable"])')
[ -n "$mcm_tests" ] || { echo "no mcm scenario test binaries found" >&2; exit 1; }
for bin in $mcm_tests; do
  (cd crates/mcm && TRELLIS_MCM_DRIVER=grpc "$bin" -q)
done
