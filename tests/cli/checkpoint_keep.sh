#!/usr/bin/env bash
# checkpoint.keep: a job checkpointing every 4 steps keeps only its newest 2 complete checkpoints
# and the embedding snapshots their incremental chains need (back to the full one); a run with
# keep 0 keeps them all; a resume from the pruned folder restores the newest checkpoint.
# usage: checkpoint_keep.sh SATRAP TINY_JOB
set -euo pipefail
satrap=$1
job=$2
work=$(mktemp -d /tmp/satrap-keep.XXXXXX)
trap 'rm -rf "$work"' EXIT
flags=(--job "$job" --train-batches 160 --checkpoint-every 4 --json)
"$satrap" train "${flags[@]}" --checkpoint-dir "$work/all" --checkpoint-keep 0 > "$work/all.out"
"$satrap" train "${flags[@]}" --checkpoint-dir "$work/kept" --checkpoint-keep 2 > "$work/kept.out"
count() { find "$1" -maxdepth 1 -name "$2" | wc -l; }
all=$(count "$work/all" 'checkpoint-*.json')
kept=$(count "$work/kept" 'checkpoint-*.json')
dense=$(count "$work/kept" 'dense-*.bin')
snaps=$(count "$work/kept/embeddings" 'snap-*')
newest=$(ls "$work/kept" | sed -n 's/^checkpoint-\([0-9]*\)\.json$/\1/p' | sort | tail -1)
echo "keep 0: $all checkpoints, $(du -sm "$work/all" | cut -f1) MiB; keep 2: $kept checkpoints," \
     "$dense dense files, $snaps snapshots, $(du -sm "$work/kept" | cut -f1) MiB; newest $newest"
[ "$all" -ge 10 ] || { echo "FAIL: expected at least 10 checkpoints with keep 0"; exit 1; }
[ "$kept" = 2 ] && [ "$dense" = 2 ] || { echo "FAIL: expected 2 checkpoints and dense files kept"; exit 1; }
# full_every 5: the chain of the newest two reaches back to the newest full snapshot (1, 6, 11, ...).
n=$((10#$newest))
full=$(( (n - 2) / 5 * 5 + 1 ))
want=$(( n - full + 1 ))
[ "$snaps" = "$want" ] || { echo "FAIL: $snaps snapshots, expected $want ($full..$n)"; exit 1; }
for s in $(seq "$full" "$n"); do
  [ -f "$work/kept/embeddings/snap-$(printf %08d "$s")/MANIFEST" ] || { echo "FAIL: snapshot $s missing"; exit 1; }
done
"$satrap" train "${flags[@]}" --resume "$work/kept" --checkpoint-keep 2 --log-level info \
  > "$work/resumed.out" 2> "$work/resumed.err"
grep -q "job_resuming step=" "$work/resumed.err" || { cat "$work/resumed.err"; echo "FAIL: no resume"; exit 1; }
echo "checkpoint_keep: older checkpoints deleted, the chain kept, resume works"
