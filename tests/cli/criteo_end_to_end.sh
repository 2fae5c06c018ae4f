#!/bin/sh
# The Criteo path end to end: `satrap gen-criteo` writes gzip Criteo files from the synthetic
# teacher, `satrap train` converts, trains and tests on them; the test AUC must be well above
# chance and the oracle reported as n/a (real-data readers carry no teacher).
# usage: criteo_end_to_end.sh SATRAP WORKDIR
set -eu
satrap=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
"$satrap" gen-criteo --out "$work" --train-samples 30000 --files 3 --test-samples 5000 --gzip
cat > "$work/job.yaml" <<'YAML'
name: criteo-e2e
data: {source: criteo, train_files: ["train-*.txt.gz"], test_files: [test.txt.gz], cache_dir: cache}
training: {batch_size: 256, train_batches: 0, epochs: 2, test_batches: 0, staleness: 0}
placement: {loaders: 2, trainers: 2}
YAML
out=$("$satrap" train --job "$work/job.yaml" --json)
echo "$out"
echo "$out" | grep -q "oracle auc n/a"
echo "$out" | tail -1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
assert r["oracle_auc"] is None, r
assert r["test_samples"] == 5000, r
assert r["test_auc"] > 0.70, r
print("criteo end to end: test auc %.4f" % r["test_auc"])'
