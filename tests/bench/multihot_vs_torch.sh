#!/usr/bin/env bash
# Multi-hot speed (issue 44): satrap train (embedded, built-in DLRM, sum pooling) against
# PyTorch's nn.EmbeddingBag DLRM of the same shapes (tests/bench/torch_multihot_dlrm.py), on bags
# of MLPerf DLRM-v2's hotness profile: 26 tables with bag sizes 3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,
# 1,1,1,12,100,27,10,3,1,1 (214 ids a sample), Zipf(1.1) ids over 1M rows per table. The dense side
# is the Criteo Kaggle DLRM of train_vs_torch.sh (13 dense, bottom 512-256-64-DIM, dot interaction,
# top 512-256-1, Adagrad on both sides, batch 2048). MLPerf's dim 128 and its larger MLPs are
# scaled down to DIM (default 16) to fit this 2-core machine; both sides print their shapes.
# PyTorch runs with 1 and 2 intra-op threads, and its best of the two each round is the baseline;
# the three runs are interleaved (the order rotates every round). The last line is
#   ratio=<median over rounds of satrap / max(torch 1t, torch 2t)> satrap_sps=... torch_best_sps=...
# usage: tests/bench/multihot_vs_torch.sh [ROUNDS=3] [STEPS=60] [DIM=16]
# SATRAP_BIN: the satrap binary (default build/bin/satrap). Needs python3-torch (ops/setup.sh --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/tests/bench/vs_torch_rounds.sh"
rounds=${1:-3}
steps=${2:-60}
dim=${3:-16}
hotness=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
torch_py="$root/tests/bench/torch_multihot_dlrm.py"
[ -x "$satrap" ] || { echo "build first: ops/setup.sh" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "needs python3-torch: ops/setup.sh --bench" >&2; exit 2; }
echo "satrap shapes: slots=26 bag_sizes=[$hotness] dim=$dim vocab/slot=1000000 bottom=13-512-256-64-$dim interaction=dot top=512-256-1 batch=2048 pooling=sum"
run_satrap() {
  "$satrap" train --json --slots 26 --bag-sizes "$hotness" --vocab 1000000 --zipf 1.1 --dim "$dim" \
    --bottom 512,256,64 --top 512,256 --interaction dot --pooling sum --batch-size 2048 \
    --train-batches "$steps" --test-batches 1 --dense-optimizer adagrad --dense-lr 0.05 \
    --embedding-optimizer adagrad --embedding-lr 0.05 \
    | tail -n 1 | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["samples_per_sec"]))'
}
run_torch() {
  local out
  out=$(/usr/bin/python3 "$torch_py" --steps "$steps" --threads "$1" --dim "$dim" --hotness "$hotness")
  echo "$out" >&2
  sed -n 's/.*: \([0-9.]*\) samples\/s/\1/p' <<<"$out"
}
vs_torch_rounds "$rounds"
