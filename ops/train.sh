#!/usr/bin/env bash
# Sets everything up (ops/setup.sh), then runs `satrap` with the given arguments
# (default: `satrap train`, the default model on the default synthetic data).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/ops/setup.sh" >&2
[ $# -eq 0 ] && set -- train
exec "$root/build/bin/satrap" "$@"
