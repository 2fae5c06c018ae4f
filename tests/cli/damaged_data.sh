#!/bin/sh
# A deliberately damaged libfm file: on_error fail stops with file:line:column, the reason and
# what was expected (exit 2: bad input); on_error skip trains on the good lines and reports each reason's
# count at the end.
# usage: damaged_data.sh SATRAP WORKDIR
set -eu
satrap=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
python3 - "$work" <<'PY'
import random, sys
random.seed(3)
w = sys.argv[1]
def good(n):
    out = []
    for _ in range(n):
        a, b, c = random.randrange(10), 10 + random.randrange(10), 20 + random.randrange(10)
        out.append("%d %d:1 %d:1 %d:1\r\n" % (1 if (a + b) % 3 == 0 else -1, a, b, c))
    return out
lines = good(3000)
bad = ["2 1:1 11:1 21:1\r\n", "1 1:1 x:1 21:1\r\n", "1 1:1 11:1 21:abc\r\n", "1 1:1 11\r\n",
       "1 1:1 11:1 99999999999999999999:1\r\n", "\r\n"]
for i, b in enumerate(bad * 5):
    lines.insert(100 + 97 * i, b)
open(w + "/train.libfm", "w", newline="").write("".join(lines))
open(w + "/test.libfm", "w", newline="").write("".join(good(500)))
PY
for policy in fail skip; do
  cat > "$work/$policy.yaml" <<YAML
name: damaged-$policy
data: {source: libfm, train_files: [train.libfm], test_files: [test.libfm], field_starts: [0, 10, 20],
       on_error: $policy, cache_dir: cache}
training: {batch_size: 128, train_batches: 0, epochs: 2, test_batches: 0}
YAML
done
set +e
out=$("$satrap" train --job "$work/fail.yaml" 2>&1)
status=$?
set -e
echo "$out"
[ "$status" -eq 2 ]  # a bad data file is bad input
echo "$out" | grep -q "train.libfm:101:1: bad_label: expected a label -1, 0 or 1"
out=$("$satrap" train --job "$work/skip.yaml" --json)
echo "$out"
echo "$out" | grep -q "data: 25 bad input lines skipped: bad_feature=5 bad_index=10 bad_label=5 bad_value=5"
