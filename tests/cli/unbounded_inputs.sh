#!/usr/bin/env bash
# Unbounded inputs are refused at once with a clear error (exit 2): --threads past the limit, a job
# file or manifest too large (its size checked before it is read), /dev/zero as a job file or a
# training file, manifest sizes such as 1e300PiB or inf. Each case must end within 10 s.
# usage: unbounded_inputs.sh SATRAP_BINARY
set -uo pipefail
satrap=$1
work=$(mktemp -d /tmp/satrap-unbounded.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
refused() {  # refused PATTERN COMMAND...: exit 2 within 10 s, output matching PATTERN
  local pattern=$1
  shift
  local start=$SECONDS
  timeout 10 "$@" > "$work/out" 2>&1
  local got=$?
  if [ "$got" != 2 ] || ! grep -q -- "$pattern" "$work/out"; then
    echo "FAIL: exit $got after $((SECONDS - start)) s, expected 2 and '$pattern': $*"
    head -c 400 "$work/out" | sed 's/^/  | /'
    failures=$((failures + 1))
  else
    echo "ok   refused in $((SECONDS - start)) s: $(head -c 160 "$work/out" | head -1)"
  fi
}
refused "not in range" "$satrap" train --threads 100000
refused "not in range" "$satrap" serve --model "$work" --threads 100000
# A 20 MB job file: refused by its size, before it is read.
{ echo "name: big"; head -c 20000000 /dev/zero | tr '\0' '#'; echo; } > "$work/big.yaml"
refused "may have at most 1024 KiB" "$satrap" train --job "$work/big.yaml"
refused "may have at most 1024 KiB" "$satrap" submit --manifest "$work/none.yaml" "$work/big.yaml"
refused "not a regular file" "$satrap" train --job /dev/zero
refused "not a regular file" "$satrap" plan --manifest /dev/zero
cat > "$work/zero.yaml" <<YAML
name: zero
data: {source: libfm, train_files: [/dev/zero], field_starts: [0], cache_dir: $work/cache}
training: {batch_size: 2, train_batches: 0, epochs: 1, test_batches: 0}
YAML
refused "/dev/zero: not a regular file" "$satrap" train --job "$work/zero.yaml"
for memory in 1e300PiB inf nan 2EiB 9e18; do
  cat > "$work/m-$memory.yaml" <<YAML
cluster: big
head: {host: 127.0.0.1, port: 5693, status_port: 5695}
nodes:
  - {name: n0, host: 127.0.0.1, port: 5694, resources: {cores: 2, memory: $memory}}
YAML
  refused "memory: expected a size such as 64GiB or 12TB (at most 1EiB), got '$memory'" \
    "$satrap" plan --manifest "$work/m-$memory.yaml"
done
if [ "$failures" -gt 0 ]; then
  echo "unbounded_inputs: $failures case(s) failed"
  exit 1
fi
echo "unbounded_inputs: every unbounded input refused"
