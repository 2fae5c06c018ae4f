#!/bin/sh
# Early stopping against the best epoch (issue 15): is the early-stopped model's test AUC within
# 0.002 of the best test AUC any validation point of the same run would have given?
#
# usage: early_stopping_bench.sh SATRAP JOB.yaml [MAX_EPOCHS=20]
#
# 1. Runs JOB (a job with a validation split and training.early_stopping) with --json: the model
#    chosen on validation and restored, its test AUC, and the steps of every validation point.
# 2. Runs JOB again once per validation point s of a MAX_EPOCHS run (the steps are those of the
#    first run's points, continued at the same spacing up to MAX_EPOCHS epochs) with
#    --train-batches s and early stopping off: the test AUC of the model at that point of the same
#    training trajectory. Valid only where the job trains deterministically (training.staleness
#    0): the point at the early-stopped step must give exactly the early-stopped model's test AUC,
#    which the script checks (and fails otherwise).
# The test split is only read here, to measure; the job chooses its model on validation alone.
# Last line: best_step=... stopped_test_auc=... best_epoch_step=... best_epoch_test_auc=... gap=...
set -eu
satrap=$1
job=$2
max_epochs=${3:-20}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

"$satrap" train --job "$job" --json > "$work/full.out"
tail -1 "$work/full.out" > "$work/full.json"
python3 - "$work/full.json" "$max_epochs" > "$work/steps" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("best_step", -1) < 0:
    sys.exit("the job recorded no best validation point: give it a validation split and early stopping")
pts = [json.loads(h) if isinstance(h, str) else h for h in r["validation_history"]]
steps = [p["step"] for p in pts]
every = steps[0]
epoch_steps = every / pts[0]["epoch"] if pts[0].get("epoch") else every
last = int(epoch_steps * int(sys.argv[2]))
s = steps[0]
out = []
while s <= last:
    out.append(s)
    s += every
print(" ".join(str(x) for x in out))
EOF
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("stopped: best_step=%d test_auc=%.4f validation_auc=%.4f stop=%s" % (r["best_step"], r["test_auc"], r["validation_auc"], r["stop_reason"]))' "$work/full.json"

for s in $(cat "$work/steps"); do
  "$satrap" train --job "$job" --json --train-batches "$s" --early-stopping-patience 0 \
    | tail -1 > "$work/at-$s.json"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("step %s test_auc=%.4f" % (sys.argv[2], r["test_auc"]))' "$work/at-$s.json" "$s"
done

python3 - "$work" $(cat "$work/steps") <<'EOF'
import json, sys
work, steps = sys.argv[1], [int(x) for x in sys.argv[2:]]
full = json.load(open(f"{work}/full.json"))
at = {s: json.load(open(f"{work}/at-{s}.json"))["test_auc"] for s in steps}
best = max(at, key=at.get)
if full["best_step"] in at and abs(at[full["best_step"]] - full["test_auc"]) > 1e-9:
    sys.exit("the run up to step %d gave test AUC %.6f, the early-stopped model %.6f: training is "
             "not deterministic (is training.staleness 0?)" % (full["best_step"], at[full["best_step"]], full["test_auc"]))
print("best_step=%d stopped_test_auc=%.4f best_epoch_step=%d best_epoch_test_auc=%.4f gap=%.4f"
      % (full["best_step"], full["test_auc"], best, at[best], at[best] - full["test_auc"]))
EOF
