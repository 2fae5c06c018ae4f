#!/usr/bin/env python3
"""The cost of binding CAF peers to their certificates (issue 45): the default job on a 3-node
loopback cluster with TLS on, under a reference satrap (the previous main) and under this one,
alternating A, B, B, A, ... in one run; prints samples/s of each round and
ratio=<this / reference> (median of the per-round ratios; goal >= 0.98).

usage: identity_cost.py SATRAP_REFERENCE SATRAP [ROUNDS] [TRAIN_BATCHES]   (ports 5870-5889)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ref, new = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
batches = int(sys.argv[4]) if len(sys.argv) > 4 else 0
work = tempfile.mkdtemp(prefix="satrap-identity-cost-")


def manifest(name, port0):
    path = os.path.join(work, f"m-{name}.yaml")
    with open(path, "w") as f:
        f.write(f"""cluster: identity-cost-{name}
head: {{host: 127.0.0.1, port: {port0}, status_port: {port0 + 9}}}
nodes:
  - name: node-{{i}}
    count: 3
    host: 127.0.0.1
    port: {port0 + 1}
    resources: {{cores: 2, memory: 4GiB, gpus: 0}}
security: {{tls: required}}
""")
    return path


def run_job(satrap, name, port0):
    m = manifest(name, port0)
    state = os.path.join(work, "state-" + name)
    common = ["--manifest", m, "--state-dir", state]
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write("name: identity-cost\n")
        if batches:
            f.write(f"training: {{train_batches: {batches}}}\n")
    try:
        subprocess.run([satrap, "up", *common, "--wait", "60"], cwd=work, check=True,
                       capture_output=True)
        r = subprocess.run([satrap, "submit", job, "--follow", "--json", *common], cwd=work,
                           capture_output=True, text=True, timeout=1800)
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        if rec["state"] != "SUCCEEDED":
            sys.exit(f"identity_cost: job under {satrap}: {rec['state']} {rec.get('message')}")
        return rec["samples_per_sec"]
    finally:
        subprocess.run([satrap, "down", *common], cwd=work, capture_output=True)
        shutil.rmtree(state, ignore_errors=True)


try:
    a, b = [], []
    for i in range(rounds):
        # Alternate which goes first, so a drift of the machine's load favours neither.
        if i % 2 == 0:
            a.append(run_job(ref, "ref", 5870))
            b.append(run_job(new, "new", 5880))
        else:
            b.append(run_job(new, "new", 5880))
            a.append(run_job(ref, "ref", 5870))
        print(f"round {i}: reference {a[-1]:.0f} samples/s, this {b[-1]:.0f} samples/s, "
              f"ratio {b[-1] / a[-1]:.3f}", flush=True)
    ratios = sorted(y / x for x, y in zip(a, b))
    print(f"ratio={ratios[len(ratios) // 2]:.3f} (median this/reference samples/s over {rounds} "
          f"round(s), TLS on in both; range {ratios[0]:.3f}-{ratios[-1]:.3f}; goal >= 0.98)")
finally:
    shutil.rmtree(work, ignore_errors=True)
