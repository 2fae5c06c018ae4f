#!/usr/bin/env bash
# Where the cluster's CPU goes per sample, against the embedded job's (issue 51).
# The same job (the default one, TRAIN_BATCHES batches) runs on a 3-node loopback cluster (TLS on,
# as `satrap up` makes it) and embedded, interleaved ROUNDS times. For each run: the CPU seconds
# (user + system, from /proc) of every process over the job, per sample, and, with PERF=1 (default),
# a `perf record -g` of every process during the job, its samples put in buckets by symbol and
# library (compute, embedding store, serialisation, TLS, copies, allocation, system calls and
# network stack, scheduler and waiting, other) by tests/bench/perf_buckets.py.
# Prints per round `round=R cluster_sps= embedded_sps= sps_ratio= cluster_cpu_us_per_sample=
# embedded_cpu_us_per_sample= cpu_ratio=`, the buckets of both (share of CPU and us per sample) and
# per thread name the cluster's CPU; the last line is key=value (medians).
# usage: tests/bench/cluster_breakdown.sh [SATRAP=build/bin/satrap] [TRAIN_BATCHES=4000] [ROUNDS=1]
#        env: PERF=0 skips perf; PERF_OUT=DIR keeps the profiles there; PERF_BUCKETS_TOP=N lists
#        the top leaf frames; STALENESS=K sets training.staleness; TLS=off sets security.tls off;
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
satrap=$(realpath "${1:-$root/build/bin/satrap}")
batches=${2:-4000}
rounds=${3:-1}
perf=${PERF:-1}
work=$(mktemp -d /tmp/satrap-breakdown.XXXXXX)
state="$work/state"
base=$(( 20000 + ($$ % 500) * 10 ))
cleanup() {
  "$satrap" down --manifest "$work/manifest.yaml" --state-dir "$state" > /dev/null 2>&1 || true
  pkill -9 -f -- "--state-dir $state" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
cat > manifest.yaml <<YAML
cluster: breakdown-$$
head: {host: 127.0.0.1, port: $base, status_port: $((base + 9))}
nodes:
  - name: node-{i}
    count: 3
    host: 127.0.0.1
    port: $((base + 1))
    resources: {cores: 2, memory: 4GiB, gpus: 0}
YAML
[ "${TLS:-on}" = off ] && printf 'security: {tls: off}\n' >> manifest.yaml
{
  echo "name: breakdown"
  t="train_batches: $batches"
  [ -n "${STALENESS:-}" ] && t="$t, staleness: $STALENESS"
  echo "training: {$t}"
} > job.yaml
"$satrap" up --manifest manifest.yaml --state-dir "$state" --wait 60 > /dev/null

cpu_of() {  # user+system clock ticks of these pids (all threads)
  local t=0
  for p in "$@"; do
    read -r -a f < <(sed 's/.*) //' "/proc/$p/stat")
    t=$(( t + f[11] + f[12] ))
  done
  echo $t
}
threads_of() {  # "process:thread-name ticks" per thread of these pids (process: head or node-N)
  for p in "$@"; do
    local who
    who=$(tr '\0' ' ' < "/proc/$p/cmdline" | grep -o -e '^satrap head' -e 'node-[0-9]*' | head -n 1 | tr ' ' '_')
    for t in /proc/$p/task/*; do
      read -r -a f < <(sed 's/.*) //' "$t/stat")
      echo "$who:$(tr ' ' '_' < "$t/comm") $(( f[11] + f[12] ))"
    done
  done
}
hz=$(getconf CLK_TCK)
pids=$(pgrep -f -- "--state-dir $state" | while read -r p; do
  grep -qa -e '^satrap.head' -e '^satrap.node' <(tr '\0' ' ' < /proc/$p/cmdline) && echo $p; done | tr '\n' ' ')
[ -n "$pids" ] || { echo "no cluster processes" >&2; exit 1; }

results=()
for r in $(seq 1 "$rounds"); do
  # The cluster.
  threads_of $pids > th0.txt
  c0=$(cpu_of $pids)
  if [ "$perf" = 1 ]; then
    # Per process (threads started later inherit it). Not `-a`: on this VM a system-wide
    # `perf record -g` slowed the cluster twelvefold (15k against 180k samples/s).
    perf record -q -g -F 499 -o cluster.perf -p "$(tr ' ' ',' <<< "${pids% }")" > /dev/null 2>&1 &
    perfpid=$!
  fi
  "$satrap" submit job.yaml --follow --json --manifest manifest.yaml --state-dir "$state" > submit.out
  [ "$perf" = 1 ] && { kill -INT $perfpid; wait $perfpid || true; }
  c1=$(cpu_of $pids)
  threads_of $pids > th1.txt
  # Embedded: /usr/bin/time measures satrap alone (perf, when it records, is its parent).
  pre=()
  [ "$perf" = 1 ] && pre=(perf record -q -g -F 499 -o embedded.perf --)
  "${pre[@]}" /usr/bin/time -f "%U %S" -o time.txt "$satrap" train --job job.yaml --json \
    > embedded.out 2> /dev/null
  python3 - submit.out embedded.out "$c0" "$c1" "$hz" th0.txt th1.txt "$r" time.txt <<'PY' | tee -a summary.txt
import json, sys, collections
cl = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
em = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
c0, c1, hz = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cl_cpu = (c1 - c0) / hz
samples = cl["samples"]
em_cpu = sum(float(x) for x in open(sys.argv[9]).read().split()[-2:])
def threads(path):
    d = collections.Counter()
    for line in open(path):
        n, t = line.rsplit(" ", 1)
        d[n.rstrip("0123456789.-_")] += int(t)
    return d
t0, t1 = threads(sys.argv[6]), threads(sys.argv[7])
per_thread = {k: (t1[k] - t0.get(k, 0)) / hz for k in t1}
print(f"round={sys.argv[8]} cluster_sps={cl['samples_per_sec']:.0f} embedded_sps={em['samples_per_sec']:.0f} "
      f"sps_ratio={cl['samples_per_sec'] / em['samples_per_sec']:.3f} cluster_cpu_s={cl_cpu:.2f} "
      f"cluster_cpu_us_per_sample={cl_cpu / samples * 1e6:.3f} embedded_cpu_s={em_cpu:.2f} "
      f"embedded_cpu_us_per_sample={em_cpu / em['samples'] * 1e6:.3f} "
      f"cpu_ratio={(cl_cpu / samples) / (em_cpu / em['samples']):.3f} cluster_auc={cl['test_auc']:.4f} "
      f"embedded_auc={em['test_auc']:.4f}")
print("cluster CPU by process:thread name (s; threads that ended are not listed): " + " ".join(
    f"{k}={v:.2f}" for k, v in sorted(per_thread.items(), key=lambda kv: -kv[1]) if v > 0))
PY
  if [ "$perf" = 1 ]; then
    python3 "$root/tests/bench/perf_buckets.py" cluster.perf embedded.perf submit.out embedded.out \
      "$(tr ' ' ',' <<< "${pids% }")" | tee -a summary.txt
    [ -n "${PERF_OUT:-}" ] && cp cluster.perf embedded.perf submit.out embedded.out "$PERF_OUT/"
  fi
done
python3 - summary.txt <<'PY'
import re, statistics, sys
rows = [dict(kv.split("=", 1) for kv in l.split()) for l in open(sys.argv[1]) if l.startswith("round=")]
med = lambda k, src: statistics.median(float(r[k]) for r in src if k in r)
out = {k: med(k, rows) for k in ("cluster_sps", "embedded_sps", "sps_ratio",
        "cluster_cpu_us_per_sample", "embedded_cpu_us_per_sample", "cpu_ratio")}
print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) and v < 100 else f"{k}={v:.0f}" for k, v in out.items()))
PY
