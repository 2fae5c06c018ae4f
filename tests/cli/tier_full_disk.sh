#!/bin/sh
# A full disk under the SSD tier (issue 48): the tier's folder on a tiny tmpfs (128 KiB for the slot
# file, 1 MiB for RocksDB, whose memtable holds the first MiB) fills during the job. The job fails
# at once (no restarts into the same wall) with the cause, "No space left on device", naming the
# file; and nothing is lost: its newest checkpoint, resumed with the tier on a disk with room,
# ends with the same test AUC, logloss and samples as the uninterrupted job. Needs root to mount
# the tmpfs (in a private mount namespace when unshare works): skipped (77) when the mount fails.
# usage: tier_full_disk.sh SATRAP TINY_JOB_YAML
set -u
satrap=$1
job=$2
if [ "${SATRAP_TIER_DISK_NS:-}" != 1 ] && command -v unshare > /dev/null \
   && unshare -m true 2> /dev/null; then
  # In a private mount namespace the mounts vanish with the test, whatever kills it.
  SATRAP_TIER_DISK_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
work=$(mktemp -d)
small="$work/small"
mkdir "$small"
trap 'umount "$small" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "tier_full_disk: $*" >&2; exit 1; }
metrics() {
  tail -n 1 "$1" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(repr(j["test_auc"]), repr(j["test_logloss"]), j["samples"])'
}
common="--staleness 0 --train-batches 160 --vocab 100000 --json --embedding-tier ssd --embedding-tier-ram 32KiB"

for store in slot_file rocksdb; do
  size=128k
  [ "$store" = rocksdb ] && size=1m
  umount "$small" 2>/dev/null
  mount -t tmpfs -o size=$size tmpfs "$small" 2>/dev/null || { echo "cannot mount a tmpfs: skipped"; exit 77; }
  rm -rf "$work/tier" "$work/ckpt" && mkdir "$work/tier"
  # shellcheck disable=SC2086
  if ! "$satrap" train --job "$job" $common --embedding-tier-path "$work/tier" \
       --embedding-tier-store "$store" > "$work/whole.json" 2> "$work/whole.err"; then
    if [ "$store" = rocksdb ] && grep -q "not compiled into this build" "$work/whole.err"; then
      echo "rocksdb not compiled in: skipped"
      continue
    fi
    cat "$work/whole.err"
    fail "$store: the job with room failed"
  fi
  want=$(metrics "$work/whole.json")

  # shellcheck disable=SC2086
  "$satrap" train --job "$job" $common --embedding-tier-path "$small" --embedding-tier-store "$store" \
    --checkpoint-dir "$work/ckpt" --checkpoint-every 4 > "$work/full.json" 2> "$work/full.err" &&
    fail "$store: the job on a full disk succeeded"
  grep -q "No space left on device" "$work/full.err" || { cat "$work/full.err"; fail "$store: no cause"; }
  grep -q "job_restarting" "$work/full.err" && { cat "$work/full.err"; fail "$store: restarted into a full disk"; }
  ls "$work"/ckpt/checkpoint-*.json > /dev/null 2>&1 || fail "$store: no checkpoint before the disk filled"
  echo "$store: $(grep -o 'job failed: .*' "$work/full.err" | head -c 200)"

  # shellcheck disable=SC2086
  "$satrap" train --job "$job" $common --embedding-tier-path "$work/tier" \
    --embedding-tier-store "$store" --resume "$work/ckpt" --checkpoint-every 4 --log-level info \
    > "$work/resumed.json" 2> "$work/resumed.err" ||
    { cat "$work/resumed.err"; fail "$store: the resumed job failed"; }
  got=$(metrics "$work/resumed.json")
  [ "$got" = "$want" ] || fail "$store: resumed test auc/logloss/samples $got, with room from the start $want"
  echo "$store: resumed at $(grep -o 'job_resuming step=[0-9]*' "$work/resumed.err"): $got, nothing lost"
done
echo "tier_full_disk: ok"
