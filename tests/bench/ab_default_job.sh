#!/usr/bin/env bash
# ab_default_job: is a change neutral for the default job's speed? Two satrap binaries (A: before,
# B: after, e.g. the previous main's build and this one) run the same job alternately, ROUNDS
# times each (A B A B ...; the order flips every round, so a load that drifts hits both alike).
# Per run: samples/s and test AUC from `satrap train --json`; at the end the medians and their
# ratio:
#   ab round=<i> which=<A|B> samples_per_sec=<sps> test_auc=<auc> seconds=<wall>
#   ab_summary a_sps=<median> b_sps=<median> ratio=<b/a> a_auc=<median> b_auc=<median> rounds=N
# The job is the default one unless ARGS say otherwise (e.g. `--train-batches 8000` for a shorter run).
#
# usage: tests/bench/ab_default_job.sh A_BIN B_BIN [ROUNDS=3] [-- satrap train ARGS...]
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,12p' "$0"
  exit 2
fi
a=$1 b=$2
shift 2
rounds=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  rounds=$1
  shift
fi
[ "${1:-}" = "--" ] && shift
args=("$@")
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "ab_default_job: '$bin' is not an executable" >&2; exit 2; }
done

run() {  # run BIN -> "sps auc seconds"
  local start end line
  start=$(date +%s.%N)
  line=$("$1" train --json "${args[@]}" 2>/dev/null | tail -n 1)
  end=$(date +%s.%N)
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); print(r["samples_per_sec"], r["test_auc"], "%.1f" % (float(sys.argv[3]) - float(sys.argv[2])))' \
    "$line" "$start" "$end"
}

a_sps=() b_sps=() a_auc=() b_auc=()
for ((i = 1; i <= rounds; i++)); do
  order=(A B)
  ((i % 2 == 0)) && order=(B A)
  for which in "${order[@]}"; do
    bin=$a
    [ "$which" = B ] && bin=$b
    read -r sps auc secs < <(run "$bin")
    echo "ab round=$i which=$which samples_per_sec=$sps test_auc=$auc seconds=$secs"
    if [ "$which" = A ]; then a_sps+=("$sps"); a_auc+=("$auc"); else b_sps+=("$sps"); b_auc+=("$auc"); fi
  done
done
python3 - "${a_sps[*]}" "${b_sps[*]}" "${a_auc[*]}" "${b_auc[*]}" "$rounds" <<'EOF'
import statistics, sys
a, b, aa, ba = ([float(x) for x in s.split()] for s in sys.argv[1:5])
ma, mb = statistics.median(a), statistics.median(b)
print(f"ab_summary a_sps={ma:.0f} b_sps={mb:.0f} ratio={mb / ma:.3f} "
      f"a_auc={statistics.median(aa):.4f} b_auc={statistics.median(ba):.4f} rounds={sys.argv[5]}")
EOF
