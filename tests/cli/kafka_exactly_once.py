#!/usr/bin/env python3
"""Exactly once from Kafka, embedded (issue 46): N uniquely numbered samples (JSON lines, the
number in a dense feature) are written with `satrap produce` over 4 partitions of librdkafka's mock
cluster (a helper process, TCP on loopback); a job reading them to the end offsets with
checkpoints is SIGKILLed mid-stream, then resumed from its checkpoint directory.

Which messages were trained is observed, not assumed: the checkpoint manifest's stream_positions
(the next offsets at the cut: the first run's trained prefix, kept by the checkpoint) and the
resumed run's data.kafka.trace_file (the offset range of every batch it made). Message i went to
partition i % 4 at offset i // 4, so offsets name numbers. The multiset of trained numbers must be
exactly the produced set: none lost, none twice.

Also: an unreachable broker fails at once with an error naming data.kafka.brokers and the timeout
knob, exit status 2.

With CLUSTER_BASE (a port): the same stream job submitted to a 3-node loopback cluster (ports
BASE..BASE+9), its two loaders on other processes than the head; every loader node appends the
batches it makes to the trace. A recovery (the job rolled back and replays batches) makes some
batch numbers twice: each must read the same offsets every time (a batch number is a read
position), and the distinct batches must hold each produced number exactly once.

usage: kafka_exactly_once.py SATRAP MOCK WORKDIR [CLUSTER_BASE]"""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

satrap, mock, work = sys.argv[1], sys.argv[2], sys.argv[3]
cluster_base = int(sys.argv[4]) if len(sys.argv) > 4 else 0
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)

PARTITIONS, N, BATCH = 4, 60000, 32
procs = []


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def fail(msg):
    cleanup()
    print("FAIL:", msg)
    sys.exit(1)


broker = subprocess.Popen([mock, "bootstrap.txt", "clicks", str(PARTITIONS)])
procs.append(broker)
for _ in range(200):
    if os.path.exists("bootstrap.txt"):
        break
    time.sleep(0.05)
else:
    fail("the mock cluster did not start")
brokers = open("bootstrap.txt").read().strip()

with open("stream.jsonl", "w") as f:
    for i in range(N):
        f.write(json.dumps({"label": int(i % 5 == 0), "n": i, "user": i % 97, "item": i % 13}) + "\n")
out = subprocess.run([satrap, "produce", "--brokers", brokers, "--topic", "clicks", "stream.jsonl"],
                     capture_output=True, text=True)
if out.returncode != 0 or f"produced {N} messages to {PARTITIONS} partitions" not in out.stdout:
    fail("produce: " + out.stdout + out.stderr)

job = f"""name: kafka_once
data:
  source: kafka
  kafka: {{brokers: "{brokers}", topics: [clicks], format: jsonl, start: earliest,
          end: end_offsets, trace_file: trace.jsonl}}
  features: [{{name: n, kind: dense}}, {{name: user, kind: id}}, {{name: item, kind: id}}]
training: {{batch_size: {BATCH}, train_batches: 0, staleness: 1}}
placement: {{shards: 2, aggregators: 1, loaders: 2, trainers: 1}}
"""
open("job.yaml", "w").write(job)


def trained_numbers(path):
    out = []
    for line in open(path):
        b = json.loads(line)
        if b["topic"] != "clicks" or b["samples"] != b["last"] - b["first"]:
            fail(f"trace: {b}")
        out += [o * PARTITIONS + b["partition"] for o in range(b["first"], b["last"])]
    return out


if cluster_base:
    base = cluster_base
    state = os.path.join(work, "state")
    open("manifest.yaml", "w").write(
        f"cluster: kafka-{os.getpid()}\nhead: {{host: 127.0.0.1, port: {base}, status_port: {base + 9}}}\n"
        f"nodes:\n  - name: node-{{i}}\n    count: 3\n    host: 127.0.0.1\n    port: {base + 1}\n"
        "    resources: {cores: 2, memory: 4GiB, gpus: 0}\n")
    # A lost reply (nodes that dialled each other at once lost a message in flight, before
    # node_link dialled one way per pair) would cost 20 s here, not the default 2 minutes.
    open("cluster.yaml", "w").write(job.replace("name: kafka_once", "name: kafka_cluster").replace(
        "trace_file: trace.jsonl", "trace_file: " + os.path.join(work, "trace-cluster.jsonl"))
        + "timing: {trainer_request_timeout_ms: 20000}\n")
    common = ["--manifest", "manifest.yaml", "--state-dir", state]
    try:
        r = subprocess.run([satrap, "up", *common, "--wait", "60"], capture_output=True, text=True)
        if r.returncode != 0:
            fail("up: " + r.stderr[-2000:])
        r = subprocess.run([satrap, "submit", "cluster.yaml", "--follow", "--json", *common],
                           capture_output=True, text=True, timeout=240)
        if r.returncode != 0:
            fail("submit: " + r.stdout[-2000:] + r.stderr[-2000:])
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        if rec["state"] != "SUCCEEDED" or rec["samples"] != N:
            fail(f"the cluster job: {rec}")
        by_batch = {}
        for line in open("trace-cluster.jsonl"):
            b = json.loads(line)
            key = (b["topic"], b["partition"], b["first"], b["last"])
            if by_batch.setdefault(b["batch"], key) != key:
                fail(f"batch {b['batch']} read {key}, earlier {by_batch[b['batch']]}")
        open("trace-distinct.jsonl", "w").write("".join(
            json.dumps({"batch": n, "topic": k[0], "partition": k[1], "first": k[2], "last": k[3],
                        "samples": k[3] - k[2]}) + "\n" for n, k in sorted(by_batch.items())))
        trained = trained_numbers("trace-distinct.jsonl")
        if len(trained) != N or sorted(trained) != list(range(N)):
            fail(f"cluster: trained {len(trained)} samples, {len(trained) - len(set(trained))} "
                 f"twice, {N - len(set(trained))} never (of {N})")
        print(f"cluster: {N} samples over {PARTITIONS} partitions by 2 loader nodes, each once "
              f"({rec['restarts']} recoveries, {rec['batches_replayed']} batches replayed); "
              f"{rec['samples_per_sec']:.0f} samples/s")
    finally:
        subprocess.run([satrap, "down", *common], capture_output=True)
        subprocess.run(["pkill", "-9", "-f", "--", "--state-dir " + state])
    cleanup()
    sys.exit(0)

