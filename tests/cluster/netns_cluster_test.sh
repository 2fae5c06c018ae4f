#!/usr/bin/env bash
# The 3-node cluster over a network that is not loopback: four network namespaces on this machine
# (ops/netns/netns.sh), the head in the first, one node in each of the others, every link capped
# with tc (and, with a relay and DELAY_US > 0, a latency). Users' commands: `satrap certs`,
# `satrap supervise` on each node's host (its namespace; the node's manifest host is one of that
# namespace's addresses), `satrap up` on the head's, `satrap submit --follow`; the job's test AUC
# is compared with the embedded run of the same job, then everything is stopped and the
# namespaces removed, and the test fails if any is left.
# Exit 77 (skipped) when not root or namespaces, veth pairs or tbf are not available here.
# usage: netns_cluster_test.sh SATRAP [TRAIN_BATCHES] [RATE=10gbit] [DELAY_US=0] [RELAY] [STALENESS]
#   The last line is key=value pairs (samples/s of both runs and their ratio).
set -euo pipefail
satrap=$(realpath "$1")
batches=${2:-}
rate=${3:-10gbit}
delay=${4:-0}
relay=${5:+$(realpath "$5")}
staleness=${6:-}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
netns="$root/ops/netns/netns.sh"
"$netns" check || exit 77
prefix="st$(( $$ % 100000 ))"
work=$(mktemp -d /tmp/satrap-netns-test.XXXXXX)
state="$work/state"
sups=()
cleanup() {
  set +e
  for pid in "${sups[@]}"; do kill "$pid" 2> /dev/null; done
  for pid in "${sups[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null
  done
  ip netns exec "$prefix-0" "$satrap" down --manifest "$work/manifest.yaml" --state-dir "$state" \
    > /dev/null 2>&1
  "$netns" down "$prefix"
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "netns_cluster_test: FAIL: $*" >&2
  for f in "$state"/*.log; do echo "== $f"; tail -n 20 "$f"; done >&2
  exit 1
}
in_ns() { local i=$1; shift; ip netns exec "$prefix-$i" "$@"; }

"$netns" up "$prefix" 4 "$rate" "$delay" $relay || fail "netns up"
cat > "$work/manifest.yaml" <<YAML
cluster: netns-$prefix
head: {host: 10.77.0.1, port: 5700, status_port: 5709}
nodes:
  - {name: node-0, host: 10.77.0.2, port: 5701, resources: {cores: 2, memory: 4GiB, gpus: 0}}
  - {name: node-1, host: 10.77.0.3, port: 5701, resources: {cores: 2, memory: 4GiB, gpus: 0}}
  - {name: node-2, host: 10.77.0.4, port: 5701, resources: {cores: 2, memory: 4GiB, gpus: 0}}
YAML
{
  echo "name: netns-test"
  t=()
  [ -n "$batches" ] && t+=("train_batches: $batches")
  [ -n "$staleness" ] && t+=("staleness: $staleness")
  if [ ${#t[@]} -gt 0 ]; then (IFS=,; echo "training: {${t[*]}}"); fi
} > "$work/job.yaml"
cd "$work"
mkdir -p "$state"
"$satrap" certs --manifest manifest.yaml --out "$state/certs" > /dev/null || fail "satrap certs"
for i in 1 2 3; do
  ip netns exec "$prefix-$i" "$satrap" supervise --manifest manifest.yaml --state-dir "$state" \
    > "$work/supervise-$i.out" 2>&1 &
  sups+=($!)
done
in_ns 0 "$satrap" up --manifest manifest.yaml --state-dir "$state" --wait 60 || fail "satrap up"
# Each node process runs in its own namespace and listens on that namespace's address only.
for i in 1 2 3; do
  pids=$(ip netns pids "$prefix-$i")
  pgrep -f -- "node --name node-$((i - 1)) .*--state-dir $state" | grep -qxF -f <(tr ' ' '\n' <<<"$pids") \
    || fail "node-$((i - 1)) is not running in $prefix-$i"
done
in_ns 0 "$satrap" submit job.yaml --follow --json --manifest manifest.yaml --state-dir "$state" \
  > submit.out 2> submit.err || fail "the job did not succeed: $(cat submit.out submit.err)"
"$satrap" train --job job.yaml --json > embedded.out 2> /dev/null || fail "embedded run"
python3 - submit.out embedded.out "$rate" "$delay" <<'PY' || fail "AUC differs"
import json, sys
cluster = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
embedded = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
d = abs(cluster["test_auc"] - embedded["test_auc"])
print(f"netns_rate={sys.argv[3]} netns_delay_us={sys.argv[4]} "
      f"cluster_test_auc={cluster['test_auc']:.4f} embedded_test_auc={embedded['test_auc']:.4f} "
      f"auc_delta={d:.4f} cluster_sps={cluster['samples_per_sec']:.0f} "
      f"embedded_sps={embedded['samples_per_sec']:.0f} "
      f"sps_ratio={cluster['samples_per_sec'] / embedded['samples_per_sec']:.3f}")
assert cluster["state"] == "SUCCEEDED"
assert d <= 0.005, d
PY
# Bytes through the node namespaces' links (both ways): a cluster that ran somewhere else fails here.
for i in 1 2 3; do
  b=$(in_ns $i cat /sys/class/net/eth0/statistics/tx_bytes)
  [ "$b" -gt 1000000 ] || fail "node namespace $i sent only $b bytes"
done
# Frames the links' tbf queues dropped (both ends of every link): TCP resends them after a
# timeout, which a synchronous step (staleness 0) waits for.
drops=0
for i in 0 1 2 3; do
  for d in $(in_ns $i tc -s qdisc show dev eth0 | grep -o 'dropped [0-9]*' | awk '{print $2}') \
           $(tc -s qdisc show dev "${prefix}v$i" | grep -o 'dropped [0-9]*' | awk '{print $2}'); do
    drops=$(( drops + d ))
  done
done
echo "netns_tc_drops=$drops"
trap - EXIT
cleanup
if ip netns list | grep -q "^$prefix-"; then echo "netns_cluster_test: FAIL: namespaces left" >&2; exit 1; fi
if ip -o link show | grep -q ": ${prefix}[vb]"; then echo "netns_cluster_test: FAIL: links left" >&2; exit 1; fi
if pgrep -f -- "--state-dir $state" > /dev/null; then echo "netns_cluster_test: FAIL: processes left" >&2; exit 1; fi
echo "netns_cluster_test: PASS"
