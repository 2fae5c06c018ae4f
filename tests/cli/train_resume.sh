#!/bin/sh
# Checkpoints from the command line: a tiny job writes checkpoints into a relative folder, a second
# run of the same job refuses that folder, and `--resume` continues from its newest checkpoint
# and ends with the same number of training samples.
# usage: train_resume.sh SATRAP TINY_JOB WORK_DIR
set -eu
satrap=$1
job=$2
work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work"
"$satrap" train --job "$job" --checkpoint-dir ckpt --checkpoint-every 8 --json > first.out
[ -f ckpt/checkpoint-00000001.json ] || { echo "no checkpoint written"; exit 1; }
if "$satrap" train --job "$job" --checkpoint-dir ckpt --checkpoint-every 8 > again.out 2>&1; then
  echo "a folder holding checkpoints was reused"; exit 1
fi
grep -q "already holds checkpoints" again.out || { cat again.out; exit 1; }
"$satrap" train --job "$job" --resume ckpt --checkpoint-every 8 --json --log-level info \
  > resumed.out 2> resumed.err
grep -q "job_resuming step=" resumed.err || { cat resumed.err; exit 1; }
python3 - first.out resumed.out <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
b = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
assert a["checkpoints"] >= 1, a
assert b["samples"] == a["samples"], (a["samples"], b["samples"])
print(f"first test_auc={a['test_auc']:.4f} resumed test_auc={b['test_auc']:.4f} "
      f"checkpoints={a['checkpoints']}")
PY
