#!/bin/sh
# The SSD tier's counters on /metrics (issue 48): `satrap train --status-port` (the same admin and
# /metrics as a cluster's head) with the tier on a RAM budget of ~190 rows per shard shows
# satrap_job_tier_{hits,misses,prefetch_hits,read_bytes,written_bytes}_total and
# satrap_job_tier_ram_bytes for the job while it trains, with hits, misses and bytes written
# above 0; a job without the tier has none of these lines. Loopback port 5761.
# usage: tier_metrics.sh SATRAP TINY_JOB_YAML
set -u
satrap=$1
job=$2
port=5761
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "tier_metrics: $*" >&2; tail -n 5 "$work/train.log" >&2; exit 1; }
metrics() {
  python3 - "http://127.0.0.1:$port/metrics" <<'PY'
import sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
        print(r.read().decode())
except Exception:
    pass
PY
}
mkdir "$work/tier"
"$satrap" train --job "$job" --train-batches 4000000 --threads 2 --status-port $port \
  --embedding-tier ssd --embedding-tier-path "$work/tier" --embedding-tier-ram 32KiB \
  --embedding-tier-store slot_file > "$work/train.log" 2>&1 &
pid=$!
i=0
until metrics > "$work/metrics.txt" &&
      grep -q '^satrap_job_tier_hits_total{job="j1"} [1-9]' "$work/metrics.txt" &&
      grep -q '^satrap_job_tier_written_bytes_total{job="j1"} [1-9]' "$work/metrics.txt"; do
  i=$((i + 1))
  [ $i -lt 150 ] || fail "no tier counters above 0 on /metrics after 30 s"
  kill -0 "$pid" 2>/dev/null || fail "satrap train ended"
  sleep 0.2
done
for name in misses_total prefetch_hits_total read_bytes_total ram_bytes; do
  grep -q "^satrap_job_tier_$name{job=\"j1\"} [0-9]" "$work/metrics.txt" || fail "no satrap_job_tier_$name"
done
grep -q '^satrap_job_tier_misses_total{job="j1"} [1-9]' "$work/metrics.txt" || fail "no misses counted"
grep '^satrap_job_tier_' "$work/metrics.txt"
kill "$pid"
wait "$pid" 2>/dev/null

# Without the tier: no tier lines.
"$satrap" train --job "$job" --train-batches 4000000 --threads 2 --status-port $port \
  > "$work/train.log" 2>&1 &
pid=$!
i=0
until metrics > "$work/metrics.txt" &&
      grep -q '^satrap_job_samples_total{job="j1"} [1-9]' "$work/metrics.txt"; do
  i=$((i + 1))
  [ $i -lt 150 ] || fail "no samples on /metrics after 30 s"
  kill -0 "$pid" 2>/dev/null || fail "satrap train ended"
  sleep 0.2
done
grep -q '^satrap_job_tier_.*{job=' "$work/metrics.txt" && fail "tier lines for a job without the tier"
kill "$pid"
wait "$pid" 2>/dev/null
pid=
echo "tier_metrics: ok"
