#!/usr/bin/env bash
# Time from `trellis up --demo` (process start, fresh data dir) to three
# Running machines, as the demo itself reports it. Usage: bench/up-demo.sh [RUNS]
set -euo pipefail
runs=${1:-5}
cd "$(dirname "$0")/.."
cargo build --release -p trellis --quiet
bin=${CARGO_TARGET_DIR:-target}/release/trellis
for i in $(seq "$runs"); do
  dir=$(mktemp -d)
  start=$(date +%s.%N)
  "$bin" up --demo --data-dir "$dir" --listen 127.0.0.1:0 2>/dev/null | while read -r line; do
    case $line in
      "demo: 3/3 machines Running after"*)
        end=$(date +%s.%N)
        echo "run $i: ${line#demo: }; wall clock from exec: $(echo "$end - $start" | bc)s"
        pkill -TERM -f "up --demo --data-dir $dir" || true
        ;;
    esac
  done
  rm -rf "$dir"
done
