#!/bin/sh
# The job's checkpoints and resume with the SSD tier (issue 48), for each cold store compiled in:
# the tiny job at staleness 0 (deterministic) on a RAM budget of ~190 rows per shard (rows written
# back to disk all along) takes checkpoints (each shard's tier copied beside its snapshot file:
# embeddings/snap-N/tier-K), is killed with SIGKILL once its first checkpoint is complete (the live
# tier then holds write-backs newer than the checkpoint), and `--resume` ends with the same test
# AUC and logloss to the last digit, and the same samples, as the uninterrupted job. A resume with
# another shard count is refused at once with the cause.
# usage: tier_resume.sh SATRAP TINY_JOB_YAML
set -u
satrap=$1
job=$2
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "tier_resume: $*" >&2; exit 1; }
metrics() {
  tail -n 1 "$1" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(repr(j["test_auc"]), repr(j["test_logloss"]), j["samples"])'
}
common="--staleness 0 --train-batches 160 --json --embedding-tier ssd --embedding-tier-ram 32KiB"

for store in slot_file rocksdb; do
  rm -rf "$work/tier" "$work/ckpt" && mkdir "$work/tier"
  # shellcheck disable=SC2086
  if ! "$satrap" train --job "$job" $common --embedding-tier-path "$work/tier" \
       --embedding-tier-store "$store" > "$work/whole.json" 2> "$work/whole.err"; then
    if [ "$store" = rocksdb ] && grep -q "not compiled into this build" "$work/whole.err"; then
      echo "rocksdb not compiled in: skipped"
      continue
    fi
    cat "$work/whole.err"
    fail "$store: the uninterrupted job failed"
  fi
  want=$(metrics "$work/whole.json")

  # The same job with checkpoints every 4 steps, killed once the first is complete.
  # shellcheck disable=SC2086
  "$satrap" train --job "$job" $common --embedding-tier-path "$work/tier" \
    --embedding-tier-store "$store" --checkpoint-dir "$work/ckpt" --checkpoint-every 4 \
    > "$work/killed.json" 2> "$work/killed.err" &
  pid=$!
  i=0
  while [ ! -f "$work/ckpt/checkpoint-00000001.json" ] && kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1))
    [ $i -lt 3000 ] || fail "$store: no checkpoint after 60 s"
    sleep 0.02
  done
  if kill -9 "$pid" 2>/dev/null; then how="killed mid-run"; else how="ended before the kill"; fi
  wait "$pid" 2>/dev/null
  pid=
  # The newest complete checkpoint's snapshot (a later one may have been cut short by the kill).
  seq=$(ls "$work"/ckpt/checkpoint-*.json | tail -n 1 | sed 's/.*checkpoint-\([0-9]*\)\.json/\1/')
  newest="$work/ckpt/embeddings/snap-$seq"
  [ -d "$newest/tier-0" ] && [ -d "$newest/tier-1" ] || fail "$store: no tier folders in $newest"

  # shellcheck disable=SC2086
  "$satrap" train --job "$job" $common --embedding-tier-path "$work/tier" \
    --embedding-tier-store "$store" --resume "$work/ckpt" --checkpoint-every 4 --log-level info \
    > "$work/resumed.json" 2> "$work/resumed.err" ||
    { cat "$work/resumed.err"; fail "$store: the resumed job failed"; }
  grep -q "job_resuming step=" "$work/resumed.err" || { cat "$work/resumed.err"; fail "$store: not resumed"; }
  grep -q "shard_restored shard=0 .*tier=true" "$work/resumed.err" || fail "$store: the tier was not restored"
  got=$(metrics "$work/resumed.json")
  [ "$got" = "$want" ] || fail "$store ($how): resumed test auc/logloss/samples $got, uninterrupted $want"
  echo "$store ($how, resumed at $(grep -o 'job_resuming step=[0-9]*' "$work/resumed.err")): $got, the same as uninterrupted"
done

# Another shard count cannot take the tier's per-shard folders: refused, naming the cause.
if ls "$work"/ckpt/checkpoint-*.json > /dev/null 2>&1; then
  out=$("$satrap" train --job "$job" --staleness 0 --embedding-tier ssd --embedding-tier-ram 32KiB \
        --embedding-tier-path "$work/tier" --embedding-tier-store slot_file --shards 3 \
        --resume "$work/ckpt" 2>&1)
  [ $? -ne 0 ] || fail "a resume with 3 shards of a 2-shard tier checkpoint succeeded"
  printf '%s\n' "$out" | grep -q "SSD tier folders, the job has 3 shards" ||
    { echo "$out"; fail "no cause for the shard count"; }
  printf '%s\n' "$out" | grep -q "job_restarting" && { echo "$out"; fail "restarted on a bad checkpoint"; }
fi
echo "tier_resume: ok"
