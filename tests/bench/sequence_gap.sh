#!/usr/bin/env bash
# Sequences matter (issue 44): on the synthetic target-attention teacher (data.synthetic.history:
# a user's past items, drawn from what the user likes, and a label that depends on the candidate
# item's closest past item), the test AUC's gap to the oracle of
#   pooled   satrap's built-in DLRM with the history mean-pooled (one vector, order and
#            relevance to the candidate lost)
#   din      DIN (examples/models/models.py) as a TorchScript module, which gets the history
#            unpooled ([B, L, E] and lengths) and pools it by attention to the candidate
# on the same data, the same embeddings and optimizers, the same steps. Both sides print their
# shapes. The last line is
#   pooled_gap=<oracle - test AUC> din_gap=<...> oracle_auc=<...>
# usage: tests/bench/sequence_gap.sh [TRAIN_BATCHES=3000] [HISTORY=20] [extra satrap flags...]
# SATRAP_BIN: the satrap binary (default build/bin/satrap). Needs python3-torch (ops/setup.sh --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
batches=${1:-3000}
history=${2:-20}
shift $(( $# > 2 ? 2 : $# ))
satrap="${SATRAP_BIN:-$root/build/bin/satrap}"
[ -x "$satrap" ] || { echo "build first: ops/setup.sh" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "needs python3-torch: ops/setup.sh --bench" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--slots 4 --vocab 2000 --zipf 1.1 --history "$history" --dim 16 --batch-size 1024
        --train-batches "$batches" --test-batches 100 --seed 7)
/usr/bin/python3 "$root/examples/models/script.py" din -o "$work/din.pt" --dense-features 13 \
  --slots 4 --sequences "$history" --dim 16 --seed 7
auc() {  # prints "test_auc oracle_auc samples_per_sec" of a --json run
  python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(r["test_auc"], r["oracle_auc"], round(r["samples_per_sec"]))'
}
echo "pooled: built-in dlrm, slots 4 + history $history mean-pooled, dim 16"
read -r p_auc oracle p_sps < <("$satrap" train --json "${common[@]}" --history-pooling mean "$@" | auc)
echo "pooled: test auc $p_auc oracle $oracle ($p_sps samples/s)"
echo "din: torchscript DIN, slots 4 + history [B, $history, 16] unpooled, dim 16"
read -r d_auc d_oracle d_sps < <("$satrap" train --json "${common[@]}" --history-pooling none \
  --model torchscript --model-file "$work/din.pt" "$@" | auc)
echo "din: test auc $d_auc oracle $d_oracle ($d_sps samples/s)"
python3 - "$p_auc" "$d_auc" "$oracle" <<'PY'
import sys
p, d, o = map(float, sys.argv[1:])
print(f"pooled_gap={o - p:.4f} din_gap={o - d:.4f} oracle_auc={o:.4f}")
PY
