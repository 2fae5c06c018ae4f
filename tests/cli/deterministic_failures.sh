#!/usr/bin/env bash
# Failures a restart cannot cure end the job at once, with their cause, never in restart loops:
#  - a checkpoint folder that cannot be created (a path under a regular file: ENOTDIR; and a
#    read-only folder when not run as root) fails the job with that message and no restart;
#  - a batch too large for one message (--batch-size 1048576 on the default model) is refused
#    before the job starts (exit 2), naming the largest batch that fits.
# usage: deterministic_failures.sh SATRAP_BINARY SOURCE_DIR
set -uo pipefail
satrap=$1
src=$2
work=$(mktemp -d /tmp/satrap-determ.XXXXXX)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
tiny=$src/tests/cli/tiny_job.yaml

check_ckpt_failure() {  # check_ckpt_failure DIR PATTERN
  local dir=$1 pattern=$2 start=$SECONDS
  timeout 120 "$satrap" train --job "$tiny" --checkpoint-dir "$dir" --checkpoint-every 10 \
    --log-level warn > "$work/out" 2>&1
  local rc=$?
  if [ "$rc" != 1 ]; then fail "checkpoint in $dir: exit $rc, expected 1"; fi
  if ! grep -q "job failed: .*$pattern" "$work/out"; then fail "checkpoint in $dir: no '$pattern' in the failure"; fi
  if grep -q "job_restarting" "$work/out"; then fail "checkpoint in $dir: the job restarted"; fi
  echo "checkpoint in $dir: exit $rc after $((SECONDS - start)) s: $(grep 'job failed' "$work/out" | head -1)"
}
touch "$work/a-file"
check_ckpt_failure "$work/a-file/ckpt" "Not a directory"
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$work/read-only" && chmod 555 "$work/read-only"
  check_ckpt_failure "$work/read-only/ckpt" "Permission denied"
else
  echo "read-only folder case skipped: root writes anywhere"
fi

start=$SECONDS
timeout 30 "$satrap" train --batch-size 1048576 > "$work/out" 2>&1
rc=$?
[ "$rc" = 2 ] || fail "--batch-size 1048576: exit $rc, expected 2"
grep -q "training.batch_size: a batch of 1048576 samples is .* MiB in one message.*expected at most [0-9]* samples per batch" "$work/out" \
  || { fail "--batch-size 1048576: not refused with the cause"; head -5 "$work/out"; }
echo "--batch-size 1048576: exit $rc after $((SECONDS - start)) s: $(head -1 "$work/out")"

if [ "$failures" -gt 0 ]; then
  echo "deterministic_failures: $failures case(s) failed"
  exit 1
fi
echo "deterministic_failures: each failure ended the job at once with its cause"
