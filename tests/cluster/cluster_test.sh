#!/usr/bin/env bash
# A 3-node cluster on loopback, as users run it: `satrap up`, submit a job, watch /status and
# /metrics while it runs, compare its test AUC with the embedded run of the same job, check the
# error paths (wrong token, bad job file, unreachable head), `satrap down`, and make sure no
# satrap process is left.
# usage: cluster_test.sh SATRAP_BINARY [TRAIN_BATCHES]   (default: the default job's 10000)
set -euo pipefail
satrap=$1
batches=${2:-}
work=$(mktemp -d /tmp/satrap-cluster-test.XXXXXX)
state="$work/state"
# Ports: a block chosen from the test's pid so parallel runs do not collide.
base=$(( 20000 + ($$ % 500) * 10 ))  # 20000-24999: below the ephemeral range (tests/README.md)
cleanup() {
  "$satrap" down --manifest "$work/manifest.yaml" --state-dir "$state" >/dev/null 2>&1 || true
  pkill -9 -f -- "--state-dir $state" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "cluster_test: FAIL: $*" >&2; for f in "$state"/*.log; do echo "== $f"; tail -n 20 "$f"; done >&2; exit 1; }

cat > "$work/manifest.yaml" <<YAML
cluster: test-$$
head: {host: 127.0.0.1, port: $base, status_port: $((base + 9))}
nodes:
  - name: node-{i}
    count: 3
    host: 127.0.0.1
    port: $((base + 1))
    resources: {cores: 2, memory: 4GiB, gpus: 0}
YAML
# The default synthetic job (whole, unless a batch count is given), with a checkpoint folder so
# that `satrap checkpoint` can be asked for one while it runs.
{
  echo "name: cluster-test"
  echo "checkpoint: {dir: ckpt}"
  [ -n "$batches" ] && echo "training: {train_batches: $batches}"
} > "$work/job.yaml"
cd "$work"

"$satrap" up --manifest manifest.yaml --state-dir "$state" --wait 60 || fail "satrap up"

# Error paths while the cluster is up.
out=$(SATRAP_ADMIN_TOKEN=wrong "$satrap" submit job.yaml --manifest manifest.yaml --state-dir "$state" 2>&1) \
  && fail "a wrong token was accepted"
grep -q "admin token refused" <<<"$out" || fail "wrong token: unclear error: $out"
printf 'training:\n  batch_sise: 3\n' > bad.yaml
out=$("$satrap" submit bad.yaml --manifest manifest.yaml --state-dir "$state" 2>&1) \
  && fail "a bad job file was accepted"
grep -q "bad.yaml:2:3: unknown key 'training.batch_sise'" <<<"$out" || fail "bad job: unclear error: $out"
sed "s/port: $base,/port: $((base + 8)),/" manifest.yaml > unreachable.yaml
out=$("$satrap" jobs --manifest unreachable.yaml --state-dir "$state" 2>&1) && fail "an unreachable head answered"
grep -q "cannot reach the head" <<<"$out" || fail "unreachable head: unclear error: $out"

# A node of another cluster is refused.
sed -e "s/^cluster: .*/cluster: other-$$/" -e "s/port: $((base + 1))/port: $((base + 5))/" \
  manifest.yaml > other.yaml
# With TLS (the default) its certificate, from its own cluster CA, fails the handshake.
"$satrap" certs --manifest other.yaml > /dev/null || fail "satrap certs for the other cluster"
out=$(timeout 30 "$satrap" node --manifest other.yaml --name node-0 --wait 3 2>&1) \
  && fail "a node of another cluster joined"
grep -q "could not join the head of cluster 'other-$$'" <<<"$out" \
  || fail "foreign node: unclear error: $out"

# The job, followed in the background while we read the status endpoint.
"$satrap" submit job.yaml --follow --json --manifest manifest.yaml --state-dir "$state" \
  > submit.out 2> submit.err &
follow=$!
seen_status=0
seen_metrics=0
for _ in $(seq 1 600); do
  if curl -sf "http://127.0.0.1:$((base + 9))/status" > status.json \
     && python3 - status.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["nodes"]) == 3 and all(n["alive"] for n in d["nodes"])
job = [j for j in d["jobs"] if j["name"] == "cluster-test"]
assert job and job[0]["state"] == "RUNNING" and job[0]["samples"] > 0
shards = [a for a in d["actors"] if a["role"] == "embedding_shard"]
assert shards and all("mailbox" in a and a["messages_total"] >= 0 for a in shards)
assert any(a["messages_per_sec"] > 0 for a in d["actors"])
PY
  then seen_status=1; fi
  if curl -sf "http://127.0.0.1:$((base + 9))/metrics" > metrics.txt \
     && grep -q '^satrap_job_samples_total{job="j1"} [1-9]' metrics.txt \
     && grep -q '^# TYPE satrap_step_latency_seconds histogram' metrics.txt; then seen_metrics=1; fi
  [ $seen_status = 1 ] && [ $seen_metrics = 1 ] && break
  kill -0 $follow 2>/dev/null || break
  sleep 0.5
done
[ $seen_status = 1 ] || fail "never saw the running job in /status"
# A checkpoint on demand, while it runs.
out=$("$satrap" checkpoint j1 --manifest manifest.yaml --state-dir "$state" 2>&1) \
  || fail "satrap checkpoint: $out"
grep -q "job j1: checkpoint at step [0-9]" <<<"$out" || fail "satrap checkpoint: $out"
[ -f ckpt/checkpoint-00000001.json ] || fail "no checkpoint manifest after satrap checkpoint"
[ $seen_metrics = 1 ] || fail "never saw the running job in /metrics"
curl -sf "http://127.0.0.1:$((base + 9))/healthz" > /dev/null || fail "/healthz"
wait $follow || fail "the job did not succeed: $(cat submit.out submit.err)"

# The same job embedded, same seed: the test AUC must agree within 0.005.
grep -v '^checkpoint:' job.yaml > embedded.yaml
"$satrap" train --job embedded.yaml --json > embedded.out 2>/dev/null || fail "embedded run"
python3 - submit.out embedded.out <<'PY' || fail "AUC differs"
import json, sys
cluster = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
embedded = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
d = abs(cluster["test_auc"] - embedded["test_auc"])
print(f"cluster_test_auc={cluster['test_auc']:.4f} embedded_test_auc={embedded['test_auc']:.4f} "
      f"auc_delta={d:.4f} cluster_sps={cluster['samples_per_sec']:.0f} "
      f"embedded_sps={embedded['samples_per_sec']:.0f} "
      f"sps_ratio={cluster['samples_per_sec'] / embedded['samples_per_sec']:.3f}")
assert cluster["state"] == "SUCCEEDED"
assert d <= 0.005, d
PY

"$satrap" down --manifest manifest.yaml --state-dir "$state" || fail "satrap down"
sleep 0.5
if pgrep -f -- "--state-dir $state" > /dev/null; then fail "processes left after satrap down"; fi
echo "cluster_test: PASS"
