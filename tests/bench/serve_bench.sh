#!/bin/sh
# Trains and exports a Criteo-shaped model (13 dense features, 26 slots) on synthetic data, writes
# its test rows as request instances, then runs serve_bench on them (loopback port 5310): the
# KServe v2 binary route, v2 JSON and the /v1 JSON route against in-process scoring in the same go.
# MODE grpc: KServe v2 over gRPC (port PORT+1) instead, beside the binary route (serve_bench.cpp).
# usage: tests/bench/serve_bench.sh [BUILD=build] [SECONDS=3] [CONNECTIONS=8] [ROUNDS=3] [PORT=5310]
#                                   [MODE=http|grpc]
set -eu
build=${1:-build}
seconds=${2:-3}
connections=${3:-8}
rounds=${4:-3}
port=${5:-5310}
mode=${6:-http}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/satrap" train --name bench --slots 26 --dense-features 13 --vocab 100000 \
  --train-batches 200 --test-batches 8 --batch-size 512 --export "$work/model" >/dev/null
"$build/bin/satrap" predict --model "$work/model" --instances "$work/inst.jsonl" >/dev/null
if [ "$mode" = grpc ]; then
  "$build/bin/serve_bench" "$work/model" "$work/inst.jsonl" "$seconds" "$connections" "$port" "$rounds" grpc
else
  "$build/bin/serve_bench" "$work/model" "$work/inst.jsonl" "$seconds" "$connections" "$port" "$rounds"
fi
