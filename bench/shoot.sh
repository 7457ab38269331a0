#!/usr/bin/env bash
# Time from applying a Shoot with POOLS pools x 3 zones x PER_POOL machines
# (boot delay 0) to all of its nodes Ready in the shoot's own API server,
# against a fresh `trellis up`. Usage: bench/shoot.sh [POOLS] [PER_POOL]
set -euo pipefail
pools=${1:-3}
per_pool=${2:-100}
cd "$(dirname "$0")/.."
cargo build --release -p trellis --quiet
bin=${CARGO_TARGET_DIR:-target}/release/trellis
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" up --data-dir "$dir" --listen "127.0.0.1:$port" --log-level warn >/dev/null 2>&1 &
up=$!
trap 'kill $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$dir"' EXIT
export KUBECONFIG=$dir/admin.kubeconfig
until kubectl get --raw /readyz >/dev/null 2>&1; do sleep 0.2; done
kubectl apply -f examples/shoot/cloudprofile.yaml >/dev/null
workers=""
for i in $(seq "$pools"); do
  workers+="
      - name: pool$i
        machine: {type: local-small, image: {name: gardenlinux, version: 1592.2.0}}
        minimum: $per_pool
        maximum: $per_pool
        maxSurge: 10%
        zones: [zone-a, zone-b, zone-c]"
done
total=$((pools * per_pool))
start=$(date +%s.%N)
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata: {name: garden-bench}
---
apiVersion: core.gardener.cloud/v1beta1
kind: Shoot
metadata: {name: big, namespace: garden-bench}
spec:
  cloudProfile: {kind: CloudProfile, name: local}
  region: local
  kubernetes: {version: "1.31"}
  provider:
    type: local
    workers:$workers
YAML
ns=shoot--bench--big
until kubectl get secret kubeconfig -n $ns -o jsonpath='{.data.kubeconfig}' 2>/dev/null | base64 -d > "$dir/shoot.kc" && [ -s "$dir/shoot.kc" ]; do sleep 0.2; done
while :; do
  ready=$(kubectl --kubeconfig "$dir/shoot.kc" get nodes --no-headers 2>/dev/null | awk '$2=="Ready"' | wc -l)
  [ "$ready" -ge "$total" ] && break
  sleep 0.5
done
end=$(date +%s.%N)
echo "shoot with $pools pools x 3 zones, $total machines: apply -> $ready nodes Ready in $(echo "$end - $start" | bc) s"
until [ "$(kubectl get shoot big -n garden-bench -o jsonpath='{.status.lastOperation.state}')" = Succeeded ]; do sleep 0.5; done
end=$(date +%s.%N)
echo "  shoot lastOperation Succeeded after $(echo "$end - $start" | bc) s"
echo "  trellis RSS: $(ps -o rss= -p $up | awk '{printf "%.0f MiB", $1/1024}')"
