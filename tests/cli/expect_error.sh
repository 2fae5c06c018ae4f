#!/bin/sh
# Runs a command that must fail: non-zero exit status and output matching a pattern.
# usage: expect_error.sh PATTERN COMMAND [ARGS...]
pattern=$1
shift
out=$("$@" 2>&1)
status=$?
echo "$out"
if [ "$status" -eq 0 ]; then
  echo "expect_error: exit status 0, expected a failure" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -q -- "$pattern"; then
  echo "expect_error: output does not match: $pattern" >&2
  exit 1
fi
exit 0
