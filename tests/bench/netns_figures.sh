#!/usr/bin/env bash
# Samples/s of the default job on the 3-node cluster over namespaces (ops/netns/netns.sh), at
# staleness 0, 2 and 8, across links of 1, 10 and 25 Gbit/s and two added latencies, each cell
# beside the embedded run of the same job right after it (tests/cluster/netns_cluster_test.sh,
# which also checks the AUC). A delay `bridge` is the kernel bridge (no relay, no added latency);
# a number is the frame relay with that one-way delay in microseconds. Root only; one cell at a time.
# usage: tests/bench/netns_figures.sh [TRAIN_BATCHES=1500] [DELAYS_US="bridge 100 1000"] [RATES="1gbit 10gbit 25gbit"] [STALENESS="0 2 8"]
# Prints one line per cell, then a markdown table of cluster samples/s (and the cluster/embedded
# ratio) per link and latency by staleness, and the staleness 8 / staleness 0 gain per row.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
satrap=$root/build/bin/satrap
relay=$root/build/bin/netns_delay_relay
batches=${1:-1500}
delays=${2:-bridge 100 1000}
rates=${3:-1gbit 10gbit 25gbit}
stalenesses=${4:-0 2 8}
out=$(mktemp /tmp/satrap-netns-figures.XXXXXX)
trap 'rm -f "$out"' EXIT
for d in $delays; do
  for r in $rates; do
    for k in $stalenesses; do
      if [ "$d" = bridge ]; then args=("$r" 0 "" "$k"); else args=("$r" "$d" "$relay" "$k"); fi
      # A cell that has not ended in 300 s is reported as failed (the test's trap cleans up).
      res=$(timeout 300 "$root/tests/cluster/netns_cluster_test.sh" "$satrap" "$batches" "${args[@]}" \
              2>&1 || true)
      line=$(grep '^netns_rate=' <<< "$res" | sed "s/netns_delay_us=0 /netns_delay_us=bridge /" || true)
      [ -n "$line" ] && line="$line $(grep '^netns_tc_drops=' <<< "$res" || true)"
      [ -n "$line" ] || line="netns_rate=$r netns_delay_us=$d cluster_sps=0 sps_ratio=0 failed=1"
      echo "staleness=$k $line" | tee -a "$out"
    done
  done
done
python3 - "$out" "$stalenesses" <<'PY'
import sys
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1])]
ks = sys.argv[2].split()
print()
print("| link | switch, one-way delay | " + " | ".join(f"staleness {k}: samples/s (x embedded)" for k in ks)
      + f" | staleness {ks[-1]} / {ks[0]} |")
print("| --- | --- | " + " | ".join("---" for _ in ks) + " | --- |")
keys = []
for r in rows:
    key = (r["netns_rate"], r["netns_delay_us"])
    if key not in keys:
        keys.append(key)
for rate, d in keys:
    cells = {r["staleness"]: r for r in rows if (r["netns_rate"], r["netns_delay_us"]) == (rate, d)}
    def cell(k):
        r = cells.get(k)
        return "-" if r is None else f"{float(r['cluster_sps']):,.0f} ({float(r['sps_ratio']):.2f})"
    lo, hi = cells.get(ks[0]), cells.get(ks[-1])
    gain = (f"{float(hi['cluster_sps']) / float(lo['cluster_sps']):.2f}"
            if lo and hi and float(lo["cluster_sps"]) > 0 else "-")
    print(f"| {rate} | {d if d == 'bridge' else d + ' us'} | " + " | ".join(cell(k) for k in ks) + f" | {gain} |")
PY
