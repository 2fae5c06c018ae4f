#!/usr/bin/env bash
# Sets everything up (ops/setup.sh), then runs every test with CTest; ends with CTest's summary.
# Extra arguments go to ctest (e.g. -L unit, -R pipeline).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/ops/setup.sh"
cd "$root/build"
exec ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
