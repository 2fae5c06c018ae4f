#!/usr/bin/env bash
# Two `satrap up` of one manifest from two folders: the first starts the cluster; the second must
# fail (its head cannot listen: the ports are taken) and say so, although the first cluster's head
# answers on the status port, and it must leave none of its processes running. The first
# cluster's processes carry the satrap binary's name (`pgrep -x satrap` finds them, not "exe").
# Loopback ports 5630-5639.
# usage: second_up.sh SATRAP_BINARY
set -uo pipefail
satrap=$(readlink -f "$1")
work=$(mktemp -d /tmp/satrap-second-up.XXXXXX)
mkdir -p "$work/a" "$work/b"
cleanup() {
  (cd "$work/b" && "$satrap" down --manifest "$work/m.yaml" --state-dir "$work/b/state" >/dev/null 2>&1)
  (cd "$work/a" && "$satrap" down --manifest "$work/m.yaml" --state-dir "$work/a/state" >/dev/null 2>&1)
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$work"/*/state/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }
cat > "$work/m.yaml" <<YAML
cluster: second-up-$$
head: {host: 127.0.0.1, port: 5630, status_port: 5639}
nodes:
  - {name: n0, host: 127.0.0.1, port: 5631, resources: {cores: 2, memory: 4GiB}}
YAML
(cd "$work/a" && "$satrap" up --manifest "$work/m.yaml" --state-dir "$work/a/state" --wait 60) \
  > "$work/a.out" 2>&1 || { cat "$work/a.out"; fail "the first satrap up failed"; }
cat "$work/a.out"
# Item 6: cluster processes are named satrap.
named=$(pgrep -x satrap | tr '\n' ' ')
for rec in head supervisor node-n0; do
  pid=$(head -1 "$work/a/state/$rec.pid")
  case " $named " in
    *" $pid "*) echo "pgrep -x satrap finds the $rec (pid $pid)" ;;
    *) fail "pgrep -x satrap does not find the $rec (pid $pid, named '$(cat /proc/$pid/comm 2>/dev/null)')" ;;
  esac
done
# Item 5: the second up fails and says why; nothing of it is left running.
start=$SECONDS
(cd "$work/b" && "$satrap" up --manifest "$work/m.yaml" --state-dir "$work/b/state" --wait 20) \
  > "$work/b.out" 2>&1
rc=$?
cat "$work/b.out"
[ "$rc" != 0 ] || fail "the second satrap up reported success (exit 0)"
grep -q " up: head pid" "$work/b.out" && fail "the second satrap up printed 'cluster up'"
sleep 1
for rec in head supervisor node-n0; do
  [ -f "$work/b/state/$rec.pid" ] || continue
  pid=$(head -1 "$work/b/state/$rec.pid")
  if kill -0 "$pid" 2>/dev/null && grep -q "$work/b/state" "/proc/$pid/cmdline" 2>/dev/null; then
    fail "the failed up left its $rec running (pid $pid)"
  fi
done
# The first cluster is untouched.
curl -sf http://127.0.0.1:5639/readyz | grep -q "ready pid=$(head -1 "$work/a/state/head.pid")" \
  || fail "the first cluster's head no longer answers ready"
echo "second_up: the second up failed in $((SECONDS - start)) s (exit $rc) and left nothing running"
