#!/usr/bin/env bash
# kafka_bench: does one loader decode a Kafka stream at >= 2x the default job's training rate
# (issue 46)? In the same go: the default job (`satrap train --json`, synthetic data) for its
# training samples/s, then kafka_read_bench (Criteo TSV and JSON lines from librdkafka's mock
# cluster, one thread) for its decode rate; prints each and their ratio:
#   kafka_bench train_sps=<sps> criteo_sps=<sps> ratio=<x> jsonl_sps=<sps> ratio=<x>
# usage: tests/bench/kafka_bench.sh BUILD_DIR [SAMPLES=60000] [-- satrap train ARGS...]
set -euo pipefail
build=${1:?usage: kafka_bench.sh BUILD_DIR [SAMPLES] [-- ARGS]}
shift
samples=60000
if [ $# -gt 0 ] && [ "$1" != "--" ]; then samples=$1; shift; fi
[ "${1:-}" = "--" ] && shift
train_sps=$("$build/bin/satrap" train --json "$@" | tail -1 |
  python3 -c 'import json,sys; print(round(json.loads(sys.stdin.read())["samples_per_sec"]))')
criteo=$("$build/bin/kafka_read_bench" "$samples" 12 512 criteo)
echo "$criteo"
jsonl=$("$build/bin/kafka_read_bench" "$samples" 12 512 jsonl)
echo "$jsonl"
sps() { sed -n 's/.*samples_per_sec=\([0-9]*\).*/\1/p' <<<"$1"; }
python3 - "$train_sps" "$(sps "$criteo")" "$(sps "$jsonl")" <<'PY'
import sys
t, c, j = (float(x) for x in sys.argv[1:])
print(f"kafka_bench train_sps={t:.0f} criteo_sps={c:.0f} ratio={c / t:.2f} "
      f"jsonl_sps={j:.0f} ratio={j / t:.2f}")
PY
