#!/usr/bin/env bash
# satrap train (embedded) against the PyTorch DLRM baseline of ../shared/bench/torch_dlrm.py, on the
# same model shape: DLRM of the Criteo Kaggle reference (13 dense features, 26 slots of 1M rows,
# dim 16, bottom MLP 512-256-64-16, dot interaction, top MLP 512-256-1, batch 2048, Adagrad on
# both sides). `--interaction dot` is explicit: satrap's default, dot_cat, also feeds the 26 raw
# embeddings to the top MLP (783 inputs instead of 367, ~1.45x the dense FLOPs per sample), which
# torch_dlrm.py does not; until 2026-12-07 this script ran that larger model against torch's.
# PyTorch runs with 1 and with 2 intra-op threads (on these 2-core VMs sgemm does not scale to two
# threads and torch is often faster with one), and the baseline is torch's best of the two in each
# round. The three run interleaved (satrap, torch 1, torch 2; the order rotates every round) so that
# the machine's noise hits all of them; the last line is
#   ratio=<median over rounds of satrap / max(torch 1 thread, torch 2 threads)> satrap_sps=<median>
#   torch_best_sps=<median> torch_1t_sps=<median> torch_2t_sps=<median> rounds=N
# usage: tests/bench/train_vs_torch.sh [ROUNDS=5] [STEPS=60] [extra satrap flags...]
# SATRAP_BIN: the satrap binary to run (default: build/bin/satrap).
# Needs python3-torch (ops/setup.sh --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/tests/bench/vs_torch_rounds.sh"
rounds=${1:-5}
steps=${2:-60}
shift $(( $# > 2 ? 2 : $# ))
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
torch_py="$root/../shared/bench/torch_dlrm.py"
[ -x "$satrap" ] || { echo "build first: ops/setup.sh" >&2; exit 2; }
[ -f "$torch_py" ] || { echo "missing $torch_py" >&2; exit 2; }
run_satrap() {
  "$satrap" train --json --slots 26 --vocab 1000000 --zipf 1.1 --dim 16 --bottom 512,256,64 \
        --top 512,256 --interaction dot --batch-size 2048 --train-batches "$steps" --test-batches 1 \
        --dense-optimizer adagrad --dense-lr 0.05 --embedding-optimizer adagrad --embedding-lr 0.05 \
        "$@" | tail -n 1 | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["samples_per_sec"]))'
}
run_torch() {
  /usr/bin/python3 "$torch_py" --steps "$steps" --threads "$1" | sed -n 's/.*: \([0-9.]*\) samples\/s/\1/p'
}
vs_torch_rounds "$rounds" "$@"
