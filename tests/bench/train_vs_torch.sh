#!/usr/bin/env bash
# satrap train (embedded) against the PyTorch DLRM baseline of ../shared/bench/torch_dlrm.py, on the
# same model shape: DLRM of the Criteo Kaggle reference (13 dense features, 26 slots of 1M rows,
# dim 16, bottom MLP 512-256-64-16, top MLP 512-256-1, batch 2048, Adagrad on both sides).
# The two run alternately (A B A B ...) so that the machine's noise hits both; the last line is
#   ratio=<median satrap/torch samples/s> satrap_sps=<median> torch_sps=<median> pairs=N
# usage: tests/bench/train_vs_torch.sh [PAIRS=5] [STEPS=60] [extra satrap flags...]
# SATRAP_BIN: the satrap binary to run (default: build/bin/satrap).
# Needs python3-torch (ops/setup.sh --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pairs=${1:-5}
steps=${2:-60}
shift $(( $# > 2 ? 2 : $# ))
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
torch_py="$root/../shared/bench/torch_dlrm.py"
[ -x "$satrap" ] || { echo "build first: ops/setup.sh" >&2; exit 2; }
[ -f "$torch_py" ] || { echo "missing $torch_py" >&2; exit 2; }
s_sps=()
t_sps=()
for i in $(seq 1 "$pairs"); do
  s=$("$satrap" train --json --slots 26 --vocab 1000000 --zipf 1.1 --dim 16 --bottom 512,256,64 \
        --top 512,256 --batch-size 2048 --train-batches "$steps" --test-batches 1 \
        --dense-optimizer adagrad --dense-lr 0.05 --embedding-optimizer adagrad --embedding-lr 0.05 \
        "$@" | tail -n 1 | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["samples_per_sec"]))')
  t=$(/usr/bin/python3 "$torch_py" --steps "$steps" --threads 2 | sed -n 's/.*: \([0-9.]*\) samples\/s/\1/p')
  echo "pair $i: satrap ${s} samples/s, torch ${t} samples/s"
  s_sps+=("$s")
  t_sps+=("$t")
done
python3 - "${s_sps[*]}" "${t_sps[*]}" <<'PY'
import statistics, sys
s = [float(x) for x in sys.argv[1].split()]
t = [float(x) for x in sys.argv[2].split()]
r = [a / b for a, b in zip(s, t)]
print(f"ratio={statistics.median(r):.2f} satrap_sps={statistics.median(s):.0f} "
      f"torch_sps={statistics.median(t):.0f} pairs={len(r)}")
PY
