#!/usr/bin/env bash
# The cluster runtime's figures, measured in one go:
#   - embedding lookups between two processes (CAF middleman) as a fraction of raw TCP loopback
#     (build/bin/remote_lookup_bench);
#   - samples/s of the same job on a 3-process loopback cluster and embedded
#     (tests/cluster/cluster_test.sh, which also checks correctness).
# The last line is key=value pairs.
# usage: tests/bench/cluster_bench.sh [TRAIN_BATCHES=4000]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
batches=${1:-4000}
lookup=$("$root/build/bin/remote_lookup_bench" | tee /dev/stderr | tail -n 1)
cluster=$("$root/tests/cluster/cluster_test.sh" "$root/build/bin/satrap" "$batches" | tee /dev/stderr \
          | grep '^cluster_test_auc=')
echo "$lookup $cluster train_batches=$batches"
