#!/usr/bin/env bash
# ops/k8s/persia-100t.yaml is what `satrap k8s` renders for ops/manifests/gcp-persia-100t.yaml
# with --secrets external (the Secrets are rendered apart, with `--secrets only`). On a difference: regenerate it with the command
# below and review the diff.
# usage: k8s_sync.sh SATRAP_BINARY SOURCE_ROOT
set -euo pipefail
satrap=$1
cd "$2"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$satrap" k8s --manifest ops/manifests/gcp-persia-100t.yaml --secrets external -o "$out"
if ! diff -u ops/k8s/persia-100t.yaml "$out"; then
  echo "k8s_sync: ops/k8s/persia-100t.yaml is stale; regenerate it:" >&2
  echo "  satrap k8s --manifest ops/manifests/gcp-persia-100t.yaml --secrets external -o ops/k8s/persia-100t.yaml" >&2
  exit 1
fi
echo "k8s_sync: ops/k8s/persia-100t.yaml is in sync"
