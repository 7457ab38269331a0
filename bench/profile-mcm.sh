#!/usr/bin/env bash
# Profiles the controller-manager during `trellis bench mcm --machines N`:
# `perf record` on that process alone for the whole run, then a report by
# symbol (self time), so cost that grows with the fleet shows by name.
#
# Usage: bench/profile-mcm.sh [N]            (default 3000)
#   PROFILE=profiling|release  cargo profile (default profiling: release
#                              plus line tables, so call graphs and inlined
#                              frames resolve; `release` reuses that build)
#   FREQ=499                   samples per second
#   CALLGRAPH=1                record call graphs (DWARF unwinding; large)
#   ROLLOUT=1                  profile the rolling update too
#   OUT=dir                    where perf.data, report.txt and the bench's
#                              own table go (default target/profile-mcm-N)
set -euo pipefail
n=${1:-3000}
profile=${PROFILE:-profiling}
freq=${FREQ:-499}
cd "$(dirname "$0")/.."
cargo build --profile "$profile" -p trellis --quiet
bin=${CARGO_TARGET_DIR:-target}/$profile/trellis
out=${OUT:-target/profile-mcm-$n}
mkdir -p "$out"
args=(bench mcm --machines "$n")
[ "${ROLLOUT:-0}" = 1 ] || args+=(--no-rollout)
"$bin" "${args[@]}" >"$out/bench.md" 2>"$out/bench.log" &
bench=$!
trap 'kill "$bench" 2>/dev/null || true' EXIT
# The bench starts the server, then the controller-manager, as its children.
cm=""
while [ -z "$cm" ]; do
  kill -0 "$bench" 2>/dev/null || { cat "$out/bench.log" >&2; exit 1; }
  cm=$(pgrep -P "$bench" -f ' controller-manager ' | head -n1 || true)
  sleep 0.1
done
graph=()
[ "${CALLGRAPH:-0}" = 1 ] && graph=(--call-graph dwarf,16384)
perf record -F "$freq" "${graph[@]}" -p "$cm" -o "$out/perf.data" >"$out/perf.log" 2>&1 &
perf=$!
wait "$bench"
# perf stops by itself when the controller-manager exits.
wait "$perf" || true
perf report -i "$out/perf.data" --no-children --sort symbol --stdio 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -n 60 >"$out/report.txt"
cat "$out/bench.md"
echo
echo "top symbols (self), $out/report.txt:"
head -n 30 "$out/report.txt"
