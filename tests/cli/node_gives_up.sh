#!/usr/bin/env bash
# A node that gives up on its head exits (status 1) instead of hanging: the head is stopped
# (SIGSTOP) after the node joined; the node, started with --wait 3, must be gone within 30 s.
# (It once hung forever in actor_system::~actor_system() at 18% CPU.) Ports 5620-5629.
# usage: node_gives_up.sh SATRAP_BINARY
set -euo pipefail
satrap=$1
work=$(mktemp -d /tmp/satrap-giveup.XXXXXX)
head_pid=""
node_pid=""
cleanup() {
  for p in $node_pid $head_pid; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
cat > "$work/manifest.yaml" <<YAML
cluster: giveup-$$
head: {host: 127.0.0.1, port: 5620, status_port: 5629}
nodes:
  - {name: n0, host: 127.0.0.1, port: 5621, resources: {cores: 2, memory: 4GiB}}
security: {tls: off}
timing: {heartbeat_interval_ms: 200, register_timeout_ms: 1000}
YAML
echo "token-$$" > "$work/token"
"$satrap" certs --manifest "$work/manifest.yaml" --out "$work/state/certs" > /dev/null
"$satrap" head --manifest "$work/manifest.yaml" --state-dir "$work/state" --token-file "$work/token" \
  2> "$work/head.log" &
head_pid=$!
"$satrap" node --manifest "$work/manifest.yaml" --state-dir "$work/state" --name n0 --wait 3 \
  2> "$work/node.log" &
node_pid=$!
for _ in $(seq 150); do
  curl -sf "http://127.0.0.1:5629/status" 2>/dev/null | grep -q '"alive":true' && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:5629/status" | grep -q '"alive":true' \
  || { cat "$work/head.log" "$work/node.log"; echo "FAIL: the node did not join"; exit 1; }
kill -STOP "$head_pid"
stopped=$SECONDS
for _ in $(seq 300); do
  kill -0 "$node_pid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$node_pid" 2>/dev/null; then
  tail -5 "$work/node.log"
  echo "FAIL: the node still runs $((SECONDS - stopped)) s after its head stopped (hang)"
  exit 1
fi
rc=0; wait "$node_pid" || rc=$?
node_pid=""
[ "$rc" = 1 ] || { tail -5 "$work/node.log"; echo "FAIL: the node exited $rc, expected 1"; exit 1; }
echo "the node gave up on its stopped head and exited (status 1) after $((SECONDS - stopped)) s"
