#!/usr/bin/env bash
# Validates satrap k8s output offline against the Kubernetes API schema (ops/k8s/validate,
# kubernetes-models): ops/k8s/persia-100t.yaml, and fresh renderings of both manifests in both
# flavors; then checks that a broken object is refused, so the validator cannot pass blindly.
# Exit 77 (skipped) when node or the validator's packages are missing (ops/setup.sh installs them).
# usage: k8s_validate.sh SATRAP_BINARY SOURCE_ROOT
set -euo pipefail
satrap=$1
root=$2
validator="$root/ops/k8s/validate"
command -v node >/dev/null || { echo "k8s_validate: SKIP: node is missing"; exit 77; }
[ -d "$validator/node_modules/kubernetes-models" ] \
  || { echo "k8s_validate: SKIP: run ops/setup.sh (npm ci in ops/k8s/validate)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=("$root/ops/k8s/persia-100t.yaml")
# The 138-node manifest without its Secrets (certificates for every node take a while to make);
# the 3-node one with them (certificates made in $work), and its Secrets alone.
for m in gcp-persia-100t local-3node; do
  secrets=include
  [ "$m" = gcp-persia-100t ] && secrets=external
  for flavor in kubernetes podman; do
    "$satrap" k8s --manifest "$root/ops/manifests/$m.yaml" --flavor "$flavor" --namespace satrap-test \
      --job "$root/tests/cli/tiny_job.yaml" --secrets "$secrets" --certs "$work/certs" \
      -o "$work/$m-$flavor.yaml"
    files+=("$work/$m-$flavor.yaml")
  done
done
# With checkpoint storage (a new ReadWriteMany claim).
"$satrap" k8s --manifest "$root/ops/manifests/local-3node.yaml" --namespace satrap-test --secrets external \
  --storage-size 100Gi --storage-class standard-rwx --job "$root/tests/cli/tiny_job.yaml" \
  -o "$work/local-3node-storage.yaml"
grep -q "kind: PersistentVolumeClaim" "$work/local-3node-storage.yaml" \
  || { echo "k8s_validate: FAIL: --storage-size rendered no claim" >&2; exit 1; }
files+=("$work/local-3node-storage.yaml")
"$satrap" k8s --manifest "$root/ops/manifests/local-3node.yaml" --secrets only --certs "$work/certs" \
  -o "$work/secrets-only.yaml"
grep -q "kind: Secret" "$work/secrets-only.yaml" && grep -q "BEGIN CERTIFICATE" "$work/secrets-only.yaml" \
  || { echo "k8s_validate: FAIL: --secrets only rendered no certificate Secret" >&2; exit 1; }
files+=("$work/secrets-only.yaml")
node "$validator/validate.mjs" "${files[@]}"
# Pod Security "restricted" (and read-only roots) for the Kubernetes flavor (podman's one Pod uses
# the host's network, which restricted forbids), and a pod that breaks it must be refused.
node "$validator/validate.mjs" --restricted "$root/ops/k8s/persia-100t.yaml" \
  "$work/gcp-persia-100t-kubernetes.yaml" "$work/local-3node-kubernetes.yaml" \
  "$work/local-3node-storage.yaml"
sed -e 's/readOnlyRootFilesystem: true/readOnlyRootFilesystem: false/' \
  "$work/local-3node-kubernetes.yaml" > "$work/writable.yaml"
if out=$(node "$validator/validate.mjs" --restricted "$work/writable.yaml" 2>&1); then
  echo "k8s_validate: FAIL: a writable root file system passed the restricted check" >&2; exit 1
fi
echo "$out" | grep -q 'readOnlyRootFilesystem not true' \
  || { echo "k8s_validate: FAIL: unexpected restricted-check output: $out" >&2; exit 1; }
# A field the API does not know and a wrong type must be refused.
sed -e 's/^  replicas: 1$/  replicas: one/' -e 's/^  serviceName: gpu$/  serviceName: gpu\n  bogusField: 1/' \
  "$root/ops/k8s/persia-100t.yaml" > "$work/broken.yaml"
grep -q bogusField "$work/broken.yaml" && grep -q "replicas: one" "$work/broken.yaml" \
  || { echo "k8s_validate: FAIL: could not break the file (its layout changed?)" >&2; exit 1; }
if out=$(node "$validator/validate.mjs" "$work/broken.yaml" 2>&1); then
  echo "k8s_validate: FAIL: the validator accepted a broken file" >&2; exit 1
fi
grep -q "replicas must be integer" <<<"$out" && grep -q "bogusField: unknown field" <<<"$out" \
  || { echo "k8s_validate: FAIL: unexpected validator output: $out" >&2; exit 1; }
echo "k8s_validate: PASS"
