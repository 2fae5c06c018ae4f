#!/bin/sh
# A fleet against one server (issue 49's figure): trains and exports a Criteo-shaped model (13
# dense features, 26 slots) in 3 export shards, starts 3 partition servers (satrap serve --shards
# K), a router in front (satrap route) and one server holding the whole model, then drives the
# /v1 JSON route of the router and of the one server with serve_bench's closed-loop client,
# interleaved round by round: QPS and p50 / p99 at 1 and 64 instances per request, and the
# router's figures over the one server's (ratio lines at the end). Loopback ports PORT..PORT+5.
# usage: tests/bench/fleet_bench.sh [BUILD=build] [SECONDS=3] [CONNECTIONS=8] [ROUNDS=3] [PORT=5330]
set -eu
build=${1:-build}
seconds=${2:-3}
connections=${3:-8}
rounds=${4:-3}
port=${5:-5330}
satrap="$build/bin/satrap"
work=$(mktemp -d)
pids=""
cleanup() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
"$satrap" train --name bench --slots 26 --dense-features 13 --vocab 100000 --train-batches 200 \
  --test-batches 8 --batch-size 512 --export "$work/model" --export-shards 3 >/dev/null
"$satrap" predict --model "$work/model" --instances "$work/inst.jsonl" >/dev/null
ready() {
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "fleet_bench: port $1 did not become ready" >&2
  exit 1
}
for k in 0 1 2; do
  "$satrap" serve --model "$work/model" --shards "$k" --port $((port + 2 + k)) --threads 1 \
    --log-level warn >/dev/null 2>&1 &
  pids="$pids $!"
  ready $((port + 2 + k))
done
"$satrap" route --model "$work/model" --port $((port + 1)) --log-level warn \
  --servers "127.0.0.1:$((port + 2)),127.0.0.1:$((port + 3)),127.0.0.1:$((port + 4))" \
  >/dev/null 2>&1 &
pids="$pids $!"
ready $((port + 1))
"$satrap" serve --model "$work/model" --port $((port + 5)) --log-level warn >/dev/null 2>&1 &
pids="$pids $!"
ready $((port + 5))
echo "router: port $((port + 1)) (3 partition servers: $((port + 2))-$((port + 4))); one server: port $((port + 5))"
"$build/bin/serve_bench" "$work/model" "$work/inst.jsonl" "$seconds" "$connections" "$port" \
  "$rounds" targets "$((port + 1)),$((port + 5))" | tee "$work/out.txt"
python3 - "$work/out.txt" "$((port + 1))" "$((port + 5))" <<'PY'
import sys
line = [l for l in open(sys.argv[1]) if l.startswith("rounds=")][-1]
f = dict(kv.split("=") for kv in line.split()[1:])
r, s = sys.argv[2], sys.argv[3]
for what in ("json1_qps", "json64_qps", "json1_p99_ms", "json64_p99_ms"):
    a, b = float(f["target_%s_%s" % (r, what)]), float(f["target_%s_%s" % (s, what)])
    print("router_over_one_server_%s=%.3f (router %.2f, one server %.2f)" % (what, a / b, a, b))
PY
