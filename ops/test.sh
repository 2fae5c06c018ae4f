#!/usr/bin/env bash
# Sets everything up (ops/setup.sh), then runs every test with CTest; ends with CTest's summary.
#   --sanitize   first builds the unit-test programs with ASan+UBSan and asserts on (build-asan/)
#                and runs their tests there (labels in $SATRAP_ASAN_LABELS, default unit|sim) and
#                the fuzz corpora replays; a failure there fails the run, after the normal tests.
# Other arguments go to the normal ctest (e.g. -L unit, -R pipeline). The soak test (label soak,
# about 10 minutes) is left out: run it with `cd build && ctest -L soak --output-on-failure`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then
  sanitize=1
  shift
fi
"$root/ops/setup.sh"
jobs=$(nproc 2>/dev/null || echo 2)

asan_status=0
if [ "$sanitize" = 1 ]; then
  # Lean: only the test programs (and the corpus replays) are built; no CUDA, no CLI.
  asan_targets=(satrap_models_test satrap_actors_test satrap_sim)
  asan_labels=${SATRAP_ASAN_LABELS:-unit|sim}
  asan_dir="$root/build-asan"
  started=$(date +%s)
  # RelWithDebInfo without NDEBUG, and assert() on. -O1 -g1 (line tables, enough for ASan's
  # stack traces) compiles in less than half the CPU time of -O2 -g (tests/README.md, "CI time").
  cmake -S "$root" -B "$asan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DSATRAP_SANITIZE=address,undefined -DSATRAP_CUDA=OFF >/dev/null
  replays=$(cmake --build "$asan_dir" --target help | sed -n 's/^\.\.\. \(satrap_fuzz_replay_[a-z_]*\).*/\1/p')
  cmake --build "$asan_dir" -j "$jobs" --target "${asan_targets[@]}" $replays
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
  # ops/ubsan.supp: two findings inside CAF 0.17's headers (each explained there).
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:suppressions=$root/ops/ubsan.supp}
  (cd "$asan_dir" && ctest --output-on-failure -j "$jobs" -L "$asan_labels" \
     && ctest --output-on-failure -j "$jobs" -R '^fuzz/replay') || asan_status=$?
  unset ASAN_OPTIONS UBSAN_OPTIONS
  echo "test.sh: sanitizer build (ASan+UBSan, asserts on) took $(( $(date +%s) - started )) s;" \
       "$([ "$asan_status" = 0 ] && echo passed || echo "FAILED (see above)")"
fi

cd "$root/build"
status=0
ctest --output-on-failure -j "$jobs" -LE soak "$@" || status=$?
[ "$asan_status" != 0 ] && exit "$asan_status"
exit "$status"
