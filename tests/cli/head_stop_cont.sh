#!/usr/bin/env bash
# SIGSTOP then SIGCONT must not stop the head (it once took the EINTR of SIGCONT for a stop
# signal and exited); SIGTERM still does, with status 0.
# usage: head_stop_cont.sh SATRAP_BINARY
set -euo pipefail
satrap=$1
work=$(mktemp -d /tmp/satrap-stopcont.XXXXXX)
base=$(( 30000 + ($$ % 270) * 10 ))  # 30000-32699: below the ephemeral range (tests/README.md)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cat > "$work/manifest.yaml" <<YAML
cluster: stopcont-$$
head: {host: 127.0.0.1, port: $base, status_port: $((base + 9))}
nodes:
  - {name: n0, host: 127.0.0.1, port: $((base + 1)), resources: {cores: 2, memory: 4GiB}}
security: {tls: off}   # this test is about signals, not certificates
YAML
echo "token-$$" > "$work/token"
"$satrap" head --manifest "$work/manifest.yaml" --state-dir "$work/state" --token-file "$work/token" \
  2> "$work/head.log" &
pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$((base + 9))/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$((base + 9))/healthz" >/dev/null || { cat "$work/head.log"; echo "FAIL: head did not start"; exit 1; }
kill -STOP "$pid"; sleep 1; kill -CONT "$pid"; sleep 1
if ! kill -0 "$pid" 2>/dev/null; then cat "$work/head.log"; echo "FAIL: the head exited after SIGSTOP + SIGCONT"; exit 1; fi
curl -sf "http://127.0.0.1:$((base + 9))/healthz" >/dev/null || { echo "FAIL: the head stopped answering"; exit 1; }
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
pid=""
[ "$rc" = 0 ] || { echo "FAIL: SIGTERM: exit status $rc"; exit 1; }
echo "head survived SIGSTOP+SIGCONT and stopped on SIGTERM"
