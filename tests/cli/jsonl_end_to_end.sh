#!/bin/sh
# JSON lines end to end (issue 44's first slice): a data set with every kind of feature (ids as
# integers and strings, a bag, a sequence sharing the item table, a weighted bag, a dense number)
# written by Python with a known signal, trained embedded; the test AUC must be within 0.08 of the
# AUC of the true probabilities (the user x item interest match is the hard part to learn).
# Then a damaged copy: on_error fail stops with file:line:column, the reason and the feature
# (exit 2: bad input); on_error skip trains on the good lines and reports each reason's count.
# usage: jsonl_end_to_end.sh SATRAP WORKDIR
set -eu
satrap=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
python3 - "$work" <<'PY'
import json, math, random, sys
random.seed(44)
w = sys.argv[1]
items = 400
group = lambda i: i % 8                 # an item's interest group
def sample():
    user = random.randrange(200)
    interest = user % 8
    item = random.randrange(items)
    history = [random.randrange(items) // 8 * 8 + interest for _ in range(random.randrange(0, 30))]
    tags = [random.randrange(50) for _ in range(random.randrange(0, 6))]
    topics = random.sample(range(20), random.randrange(1, 4))
    weights = [round(random.random(), 3) for _ in topics]
    price = round(random.gauss(0, 1), 3)
    logit = (2.0 * (group(item) == interest and len(history) > 0) - 1.0
             + sum(wt * (1 if t < 10 else -1) for t, wt in zip(topics, weights)) + 0.5 * price)
    prob = 1 / (1 + math.exp(-logit))
    label = 1 if random.random() < prob else 0
    probs.append((prob, label))
    item_id = item if item % 2 else "sku-%d" % item
    history = [h if h % 2 else "sku-%d" % h for h in history]
    return {"click": label, "user": user, "item": item_id, "history": history, "tags": tags,
            "topics": {"ids": topics, "weights": weights}, "price": price, "note": {"x": [1, 2]}}
def write(path, n):
    with open(path, "w") as f:
        for _ in range(n):
            f.write(json.dumps(sample()) + "\n")
def auc(pairs):  # (score, label), ties at mid-rank
    pairs = sorted(pairs)
    rank, ranks, i = 0.0, [], 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        ranks += [(i + j + 1) / 2.0] * (j - i)
        i = j
    pos = sum(l for _, l in pairs)
    return (sum(r for r, (_, l) in zip(ranks, pairs) if l) - pos * (pos + 1) / 2) / (pos * (len(pairs) - pos))
probs = []
write(w + "/train.jsonl", 40000)
probs = []
write(w + "/test.jsonl", 5000)
open(w + "/oracle_auc", "w").write("%.6f" % auc(probs))
lines = open(w + "/train.jsonl").read().splitlines(True)[:3000]
bad = ['{"click": 1, "user": 1, "history": [], "tags": [], "topics": {"ids": [], "weights": []}, "price": 0}\n',
       '{"click": 1, "user": [1], "item": 1, "history": [], "tags": [], "topics": {"ids": [], "weights": []}, "price": 0}\n',
       'not json\n']
for i, b in enumerate(bad * 4):
    lines.insert(100 + 97 * i, b)
open(w + "/damaged.jsonl", "w").write("".join(lines))
PY
features='[{name: user, kind: id}, {name: item, kind: id},
            {name: history, kind: sequence, table: item, max_length: 20, pooling: mean},
            {name: tags, kind: bag, max_length: 10, pooling: sqrtn},
            {name: topics, kind: bag, weights: true}, {name: price, kind: dense}]'
cat > "$work/job.yaml" <<YAML
name: jsonl-e2e
model: {dim: 8}
data: {source: jsonl, labels: [click], train_files: [train.jsonl], test_files: [test.jsonl],
       cache_dir: cache, features: $features}
training: {batch_size: 256, train_batches: 0, epochs: 2, test_batches: 0, staleness: 0}
placement: {loaders: 2, trainers: 1}
YAML
out=$("$satrap" train --job "$work/job.yaml" --json)
echo "$out"
echo "$out" | tail -1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
oracle = float(open(sys.argv[1]).read())
assert r["test_samples"] == 5000, r
print("jsonl end to end: test auc %.4f, oracle auc %.4f (the true probabilities)" % (r["test_auc"], oracle))
assert r["test_auc"] > oracle - 0.08, r  # (measured 0.708 against 0.770)' "$work/oracle_auc"
for policy in fail skip; do
  cat > "$work/$policy.yaml" <<YAML
name: jsonl-damaged-$policy
model: {dim: 8}
data: {source: jsonl, labels: [click], train_files: [damaged.jsonl], test_files: [test.jsonl],
       cache_dir: cache, on_error: $policy, features: $features}
training: {batch_size: 128, train_batches: 0, epochs: 1, test_batches: 0}
YAML
done
set +e
out=$("$satrap" train --job "$work/fail.yaml" 2>&1)
status=$?
set -e
echo "$out"
[ "$status" -eq 2 ]  # a bad data file is bad input
echo "$out" | grep -q "damaged.jsonl:101:[0-9]*: missing_feature: expected the feature 'item'"
out=$("$satrap" train --job "$work/skip.yaml" --json)
echo "$out"
echo "$out" | grep -q "data: 12 bad input lines skipped: bad_json=4 missing_feature=4 wrong_type=4"