# A job against a port where nothing listens: a clear error, at once.
bad = job.replace(brokers, "127.0.0.1:1")
open("bad.yaml", "w").write(bad)
r = subprocess.run([satrap, "train", "--job", "bad.yaml"] + ["--log-level", "warn"],
                   capture_output=True, text=True, timeout=60,
                   env=dict(os.environ, SATRAP_UNUSED="1"))
if r.returncode != 2 or "data.kafka.brokers" not in r.stderr or "timing.kafka_timeout_ms" not in r.stderr:
    fail(f"unreachable broker: status {r.returncode}: {r.stderr[-2000:]}")

# First run: checkpoints every 40 steps, SIGKILLed after its second checkpoint.
first = subprocess.Popen([satrap, "train", "--job", "job.yaml", "--checkpoint-dir", "ckpt",
                          "--checkpoint-every", "40", "--log-level", "info"],
                         stdout=open("first.out", "w"), stderr=open("first.err", "w"))
procs.append(first)
deadline = time.time() + 120
while time.time() < deadline and first.poll() is None:
    if os.path.exists("ckpt/checkpoint-00000002.json"):
        break
    time.sleep(0.01)
if first.poll() is not None:
    fail("the first run ended before it was killed (make N larger): "
         + open("first.err").read()[-2000:])
first.send_signal(signal.SIGKILL)
first.wait()

manifests = sorted(glob.glob("ckpt/checkpoint-*.json"))
meta = json.load(open(manifests[-1]))
step = meta["step"]
total_batches = sum((N // PARTITIONS + BATCH - 1) // BATCH for _ in range(PARTITIONS))
if not 0 < step < total_batches:
    fail(f"checkpoint step {step} is not mid-stream (0 < step < {total_batches})")
positions = {p["partition"]: p["next"] for p in meta["stream_positions"]}
if sorted(positions) != list(range(PARTITIONS)):
    fail(f"stream_positions: {meta['stream_positions']}")
os.rename("trace.jsonl", "trace-first.jsonl")

# Resumed: from the newest complete checkpoint, to the end offsets.
r = subprocess.run([satrap, "train", "--job", "job.yaml", "--resume", "ckpt",
                    "--checkpoint-every", "40", "--json", "--log-level", "info"],
                   capture_output=True, text=True, timeout=300)
open("resumed.out", "w").write(r.stdout)
open("resumed.err", "w").write(r.stderr)
if r.returncode != 0:
    fail("resumed run: " + r.stderr[-3000:])
if f"job_resuming step={step}" not in r.stderr:
    fail(f"the resumed run did not resume at step {step}: " + r.stderr[-3000:])

trained = []
for p, nxt in positions.items():  # the first run's trained prefix, as the checkpoint keeps it
    trained += [o * PARTITIONS + p for o in range(0, nxt)]
made = [json.loads(line) for line in open("trace.jsonl")]
for b in made:
    if b["topic"] != "clicks":
        fail(f"trace: {b}")
    trained += [o * PARTITIONS + b["partition"] for o in range(b["first"], b["last"])]
    if b["samples"] != b["last"] - b["first"]:
        fail(f"a batch lost messages: {b}")
if len(trained) != N or sorted(trained) != list(range(N)):
    dup = len(trained) - len(set(trained))
    missing = N - len(set(trained))
    fail(f"trained {len(trained)} samples, {dup} twice, {missing} never (of {N})")
result = json.loads(r.stdout.strip().splitlines()[-1])
if result["samples"] != N:
    fail(f"the job reports {result['samples']} training samples, not {N}")
first_made = sum(1 for _ in open("trace-first.jsonl"))
print(f"exactly once: {N} samples over {PARTITIONS} partitions; killed after checkpoint step "
      f"{step} ({first_made} batches made by then), resumed {len(made)} batches; none lost, "
      f"none twice")
cleanup()
