#!/bin/sh
# Frappe with the model chosen on validation (issue 15): ops/jobs/frappe_validated.yaml holds out
# 10% of the training file, validates every epoch, stops early and restores the best model. Checks:
# it stopped early; the restored model re-validated gives exactly the recorded best validation AUC;
# the history has a point per epoch up to the stop with every metric; test AUC >= 0.960 (issue 15's
# goal; the job's feature crosses give 0.9631, deterministic at staleness 0; without them 0.9520). The data is research-only and
# never in the repository: without ../shared/data/frappe the test reports itself skipped (77).
# usage: frappe_validated_goal.sh SATRAP REPO_ROOT
set -eu
satrap=$1
repo=$2
if [ ! -f "$repo/../shared/data/frappe/frappe.validation.libfm" ] \
   || [ ! -f "$repo/../shared/data/frappe/frappe.test.libfm" ]; then
  echo "frappe data not found under $repo/../shared/data/frappe: skipped"
  exit 77
fi
out=$("$satrap" train --job "$repo/ops/jobs/frappe_validated.yaml" --json)
echo "$out" | tail -1 | python3 -c '
import json, math, sys
r = json.loads(sys.stdin.read())
h = [json.loads(p) if isinstance(p, str) else p for p in r["validation_history"]]
print("frappe validated: test auc %.4f, best step %d of %d, validation auc %.4f, restored %.4f, %d points"
      % (r["test_auc"], r["best_step"], r["steps"], r["validation_auc"], r["restored_validation_auc"], len(h)))
assert r["stop_reason"] == "early_stopping", r["stop_reason"]
assert 0 < r["best_step"] < r["steps"], r
assert r["restored_validation_auc"] == r["validation_auc"], (r["restored_validation_auc"], r["validation_auc"])
assert len(h) == r["steps"] // h[0]["step"], [p["step"] for p in h]
for p in h:
    for k in ("validation_auc", "validation_logloss", "validation_ne", "validation_calibration", "train_loss"):
        assert math.isfinite(p[k]), (k, p)
assert max(p["validation_auc"] for p in h) == r["validation_auc"]
assert r["test_samples"] == 28860, r["test_samples"]
assert r["test_auc"] >= 0.960, r["test_auc"]'
