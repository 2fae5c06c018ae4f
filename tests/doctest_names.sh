#!/usr/bin/env bash
# CTest lint/doctest_names: no doctest case name may hold a ';'. doctest_discover_tests hands the
# names to CTest as a CMake list, which splits them there into tests that select nothing (and fail).
# usage: doctest_names.sh TESTS_DIR
set -euo pipefail
dir=${1:?usage: doctest_names.sh TESTS_DIR}
if bad=$(grep -rn --include='*.cpp' -E 'TEST_CASE\("[^"]*;' "$dir"); then
  echo "doctest_names: a test case name holds ';' (CTest would split it); rename it:" >&2
  echo "$bad" >&2
  exit 1
fi
echo "doctest_names: no ';' in any test case name under $dir"
