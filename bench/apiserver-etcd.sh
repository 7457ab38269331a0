#!/usr/bin/env bash
# `trellis server` on a real etcd against the same server on its file
# store, in one run with the same client (issue 13): `trellis bench
# apiserver --mode client` (TLS, bearer token, another process) once with
# the default store and once with --etcd-servers pointing at a throwaway
# single-member etcd (Debian's etcd-server) in a temporary directory. The
# server CPU per request excludes etcd's own; etcd's CPU over its run is
# printed after its table.
#
#   bench/apiserver-etcd.sh [requests (2000)] [clients (1,4,16)] [verbs (create,get)]
#
# Needs a release build (cargo build --release -p trellis) and etcd.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-2000}
CLIENTS=${2:-1,4,16}
VERBS=${3:-create,get}
BIN=${TRELLIS_BIN:-target/release/trellis}
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
tmp=$(mktemp -d -p "$PWD/target")
trap 'kill "$etcd_pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
peer=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
etcd --name bench --data-dir "$tmp/etcd" \
  --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
  --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
  --initial-cluster "bench=http://127.0.0.1:$peer" >"$tmp/etcd.log" 2>&1 &
etcd_pid=$!
for _ in $(seq 1 100); do
  ETCDCTL_API=3 etcdctl --endpoints "http://127.0.0.1:$port" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "## file store"
"$BIN" bench apiserver --mode client --requests "$REQUESTS" --clients "$CLIENTS" --protocols http1 --verbs "$VERBS"
echo
echo "## etcd (single member, same machine)"
before=$(cpu "$etcd_pid")
"$BIN" bench apiserver --mode client --requests "$REQUESTS" --clients "$CLIENTS" --protocols http1 --verbs "$VERBS" \
  --etcd-servers "http://127.0.0.1:$port"
after=$(cpu "$etcd_pid")
echo
echo "etcd CPU during the etcd run: $(( (after - before) * 10 )) ms (clock ticks of 10 ms)"
