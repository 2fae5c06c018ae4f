#!/bin/sh
# `satrap plan` with the SSD tier (issue 48): the 100T job with a 16 GiB tier per shard
# (ops/jobs/persia-100t-ssd.yaml) fits the 8 machines with 36,000 GiB of local SSD of
# ops/manifests/gcp-persia-100t-ssd.yaml, 30 shards each, and prints the tier's RAM and disk per
# shard; with 7 of them it is refused naming the disk, and the in-memory job does not fit them.
# usage: tier_plan.sh SATRAP SOURCE_DIR
set -u
satrap=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "tier_plan: $*" >&2; exit 1; }
"$satrap" plan --manifest "$src/ops/manifests/gcp-persia-100t-ssd.yaml" \
  --job "$src/ops/jobs/persia-100t-ssd.yaml" > "$work/plan.txt" 2>&1 ||
  { cat "$work/plan.txt"; fail "the 100T job with the tier does not fit 8 SSD machines"; }
cat "$work/plan.txt"
grep -q "^ssd-0 .. ssd-7 .* 30 embedding_shard  (x8, each)" "$work/plan.txt" || fail "not 30 shards on each of 8 SSD machines"
grep -q "^SSD tier: 16.0 GiB of RAM and .* of local disk per shard" "$work/plan.txt" || fail "no SSD tier line"
sed 's/count: 8$/count: 7/' "$src/ops/manifests/gcp-persia-100t-ssd.yaml" > "$work/seven.yaml"
grep -q "count: 7" "$work/seven.yaml" || fail "could not make the 7-machine manifest"
out=$("$satrap" plan --manifest "$work/seven.yaml" --job "$src/ops/jobs/persia-100t-ssd.yaml" 2>&1) &&
  fail "the 100T job with the tier fits 7 SSD machines"
printf '%s\n' "$out" | grep -q "plan does not fit: embedding_shard .* of disk" || { echo "$out"; fail "no disk in the refusal"; }
"$satrap" plan --manifest "$src/ops/manifests/gcp-persia-100t-ssd.yaml" \
  --job "$src/ops/jobs/persia-100t-ssd.yaml" --embedding-tier none > "$work/ram.txt" 2>&1 &&
  fail "the in-memory job fits the SSD machines' RAM"
echo "tier_plan: ok"
