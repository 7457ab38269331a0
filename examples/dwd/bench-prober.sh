#!/usr/bin/env bash
# The prober's cost per shoot: SHOOTS Clusters, each with NODES nodes,
# leases and machines, probed by `trellis dependency-watchdog prober` (its
# own process) against one `trellis server` that is both the seed and every
# shoot (each probe Secret holds the server's own kubeconfig). Leases are
# renewed far in the future, so every probe is a healthy one and runs the
# scale-up flow (which finds machine-controller-manager at 1 and does
# nothing): the steady state of a healthy seed.
#
#   examples/dwd/bench-prober.sh [TRELLIS] [SHOOTS] [NODES] [SECONDS]
#   examples/dwd/bench-prober.sh target/release/trellis 100 30 60
#
# Prints the prober's CPU (utime+stime from /proc) over SECONDS after a
# warm-up, the probes it ran, and the API requests the server served.
set -euo pipefail
T=${1:-target/release/trellis}
SHOOTS=${2:-100}
NODES=${3:-30}
SECS=${4:-60}
dir=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
cleanup() { kill "${prober:-}" "${server:-}" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

"$T" server --insecure-http --in-memory --listen "127.0.0.1:$port" --data-dir "$dir" >/dev/null 2>&1 &
server=$!
for _ in $(seq 100); do
  [ -f "$dir/admin.kubeconfig" ] && curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.2
done
export KUBECONFIG="$dir/admin.kubeconfig"
kc_b64=$(base64 -w0 < "$KUBECONFIG")

{
  echo "apiVersion: v1"; echo "kind: List"; echo "items:"
  for j in $(seq 0 $((NODES - 1))); do
    echo "- {apiVersion: v1, kind: Node, metadata: {name: node-$j, labels: {worker.gardener.cloud/pool: pool-a}}}"
    echo "- {apiVersion: coordination.k8s.io/v1, kind: Lease, metadata: {name: node-$j, namespace: kube-node-lease}, spec: {holderIdentity: node-$j, leaseDurationSeconds: 40, renewTime: '2099-01-01T00:00:00.000000Z'}}"
  done
} > "$dir/nodes.yaml"
kubectl create -f "$dir/nodes.yaml" >/dev/null

for i in $(seq 1 "$SHOOTS"); do
  ns="shoot--bench--s$i"
  {
    echo "apiVersion: v1"; echo "kind: List"; echo "items:"
    echo "- {apiVersion: v1, kind: Namespace, metadata: {name: $ns}}"
    echo "- {apiVersion: v1, kind: Secret, metadata: {name: shoot-access-dependency-watchdog-probe, namespace: $ns}, data: {kubeconfig: $kc_b64}}"
    echo "- {apiVersion: apps/v1, kind: Deployment, metadata: {name: machine-controller-manager, namespace: $ns}, spec: {replicas: 1, selector: {matchLabels: {app: mcm}}, template: {metadata: {labels: {app: mcm}}, spec: {containers: [{name: c, image: trellis.dev/exec}]}}}}"
    for j in $(seq 0 $((NODES - 1))); do
      echo "- {apiVersion: machine.sapcloud.io/v1alpha1, kind: Machine, metadata: {name: m-$j, namespace: $ns, labels: {node: node-$j}}, spec: {class: {kind: MachineClass, name: local}}}"
    done
  } > "$dir/shoot-$i.yaml"
  kubectl create -f "$dir/shoot-$i.yaml" >/dev/null 2>&1
  cat > "$dir/cluster-$i.yaml" <<EOF
apiVersion: extensions.gardener.cloud/v1alpha1
kind: Cluster
metadata: {name: $ns}
spec:
  cloudProfile: {}
  seed: {}
  shoot:
    apiVersion: core.gardener.cloud/v1beta1
    kind: Shoot
    metadata: {name: s$i, namespace: garden-bench}
    spec: {provider: {type: local, workers: [{name: pool-a}]}}
    status:
      technicalID: $ns
      lastOperation: {type: Create, state: Succeeded, progress: 100}
EOF
  kubectl create -f "$dir/cluster-$i.yaml" >/dev/null
done

# The example config with the prober's first probe at once.
sed 's/^nodeLeaseFailureFraction: .*/&\ninitialDelay: 0s/' \
  "$(dirname "$0")/prober-config.yaml" > "$dir/prober.yaml"
mport=$(( port + 1 ))
"$T" dependency-watchdog prober --config-file "$dir/prober.yaml" --kubeconfig "$KUBECONFIG" \
  --kube-api-qps 1000 --kube-api-burst 2000 \
  --metrics-bind-addr "127.0.0.1:$mport" --health-bind-addr 0 >/dev/null 2>&1 &
prober=$!

probes() { curl -s "http://127.0.0.1:$mport/metrics" | awk '/^dwd_prober_probes_total/ {s += $NF} END {print s + 0}'; }
requests() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^apiserver_request_total/ {s += $NF} END {print s + 0}'; }
cpu() { awk '{print $14 + $15}' "/proc/$prober/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$prober/status"; }

sleep 20 # warm-up: every prober started and probed once
c0=$(cpu); p0=$(probes); r0=$(requests)
sleep "$SECS"
c1=$(cpu); p1=$(probes); r1=$(requests)
tck=$(getconf CLK_TCK)
awk -v c=$((c1 - c0)) -v t="$tck" -v p=$((p1 - p0)) -v r=$((r1 - r0)) -v s="$SECS" \
    -v shoots="$SHOOTS" -v nodes="$NODES" -v rss="$(rss)" 'BEGIN {
  cpu = c / t
  printf "| shoots | nodes each | window | probes | prober CPU | CPU per probe | CPU per shoot | requests per probe | prober RSS |\n"
  printf "|---|---|---|---|---|---|---|---|---|\n"
  printf "| %d | %d | %d s | %d | %.2f s (%.1f %% of a core) | %.2f ms | %.3f ms per s | %.1f | %d MiB |\n",
    shoots, nodes, s, p, cpu, 100 * cpu / s, (p ? 1000 * cpu / p : 0), 1000 * cpu / s / shoots,
    (p ? r / p : 0), rss / 1024
}'
