#!/usr/bin/env bash
# A PyTorch module trained by satrap (model.type torchscript) against the plain PyTorch loop of
# ../shared/bench/torch_dlrm.py, and against satrap's built-in DLRM, on one model shape: the DLRM
# of the Criteo Kaggle reference (13 dense features, 26 slots of 1M rows, dim 16, bottom MLP
# 512-256-64-16, dot interaction, top MLP 512-256-1, batch 2048, Adagrad on both sides). The
# TorchScript module is examples/models/models.py's DLRM scripted at that shape (the same layers,
# parameters and FLOPs as torch_dlrm.py's dense part; each side prints its parameter count).
# PyTorch runs with 1 and 2 intra-op threads and the baseline is its best in each round; the four
# run interleaved (the order rotates every round). The last line is
#   ts_vs_torch=<median of torchscript / max(torch 1t, torch 2t)>
#   builtin_vs_ts=<median of built-in / torchscript> ts_sps=... builtin_sps=... torch_best_sps=...
# usage: tests/bench/torchscript_vs_torch.sh [ROUNDS=5] [STEPS=60]
# Needs python3-torch (ops/setup.sh --bench) and a satrap built with its libtorch plugin.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
rounds=${1:-5}
steps=${2:-60}
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
torch_py="$root/../shared/bench/torch_dlrm.py"
[ -x "$satrap" ] || { echo "build first: ops/setup.sh" >&2; exit 2; }
[ -f "$torch_py" ] || { echo "missing $torch_py" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/examples/models/script.py" dlrm -o "$work/dlrm.pt" --dense-features 13 \
  --slots 26 --dim 16 --bottom 512,256,64 --top 512,256 --interaction dot
common=(--slots 26 --vocab 1000000 --zipf 1.1 --dim 16 --batch-size 2048 --train-batches "$steps"
        --test-batches 1 --dense-optimizer adagrad --dense-lr 0.05 --embedding-optimizer adagrad
        --embedding-lr 0.05 --dense-ema 0)
run_satrap() {
  "$satrap" train --json "${common[@]}" "$@" | tail -n 1 |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["samples_per_sec"]))'
}
run_builtin() { run_satrap --bottom 512,256,64 --top 512,256 --interaction dot; }
run_ts() { run_satrap --model torchscript --model-file "$work/dlrm.pt"; }
run_torch() {
  /usr/bin/python3 "$torch_py" --steps "$steps" --threads "$1" | sed -n 's/.*: \([0-9.]*\) samples\/s/\1/p'
}
echo "model: DLRM 13-512-256-64-16, dot interaction, top 512-256-1, 26 slots x dim 16 (all three sides)"
ts=() bi=() t1=() t2=()
for i in $(seq 1 "$rounds"); do
  a="" b="" c="" d=""
  for k in 0 1 2 3; do
    case $(( (i + k) % 4 )) in
      0) a=$(run_ts) ;;
      1) b=$(run_builtin) ;;
      2) c=$(run_torch 1) ;;
      3) d=$(run_torch 2) ;;
    esac
  done
  echo "round $i: torchscript ${a}, built-in ${b}, torch 1 thread ${c}, torch 2 threads ${d} samples/s"
  ts+=("$a") bi+=("$b") t1+=("$c") t2+=("$d")
done
python3 - "${ts[*]}" "${bi[*]}" "${t1[*]}" "${t2[*]}" <<'PY'
import statistics, sys
ts, bi, t1, t2 = ([float(x) for x in a.split()] for a in sys.argv[1:5])
best = [max(a, b) for a, b in zip(t1, t2)]
m = statistics.median
print(f"ts_vs_torch={m([a / b for a, b in zip(ts, best)]):.2f} "
      f"builtin_vs_ts={m([a / b for a, b in zip(bi, ts)]):.2f} ts_sps={m(ts):.0f} "
      f"builtin_sps={m(bi):.0f} torch_best_sps={m(best):.0f} torch_1t_sps={m(t1):.0f} "
      f"torch_2t_sps={m(t2):.0f} rounds={len(ts)}")
PY
