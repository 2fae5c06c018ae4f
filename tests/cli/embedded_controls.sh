#!/usr/bin/env bash
# `satrap train --status-port` runs its job under an admin of its own (issue 42): the page's
# /status and /metrics are the admin's, read-only without a token (POST 403 "read-only"), and with
# SATRAP_ADMIN_TOKEN set its controls answer as a head's: a wrong token 403, no token 401, an
# unknown job 409, and a cancel 200 that ends `satrap train` with exit 1 and the reason.
# Loopback port 5700 (read-only run) and 5701 (with the token).
# usage: embedded_controls.sh SATRAP_BINARY
set -uo pipefail
satrap=$1
work=$(mktemp -d /tmp/satrap-embedded.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; sed 's/^/  | /' "$work/train.log" | tail -5; exit 1; }
cat > "$work/job.yaml" <<YAML
name: embedded-controls
data:
  synthetic: {slots: 4, vocab: 2000}
training: {batch_size: 64, train_batches: 4000000, test_batches: 4, staleness: 1}
placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2}
YAML
# http METHOD URL [TOKEN] -> "STATUS BODY"
http() {
  python3 - "$@" <<'PY'
import sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
if len(sys.argv) > 3:
    req.add_header("X-Satrap-Token", sys.argv[3])
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode())
except Exception as e:
    print(0, e)
PY
}
wait_up() {  # wait_up PORT
  for _ in $(seq 100); do
    [ "$(http GET "http://127.0.0.1:$1/status" | cut -d' ' -f1)" = 200 ] && return 0
    sleep 0.2
  done
  fail "no /status on port $1"
}
expect() {  # expect WANT_STATUS WANT_TEXT METHOD URL [TOKEN]
  local want=$1 text=$2
  shift 2
  local got
  got=$(http "$@")
  [ "${got%% *}" = "$want" ] || fail "$*: $got (expected $want)"
  [[ "$got" == *"$text"* ]] || fail "$*: $got (expected '$text')"
  echo "ok   $want: $*"
}

# Read-only: no token given to satrap train.
env -u SATRAP_ADMIN_TOKEN "$satrap" train --job "$work/job.yaml" --threads 2 --status-port 5700 \
  > "$work/train.log" 2>&1 &
pids+=($!)
wait_up 5700
expect 200 '"read_only":true' GET http://127.0.0.1:5700/status
expect 200 '"embedded":true' GET http://127.0.0.1:5700/status
expect 200 'satrap_jobs{state="RUNNING"} 1' GET http://127.0.0.1:5700/metrics
expect 403 read-only POST http://127.0.0.1:5700/jobs/j1/cancel x
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null

# With a token: the head's controls.
SATRAP_ADMIN_TOKEN=sesame "$satrap" train --job "$work/job.yaml" --threads 2 --status-port 5701 \
  > "$work/train.log" 2>&1 &
pid=$!
pids+=($pid)
wait_up 5701
expect 200 '"read_only":false' GET http://127.0.0.1:5701/status
expect 401 'admin token' POST http://127.0.0.1:5701/jobs/j1/cancel
expect 403 'token refused' POST http://127.0.0.1:5701/jobs/j1/cancel wrong
expect 409 "no job 'j9'" POST http://127.0.0.1:5701/jobs/j9/cancel sesame
expect 200 '"state":"CANCELLED"' POST http://127.0.0.1:5701/jobs/j1/cancel sesame
wait "$pid"
status=$?
[ "$status" = 1 ] || fail "satrap train after a cancel: exit $status, expected 1"
grep -q "job failed: cancelled by the admin" "$work/train.log" || fail "no reason printed"
echo "ok   satrap train: exit 1, cancelled by the admin"
echo "embedded_controls: PASS"
