#!/usr/bin/env bash
# Checkpoints that hit a full or read-only disk end the job at once with the real cause in its
# record (no restart: a restart meets the same wall) and lose nothing already written:
#  - ENOSPC: a small tmpfs that holds the first checkpoint and fills up with the next ones (keep
#    0); the job fails with "No space left on device", the checkpoints written stay complete and
#    a copy of the folder resumes to the same samples as an undisturbed run;
#  - EFBIG: RLIMIT_FSIZE (ulimit -f) below a checkpoint file's size; "File too large";
#  - EROFS: a tmpfs remounted read-only; "Read-only file system".
# Needs root and tmpfs mounts (a private mount namespace when unshare works); otherwise it
# says why and exits 77, which CTest reports as skipped.
# usage: disk_full.sh SATRAP_BINARY TINY_JOB
set -uo pipefail
satrap=$1
job=$2
if [ "${SATRAP_DISK_FULL_NS:-}" != 1 ] && command -v unshare > /dev/null \
   && unshare -m true 2> /dev/null; then
  # In a private mount namespace the mounts vanish with the test, whatever kills it.
  SATRAP_DISK_FULL_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
work=$(mktemp -d /tmp/satrap-diskfull.XXXXXX)
cleanup() {
  for m in "$work"/small "$work"/ro; do umount "$m" 2> /dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/small" "$work/ro"
if ! mount -t tmpfs -o size=1m tmpfs "$work/small" 2> "$work/mount.err"; then
  echo "skipped: cannot mount a tmpfs here ($(cat "$work/mount.err")): needs root"
  exit 77
fi
umount "$work/small"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
flags=(--job "$job" --train-batches 200 --checkpoint-every 10 --checkpoint-keep 0 --json --log-level info)

# check_failure NAME PATTERN: the last run (output in $work/out, status in $rc) failed at once.
check_failure() {
  local name=$1 pattern=$2
  [ "$rc" = 1 ] || fail "$name: exit $rc, expected 1"
  grep -q "job failed: .*$pattern" "$work/out" || fail "$name: no '$pattern' in the failure"
  if grep -q "job_restarting" "$work/out"; then fail "$name: the job restarted"; fi
  echo "$name: exit $rc after $elapsed s: $(grep -o 'job failed: .*' "$work/out" | head -1)"
}
run() {  # run DIR [ULIMIT_F]: trains the tiny job checkpointing into DIR
  local start=$SECONDS
  ( [ -n "${2:-}" ] && ulimit -f "$2"
    exec timeout 120 "$satrap" train "${flags[@]}" --checkpoint-dir "$1" ) > "$work/out" 2>&1
  rc=$?
  elapsed=$((SECONDS - start))
}

# The size of one checkpoint of this job (15 steps of 2 trainers: one checkpoint, at step 10;
# the first is full: dense state and embeddings).
timeout 120 "$satrap" train --job "$job" --train-batches 30 --checkpoint-every 10 --json \
  --checkpoint-dir "$work/probe" > "$work/undisturbed.out" 2>&1 || { cat "$work/undisturbed.out"; exit 1; }
one=$(du -sb "$work/probe" | cut -f1)
largest=$(find "$work/probe" -type f -printf '%s\n' | sort -n | tail -1)
timeout 120 "$satrap" train "${flags[@]}" --checkpoint-dir "$work/whole" > "$work/whole.out" 2>&1 \
  || { cat "$work/whole.out"; exit 1; }
echo "one checkpoint: $one bytes (largest file $largest bytes)"

# ENOSPC: room for the first checkpoint and half of another.
mount -t tmpfs -o size=$(( one * 3 / 2 / 4096 * 4096 + 8192 )) tmpfs "$work/small" || exit 1
run "$work/small/ckpt"
check_failure "disk full (ENOSPC)" "No space left on device"
complete=$(find "$work/small/ckpt" -maxdepth 1 -name 'checkpoint-*.json' | wc -l)
[ "$complete" -ge 1 ] || fail "disk full: no complete checkpoint is left"
echo "disk full: $complete complete checkpoints kept; $(df -k "$work/small" | tail -1 | awk '{print $4}') KiB free"
cp -a "$work/small/ckpt" "$work/copy"
timeout 120 "$satrap" train --job "$job" --train-batches 200 --resume "$work/copy" --json \
  > "$work/resumed.out" 2> "$work/resumed.err" || { fail "resume from the full disk's checkpoint"; cat "$work/resumed.err"; }
python3 - "$work/whole.out" "$work/resumed.out" <<'PY' || fail "disk full: the resumed run differs"
import json, sys
a = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
b = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
assert b["samples"] == a["samples"], (a["samples"], b["samples"])
print(f"resumed from the full disk's newest checkpoint: samples={b['samples']} as undisturbed")
PY

# EFBIG: a file size limit (KiB) under the largest checkpoint file; the log stays far below it.
run "$work/efbig" $(( largest / 1024 / 2 ))
check_failure "file too large (EFBIG)" "File too large"

# EROFS: the checkpoint folder on a read-only file system (root writes past permissions).
mount -t tmpfs -o size=1m tmpfs "$work/ro" && mkdir "$work/ro/ckpt" && mount -o remount,ro "$work/ro" || exit 1
run "$work/ro/ckpt"
check_failure "read-only folder (EROFS)" "Read-only file system"

if [ "$failures" -gt 0 ]; then
  echo "disk_full: $failures case(s) failed"
  exit 1
fi
echo "disk_full: each failure ended the job at once with its cause; nothing written was lost"
