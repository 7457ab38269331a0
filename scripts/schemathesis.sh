#!/usr/bin/env bash
# Fuzzes the embedded API server with schemathesis (PyPI) and fails on any
# 5xx response (issue 3, "Done when"). Starts `trellis server --insecure-http
# --in-memory` on a free port, fetches its OpenAPI v3 documents for the core
# group and machine.sapcloud.io/v1alpha1, creates fixture objects so item
# paths reach real objects, and runs schemathesis with the
# check `not_a_server_error` against configmaps, secrets, namespaces, pods
# (with status and eviction) and machinedeployments (with status and scale).
#
# Usage: scripts/schemathesis.sh [TRELLIS_BINARY]
#   TRELLIS_BIN / the first argument: the trellis binary (default
#     target/debug/trellis, built with cargo if missing)
#   ST_MAX_EXAMPLES: test cases per operation and phase (default 50)
#   ST_SEED: hypothesis seed (default 1, so CI runs are reproducible)
#   ST_CHECKS: schemathesis checks (default not_a_server_error; e.g. add
#     unsupported_method; status_code_conformance is all noise, as
#     Kubernetes' OpenAPI documents only 200/201/202/401 responses)
#   ST_REPORT_DIR: where reports and the server log go (default: a temp dir)
# Exit status: 0 when no 5xx was found, 1 otherwise, 2 if the setup failed.
# Needs python3 with schemathesis installed (`pip install schemathesis`),
# and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${1:-${TRELLIS_BIN:-target/debug/trellis}}"
MAX_EXAMPLES="${ST_MAX_EXAMPLES:-50}"
SEED="${ST_SEED:-1}"
CHECKS="${ST_CHECKS:-not_a_server_error}"
WORK="$(mktemp -d)"
REPORT_DIR="${ST_REPORT_DIR:-$WORK/report}"
mkdir -p "$REPORT_DIR"

if ! python3 -c 'import schemathesis' 2>/dev/null; then
  echo "schemathesis.sh: schemathesis is not installed (pip install schemathesis)" >&2
  exit 2
fi
SCHEMATHESIS=(python3 -m schemathesis.cli)
if command -v schemathesis >/dev/null; then SCHEMATHESIS=(schemathesis); fi
if [[ ! -x "$BIN" ]]; then
  cargo build -q -p trellis
  BIN=target/debug/trellis
fi

SERVER_PID=
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ -z "${ST_REPORT_DIR:-}" ]]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Start the server (retrying if the port was taken meanwhile).
for _ in 1 2 3; do
  PORT="$(free_port)"
  BASE="http://127.0.0.1:$PORT"
  "$BIN" server --insecure-http --in-memory --data-dir "$WORK/data" \
    --listen "127.0.0.1:$PORT" --log-level warn >"$REPORT_DIR/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if curl -sf "$BASE/readyz" >/dev/null 2>&1; then break 2; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
    sleep 0.1
  done
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=
done
if [[ -z "$SERVER_PID" ]]; then
  echo "schemathesis.sh: trellis server did not become ready" >&2
  cat "$REPORT_DIR/server.log" >&2
  exit 2
fi
echo "trellis server on $BASE (log: $REPORT_DIR/server.log)"

curl -sf "$BASE/openapi/v3/api/v1" -o "$WORK/core.json"
curl -sf "$BASE/openapi/v3/apis/machine.sapcloud.io/v1alpha1" -o "$WORK/mcm.json"

create() {
  local code
  code="$(curl -s -o "$WORK/create.out" -w '%{http_code}' -X POST \
    -H 'Content-Type: application/json' "$BASE$1" -d "$2")"
  if [[ "$code" != 201 ]]; then
    echo "schemathesis.sh: creating a fixture at $1 returned $code:" >&2
    cat "$WORK/create.out" >&2
    exit 2
  fi
}
# Fixtures, so item paths reach real objects instead of 404: st-fixture for
# GET/PUT/PATCH, st-doomed for DELETE, st-evictee for eviction.
for name in st-fixture st-doomed st-evictee; do
  create /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"'$name'"}}'
  create /api/v1/namespaces/default/configmaps '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"'$name'"},"data":{"a":"1"}}'
  create /api/v1/namespaces/default/secrets '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"'$name'"},"stringData":{"a":"1"}}'
  create /api/v1/namespaces/default/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"'$name'"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}'
  create /apis/machine.sapcloud.io/v1alpha1/namespaces/default/machinedeployments \
    '{"apiVersion":"machine.sapcloud.io/v1alpha1","kind":"MachineDeployment","metadata":{"name":"'$name'"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"st"}},"template":{"metadata":{"labels":{"app":"st"}},"spec":{"class":{"kind":"MachineClass","name":"st"}}}}}'
done

# Namespaced paths use `default`, item paths the fixtures (schemathesis
# otherwise reuses names it saw in responses, such as `default` itself).
# `watch=true` would stream until the request timeout, so watches are left
# out. A DELETE of a collection matches nothing, so the fixtures survive.
cat >"$WORK/schemathesis.toml" <<'EOF'
[parameters]
"path.namespace" = "default"
"query.watch" = false

[[operations]]
include-path-regex = "\\{name\\}(/(status|scale))?$"
exclude-method = "DELETE"
parameters = { "path.name" = "st-fixture" }

[[operations]]
include-path-regex = "\\{name\\}$"
exclude-method-regex = "^(GET|PUT|PATCH|POST)$"
parameters = { "path.name" = "st-doomed" }

[[operations]]
include-path-regex = "/eviction$"
parameters = { "path.name" = "st-evictee" }

[[operations]]
include-path-regex = "(configmaps|secrets|pods|namespaces|machinedeployments)$"
exclude-method-regex = "^(GET|POST)$"
parameters = { "query.labelSelector" = "schemathesis-matches-nothing=1" }
EOF

CORE_PATHS='^/api/v1/(namespaces/\{namespace\}/)?(configmaps|secrets|pods)(/\{name\}(/(status|eviction))?)?$|^/api/v1/namespaces(/\{name\}(/status)?)?$'
MCM_PATHS='^/apis/machine\.sapcloud\.io/v1alpha1/(namespaces/\{namespace\}/)?machinedeployments(/\{name\}(/(status|scale))?)?$'

status=0
run() {
  local name="$1" schema="$2" paths="$3"
  echo "== schemathesis: $name"
  if ! (cd "$WORK" && "${SCHEMATHESIS[@]}" run "$schema" --url "$BASE" \
    --checks "$CHECKS" \
    --include-path-regex "$paths" \
    --max-examples "$MAX_EXAMPLES" --seed "$SEED" \
    --request-timeout 10 --workers 1 \
    --suppress-health-check all \
    --report junit,ndjson --report-dir "$REPORT_DIR/$name"); then
    status=1
  fi
}
START=$SECONDS
run core "$WORK/core.json" "$CORE_PATHS"
run machine.sapcloud.io "$WORK/mcm.json" "$MCM_PATHS"

if grep -qE 'panicked|stack backtrace' "$REPORT_DIR/server.log"; then
  echo "schemathesis.sh: the server panicked:" >&2
  grep -E -A5 'panicked' "$REPORT_DIR/server.log" >&2 || true
  status=1
fi
if ! curl -sf "$BASE/readyz" >/dev/null; then
  echo "schemathesis.sh: the server is no longer ready after the run" >&2
  status=1
fi
echo "schemathesis.sh: $([[ $status == 0 ]] && echo 'passed' || echo FAILED) in $((SECONDS - START)) s (checks $CHECKS, max examples $MAX_EXAMPLES, seed $SEED)"
exit "$status"
