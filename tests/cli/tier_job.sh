#!/bin/sh
# The SSD tier end to end (issue 48): the tiny job at staleness 0 (deterministic) with every row in
# RAM and with `model.embedding.tier: ssd` on a RAM budget of ~190 rows per shard (thousands of rows
# evicted to disk and brought back) gives the same test AUC and logloss to the last digit, for each
# cold store compiled in; each shard has its folder; a missing parent folder fails the job at once
# (no restart) with the cause, and early stopping with the tier is refused (not built yet;
# checkpoints and resume: tier_resume.sh).
# usage: tier_job.sh SATRAP TINY_JOB_YAML
set -u
satrap=$1
job=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "tier_job: $*" >&2; exit 1; }

"$satrap" train --job "$job" --staleness 0 --json > "$work/ram.json" 2> "$work/ram.err" ||
  { cat "$work/ram.err"; fail "the job without the tier failed"; }
metrics() { tail -n 1 "$1" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(repr(j["test_auc"]), repr(j["test_logloss"]))'; }
want=$(metrics "$work/ram.json")
for store in slot_file rocksdb; do
  rm -rf "$work/tier"
  mkdir "$work/tier"
  if ! "$satrap" train --job "$job" --staleness 0 --json --embedding-tier ssd \
       --embedding-tier-path "$work/tier" --embedding-tier-ram 32KiB \
       --embedding-tier-store "$store" > "$work/$store.json" 2> "$work/$store.err"; then
    if [ "$store" = rocksdb ] && grep -q "not compiled into this build" "$work/$store.err"; then
      echo "rocksdb not compiled in: refused as expected"
      continue
    fi
    cat "$work/$store.err"
    fail "the job with the $store tier failed"
  fi
  got=$(metrics "$work/$store.json")
  [ "$got" = "$want" ] || fail "$store: test auc/logloss $got, without the tier $want"
  [ -d "$work/tier/shard-0" ] && [ -d "$work/tier/shard-1" ] || fail "$store: no shard folders"
  if [ "$store" = slot_file ]; then  # rows went to disk: the shards' tables did not hold them all
    [ -s "$work/tier/shard-0/rows.slots" ] || fail "slot_file: no rows written to disk"
  fi
  echo "$store: $got, the same as every row in RAM"
done

out=$("$satrap" train --job "$job" --embedding-tier ssd --embedding-tier-path "$work/no/such/dir" \
      --embedding-tier-ram 1MiB --embedding-tier-store slot_file 2>&1)
[ $? -ne 0 ] || fail "a missing tier folder did not fail the job"
printf '%s\n' "$out" | grep -q "No such file or directory" || { echo "$out"; fail "no cause for the missing folder"; }
printf '%s\n' "$out" | grep -q "job_restarting" && { echo "$out"; fail "a missing folder was retried"; }

out=$("$satrap" train --job "$job" --embedding-tier ssd --embedding-tier-path "$work" \
      --embedding-tier-ram 1MiB --early-stopping-patience 2 2>&1)
[ $? -eq 2 ] || { echo "$out"; fail "early stopping with the tier: expected exit status 2"; }
printf '%s\n' "$out" | grep -q "model.embedding.tier: early stopping" || { echo "$out"; fail "no reason given"; }
echo "tier_job: ok"
