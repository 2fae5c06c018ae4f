#!/usr/bin/env bash
# Every command exits 0 when done, 1 when the work failed, 2 on bad input (README "Exit
# statuses"): at least one case per command, the command line's own errors (CLI11) included.
# Unreachable-head cases use loopback port 5690 (nothing listens there) with TLS off.
# usage: exit_codes.sh SATRAP_BINARY SOURCE_DIR
set -uo pipefail
satrap=$1
src=$2
work=$(mktemp -d /tmp/satrap-exit.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
expect() {  # expect STATUS COMMAND...
  local want=$1
  shift
  "$@" > "$work/out" 2>&1
  local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: exit $got, expected $want: $*"
    sed 's/^/  | /' "$work/out" | head -5
    failures=$((failures + 1))
  else
    echo "ok   exit $got: $*"
  fi
}
cat > "$work/m.yaml" <<YAML
cluster: exit-codes
head: {host: 127.0.0.1, port: 5690, status_port: 5691}
nodes:
  - {name: n0, host: 127.0.0.1, port: 5692, resources: {cores: 16, memory: 16GiB}}
security: {tls: off}
YAML
printf 'name: x\ntraining: {batch_size: [1}\n' > "$work/bad.yaml"
printf '1 1:1 2:1\n2 1:1 x:1\n' > "$work/bad.libfm"
cat > "$work/bad_data.yaml" <<YAML
name: bad-data
data: {source: libfm, train_files: [$work/bad.libfm], field_starts: [0], cache_dir: $work/cache}
training: {batch_size: 2, train_batches: 0, epochs: 1, test_batches: 0}
YAML
m=(--manifest "$work/m.yaml" --state-dir "$work/state")
tiny=$src/tests/cli/tiny_job.yaml

expect 0 "$satrap" --version
expect 0 "$satrap" --help
expect 2 "$satrap"
expect 2 "$satrap" no-such-command
# train
expect 0 "$satrap" train --job "$tiny" --train-batches 4
expect 2 "$satrap" train --bogus-flag
expect 2 "$satrap" train --staleness x
expect 2 "$satrap" train --job "$work/bad.yaml"
expect 2 "$satrap" train --job "$work/bad_data.yaml"
expect 1 "$satrap" train --job "$tiny" --train-batches 4 --test-scores "$work/no/such/dir/s.txt"
# gen-criteo
expect 0 "$satrap" gen-criteo --out "$work/criteo" --train-samples 10 --test-samples 5
expect 2 "$satrap" gen-criteo --out "$work/criteo" --train-samples -5
expect 2 "$satrap" gen-criteo --out "$work/criteo" --test-samples -1
expect 2 "$satrap" gen-criteo
expect 1 "$satrap" gen-criteo --out /proc/no-such-folder --train-samples 1 --test-samples 1
# plan
expect 0 "$satrap" plan --manifest "$work/m.yaml" --job "$tiny"
expect 2 "$satrap" plan --manifest "$src/tests/cli/bad_manifest.yaml"
expect 2 "$satrap" plan --manifest "$src/ops/manifests/local-3node.yaml" --job "$src/ops/jobs/persia-100t.yaml"
# cluster commands: bad manifest (2), bad job (2), unreachable head (1)
for cmd in head node up down supervise submit jobs cancel status checkpoint k8s slurm; do
  expect 2 "$satrap" "$cmd" --no-such-flag
done
for cmd in status jobs; do
  expect 2 "$satrap" "$cmd" --manifest "$src/tests/cli/bad_manifest.yaml"
  expect 1 "$satrap" "$cmd" "${m[@]}"
done
expect 2 "$satrap" head --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" node --manifest "$src/tests/cli/bad_manifest.yaml" --name n0
expect 2 "$satrap" up --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" down --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" supervise --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" k8s --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" k8s --manifest "$src/tests/cli/bad_k8s_manifest.yaml"
expect 0 "$satrap" k8s --manifest "$src/ops/manifests/gcp-persia-100t.yaml" --secrets external -o "$work/k8s.yaml"
# -o holds Secrets (keys, tokens): mode 0600, also when the file was there before with 0644.
touch "$work/k8s-old.yaml" && chmod 644 "$work/k8s-old.yaml"
expect 0 "$satrap" k8s --manifest "$src/ops/manifests/gcp-persia-100t.yaml" --secrets external -o "$work/k8s-old.yaml"
for f in k8s.yaml k8s-old.yaml; do
  mode=$(stat -c %a "$work/$f")
  if [ "$mode" != 600 ]; then
    echo "FAIL: satrap k8s -o wrote $f with mode $mode, expected 600"
    failures=$((failures + 1))
  else
    echo "ok   satrap k8s -o $f: mode 600"
  fi
done
expect 2 "$satrap" slurm --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" slurm --manifest "$src/tests/cli/bad_manifest.yaml"
expect 2 "$satrap" slurm --manifest "$work/m.yaml" --job "$work/bad.yaml"
expect 0 "$satrap" slurm --manifest "$work/m.yaml" --job "$tiny" -o "$work/run.sh"
expect 1 "$satrap" slurm --manifest "$work/m.yaml" -o "$work/no-such-dir/run.sh"
expect 2 "$satrap" node --manifest "$work/m.yaml"   # no --name outside Slurm
expect 2 env SATRAP_SLURM=1 "$satrap" node --manifest "$work/m.yaml"   # not in a Slurm job
expect 2 "$satrap" submit "${m[@]}" "$work/bad.yaml"
expect 1 "$satrap" submit "${m[@]}" "$tiny"
expect 1 "$satrap" cancel "${m[@]}" 1
expect 1 "$satrap" checkpoint "${m[@]}" 1
# certs, export, predict, serve
expect 0 "$satrap" certs --manifest "$work/m.yaml" --out "$work/certs"
expect 2 "$satrap" certs --manifest "$work/no-such-manifest.yaml"
expect 2 "$satrap" export
expect 2 "$satrap" predict --model "$work/no-such-model"
expect 2 "$satrap" serve --model "$work/no-such-model"

if [ "$failures" -gt 0 ]; then
  echo "exit_codes: $failures case(s) failed"
  exit 1
fi
echo "exit_codes: every case exited as README says"
