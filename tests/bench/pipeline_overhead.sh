#!/usr/bin/env bash
# pipeline_overhead (issue 17): does the actor pipeline earn its threads?
#
# Part 1: the default job through the actor pipeline (`satrap train`, the embedded job: loaders,
# shards, aggregator, trainer as actors on all cores) against the plain single-threaded reference
# loop (models/reference_trainer, `satrap_reference_run`, OpenBLAS at 1 thread) on the same
# samples: the same synthetic data, model and options (the defaults of both are the same), the
# same number of batches. Both count training samples over training wall time, data generation
# included. They run alternately, ROUNDS times, so the machine's load hits both; per round the
# ratio pipeline/reference, and the median:
#   ratio=<median> pipeline_sps=<median> reference_sps=<median> cpu_ratio=<median>
#   two_core_ceiling=<2 / cpu_ratio> rounds=N
# (goal: ratio >= 1.5 on 2 cores). cpu_ratio is the pipeline's CPU time over the reference's.
#
# Part 2 (unless SIZES is empty): cost as work grows, the default model on tables of ~1M, ~10M and
# ~50M rows. The ids are spread (zipf exponent ZIPF_GROW, vocab = rows / slots per slot) and the
# job runs enough batches that the table fills; per size: samples/s of the pipeline, rows held,
# peak resident memory (/usr/bin/time) and bytes per row (peak RSS less a tiny job's RSS, over
# rows). One line per size:
#   rows_target=<N> rows=<held> samples_per_sec=<sps> peak_rss_mb=<MB> bytes_per_row=<B>
#
# usage: tests/bench/pipeline_overhead.sh [ROUNDS=3] [BATCHES=2000]
# env: SIZES="1000000 10000000 50000000" (rows; empty: skip part 2), ZIPF_GROW=0.5,
#      SATRAP_BIN, REFERENCE_BIN (default build/bin/satrap and build/bin/satrap_reference_run).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=${1:-3}
batches=${2:-2000}
sizes=${SIZES-"1000000 10000000 50000000"}
zipf_grow=${ZIPF_GROW:-0.5}
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
reference="${REFERENCE_BIN:-$root/build/bin/satrap_reference_run}"
for b in "$satrap" "$reference"; do
  [ -x "$b" ] || { echo "build first: cmake --build build --target satrap satrap_reference_run ($b)" >&2; exit 2; }
done
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each run prints "<samples/s> <CPU seconds, user + system, all threads>".
run_pipeline() {
  /usr/bin/time -f '%U %S' -o "$tmp/cpu" "$satrap" train --json --train-batches "$batches" \
    --test-batches 10 "$@" | tail -n 1 |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["samples_per_sec"]), end=" ")'
  awk '{print $1 + $2}' "$tmp/cpu"
}
run_reference() {
  OPENBLAS_NUM_THREADS=1 /usr/bin/time -f '%U %S' -o "$tmp/cpu" "$reference" \
    train_batches "$batches" test_batches 10 | sed -n 's/.*samples_per_sec \([0-9.]*\).*/\1/p' | tr '\n' ' '
  awk '{print $1 + $2}' "$tmp/cpu"
}

p_sps=() r_sps=() p_cpu=() r_cpu=()
for i in $(seq 1 "$rounds"); do
  if (( i % 2 )); then
    read -r p pc < <(run_pipeline); read -r r rc < <(run_reference)
  else
    read -r r rc < <(run_reference); read -r p pc < <(run_pipeline)
  fi
  echo "round $i: pipeline ${p} samples/s (${pc} CPU s), reference ${r} samples/s (${rc} CPU s)"
  p_sps+=("$p") r_sps+=("$r") p_cpu+=("$pc") r_cpu+=("$rc")
done
# cpu_ratio: the pipeline's CPU time over the reference's for the same work (both whole
# processes, the same test batches). On C idle cores the pipeline can at best reach
# C / cpu_ratio times the reference: a figure that holds on a loaded machine, where wall time
# does not (the other jobs take the second core).
python3 - "${p_sps[*]}" "${r_sps[*]}" "${p_cpu[*]}" "${r_cpu[*]}" <<'PY'
import statistics, sys
p, r, pc, rc = ([float(x) for x in a.split()] for a in sys.argv[1:5])
m = statistics.median
cpu = m([a / b for a, b in zip(pc, rc)])
print(f"ratio={m([a / b for a, b in zip(p, r)]):.2f} pipeline_sps={m(p):.0f} "
      f"reference_sps={m(r):.0f} cpu_ratio={cpu:.2f} two_core_ceiling={2 / cpu:.2f} rounds={len(p)}")
PY

[ -n "$sizes" ] || exit 0
# One job under /usr/bin/time: prints "<samples/s> <rows> <peak RSS KiB>".
measure() {
  /usr/bin/time -f '%M' -o "$tmp/rss" "$satrap" train --json --test-batches 1 "$@" > "$tmp/out"
  tail -n 1 "$tmp/out" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(round(j["samples_per_sec"]), j["embedding_rows"], end=" ")'
  cat "$tmp/rss"
}
read -r _ _ base_kib < <(measure --vocab 1000 --train-batches 20)
echo "baseline: a tiny job's peak RSS ${base_kib} KiB"
for rows in $sizes; do
  vocab=$(( rows / 8 ))
  # Enough id draws (8 per sample) to touch ~2x the rows, so the table is nearly full.
  fill_batches=$(( rows * 2 / 8 / 1024 + 1 ))
  read -r sps held kib < <(measure --vocab "$vocab" --zipf "$zipf_grow" --train-batches "$fill_batches")
  python3 - "$rows" "$held" "$sps" "$kib" "$base_kib" "$fill_batches" <<'PY'
import sys
target, held, sps, kib, base, batches = (int(x) for x in sys.argv[1:])
print(f"rows_target={target} rows={held} samples_per_sec={sps} peak_rss_mb={kib / 1024:.0f} "
      f"bytes_per_row={(kib - base) * 1024 / max(held, 1):.1f} batches={batches}")
PY
done
