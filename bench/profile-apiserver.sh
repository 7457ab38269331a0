#!/usr/bin/env bash
# Profiles `trellis server` under the client load of `trellis bench
# apiserver --mode client`, one verb at a time: perf samples the server
# process (found as the bench's child) while the bench drives it over TLS.
# Prints the hottest symbols of each verb and keeps perf's data under
# $OUT (default target/profile-apiserver) for `perf report -i`.
#
#   bench/profile-apiserver.sh [verbs (create,update,apply,get)] [requests (20000)] [clients (4)] [protocol (http1)]
#
# Needs perf and a release build (cargo build --release -p trellis).
set -euo pipefail
cd "$(dirname "$0")/.."
VERBS=${1:-create,update,apply,get}
REQUESTS=${2:-20000}
CLIENTS=${3:-4}
PROTO=${4:-http1}
BIN=${TRELLIS_BIN:-target/release/trellis}
OUT=${OUT:-target/profile-apiserver}
mkdir -p "$OUT"
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 1; }
for verb in ${VERBS//,/ }; do
  log="$OUT/$verb.bench.txt"
  "$BIN" bench apiserver --mode client --requests "$REQUESTS" --clients "$CLIENTS" \
    --protocols "$PROTO" --verbs "$verb" >"$log" 2>"$OUT/$verb.stderr" &
  bench=$!
  # The bench prints the server's pid once the server is ready.
  pid=""
  for _ in $(seq 1 600); do
    pid=$(sed -n 's/^server pid //p' "$OUT/$verb.stderr" | head -1)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ] || { echo "no server pid for $verb" >&2; kill "$bench"; exit 1; }
  perf record -F 999 -g -p "$pid" -o "$OUT/$verb.perf.data" 2>/dev/null &
  perf_pid=$!
  wait "$bench"
  kill -INT "$perf_pid" 2>/dev/null || true
  wait "$perf_pid" 2>/dev/null || true
  echo "== $verb: $(grep '^| HTTP' "$log" | head -1)"
  perf report -i "$OUT/$verb.perf.data" --no-children --sort dso,symbol --percent-limit 0.8 \
    --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | grep '%' | head -40
done
