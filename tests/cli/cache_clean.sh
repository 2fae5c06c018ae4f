#!/usr/bin/env bash
# `satrap cache list|clean`: two data sets converted into a cache folder that also holds things
# that are not satrap's; list shows both; clean --dry-run deletes nothing; clean keeps the data set
# a running job holds and deletes the other, never the foreign entries; once the job is gone clean
# deletes the rest. Exit statuses: 0 done, 2 bad input (a cache folder that is a file, no verb).
# usage: cache_clean.sh SATRAP_BINARY
set -uo pipefail
satrap=$1
work=$(mktemp -d /tmp/satrap-cache.XXXXXX)
job_pid=
cleanup() {
  [ -n "$job_pid" ] && kill -9 "$job_pid" 2> /dev/null && wait "$job_pid" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$work/out" ] && sed 's/^/  | /' "$work/out" | head -20; exit 1; }
cache=$work/cache
python3 - "$work" <<'PY'
import random, sys
random.seed(10)
for name, n in (("a", 4000), ("b", 3000)):
    with open(f"{sys.argv[1]}/{name}.libfm", "w") as f:
        for _ in range(n):
            x, y = random.randrange(50), 50 + random.randrange(50)
            f.write(f"{1 if (x + y) % 3 == 0 else -1} {x}:1 {y}:1\n")
PY
job() {  # job NAME FILE TRAIN_BATCHES
  cat > "$work/$1.yaml" <<YAML
name: $1
data: {source: libfm, train_files: [$2], field_starts: [0, 50], cache_dir: $cache, test_fraction: 0.1}
training: {batch_size: 16, train_batches: $3, test_batches: 2}
placement: {shards: 1, aggregators: 1, loaders: 1, trainers: 1}
YAML
}
job a "$work/a.libfm" 4
job b "$work/b.libfm" 4
job long "$work/a.libfm" 100000000
"$satrap" train --job "$work/a.yaml" > "$work/out" 2>&1 || fail "job a"
"$satrap" train --job "$work/b.yaml" > "$work/out" 2>&1 || fail "job b"
mkdir -p "$cache/not-satraps/sub" "$cache/0123456789abcdef"  # foreign: no manifest, no lock
echo keep > "$cache/notes.txt"
echo keep > "$cache/not-satraps/sub/file"

"$satrap" cache list --cache-dir "$cache" > "$work/out" 2>&1 || fail "cache list: exit $?"
cat "$work/out"
grep -q "^2 data sets, .* (and 3 other entries, not satrap's)" "$work/out" || fail "cache list: expected 2 data sets and 3 other entries"
grep -q "a.libfm, [0-9]* samples" "$work/out" && grep -q "b.libfm, [0-9]* samples" "$work/out" \
  || fail "cache list: the data files are not named"

"$satrap" cache clean --cache-dir "$cache" --dry-run > "$work/out" 2>&1 || fail "clean --dry-run: exit $?"
grep -q "^would delete 2 data sets" "$work/out" || fail "clean --dry-run"
[ "$(find "$cache" -name manifest.bin | wc -l)" = 2 ] || fail "clean --dry-run deleted something"

# A running job holds data set a (its loader maps it): clean keeps it, deletes b.
"$satrap" train --job "$work/long.yaml" --log-level info > "$work/long.out" 2>&1 &
job_pid=$!
for _ in $(seq 1 300); do
  grep -q "data_opened" "$work/long.out" && break
  kill -0 "$job_pid" 2> /dev/null || fail "the long job ended early: $(tail -3 "$work/long.out")"
  sleep 0.1
done
grep -q "data_opened" "$work/long.out" || fail "the long job did not open its data"
"$satrap" cache list --cache-dir "$cache" > "$work/out" 2>&1
grep -q "in use .*a.libfm" "$work/out" || fail "cache list: a is not shown in use"
"$satrap" cache clean --cache-dir "$cache" > "$work/out" 2>&1 || fail "clean: exit $?"
cat "$work/out"
grep -q "^kept .*: a job is using it" "$work/out" && grep -q "^deleted 1 data sets .*kept 1 in use" "$work/out" \
  || fail "clean with a job running: expected a kept and b deleted"
grep -q "data_cache_reused" "$work/long.out" || fail "the long job did not reuse a's cache"
kill -0 "$job_pid" 2> /dev/null || fail "the long job died during clean"
[ "$(find "$cache" -name manifest.bin | wc -l)" = 1 ] || fail "clean: expected a's data set left"
kill -9 "$job_pid"; wait "$job_pid" 2> /dev/null; job_pid=
"$satrap" cache clean --cache-dir "$cache" > "$work/out" 2>&1 || fail "clean after the job: exit $?"
grep -q "^deleted 1 data sets" "$work/out" || fail "clean after the job: a not deleted"
[ "$(find "$cache" -name manifest.bin | wc -l)" = 0 ] || fail "clean: a data set is left"
[ -f "$cache/notes.txt" ] && [ -f "$cache/not-satraps/sub/file" ] && [ -d "$cache/0123456789abcdef" ] \
  || fail "clean deleted what is not satrap's"
# A job after a clean converts its data again.
"$satrap" train --job "$work/a.yaml" --log-level info > "$work/out" 2>&1 || fail "job a after clean"
grep -q "data_cache_built" "$work/out" || fail "job a after clean: not converted again"

expect() {  # expect STATUS ARGS...
  local want=$1; shift
  "$satrap" "$@" > "$work/out" 2>&1
  local got=$?
  [ "$got" = "$want" ] || fail "satrap $*: exit $got, expected $want"
  echo "ok   exit $got: satrap $*"
}
expect 0 cache --help
expect 0 cache clean --help
expect 0 cache list --help
expect 2 cache
expect 2 cache clean --no-such-flag
expect 2 cache list --cache-dir "$cache/notes.txt"
expect 2 cache clean --cache-dir "$cache/notes.txt"
expect 0 cache clean --cache-dir "$work/no-such-folder"
grep -q "^deleted 0 data sets" "$work/out" || fail "clean of a missing folder"
echo "cache_clean: list, dry run, a held data set kept, foreign entries untouched"
