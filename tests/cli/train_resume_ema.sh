#!/bin/sh
# A dense weight average survives a checkpoint: a deterministic tiny job (one trainer, staleness
# 0) with --dense-ema, resumed from its newest checkpoint, tests exactly as the run that wrote it
# (the average is part of the dense state; without it the resumed run would test another model).
# usage: train_resume_ema.sh SATRAP TINY_JOB WORK_DIR
set -eu
satrap=$1
job=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
flags="--staleness 0 --trainers 1 --dense-ema 0.9"
"$satrap" train --job "$job" $flags --checkpoint-dir ckpt --checkpoint-every 8 --json > first.out
"$satrap" train --job "$job" $flags --resume ckpt --json > resumed.out
python3 - first.out resumed.out <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
b = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
assert a["checkpoints"] >= 1, a
assert b["test_auc"] == a["test_auc"], (a["test_auc"], b["test_auc"])
print(f"first test_auc={a['test_auc']:.6f} resumed test_auc={b['test_auc']:.6f}")
PY
