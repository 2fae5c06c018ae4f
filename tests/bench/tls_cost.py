#!/usr/bin/env python3
"""The cost of mutual TLS: the default job on a 3-node loopback cluster, with TLS and without,
alternating in one run; prints samples/s of each and ratio=<TLS / plaintext> (goal >= 0.9).

usage: tls_cost.py SATRAP [ROUNDS]   (ports 5270-5289)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

satrap = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
work = tempfile.mkdtemp(prefix="satrap-tls-cost-")


def manifest(tls, port0):
    path = os.path.join(work, f"m-{tls}.yaml")
    with open(path, "w") as f:
        f.write(f"""cluster: tls-cost-{tls}
head: {{host: 127.0.0.1, port: {port0}, status_port: {port0 + 9}}}
nodes:
  - name: node-{{i}}
    count: 3
    host: 127.0.0.1
    port: {port0 + 1}
    resources: {{cores: 2, memory: 4GiB, gpus: 0}}
security: {{tls: {tls}}}
""")
    return path


def run_job(tls, port0):
    m = manifest(tls, port0)
    state = os.path.join(work, "state-" + tls)
    common = ["--manifest", m, "--state-dir", state]
    job = os.path.join(work, "job.yaml")
    with open(job, "w") as f:
        f.write("name: tls-cost\n")
    try:
        subprocess.run([satrap, "up", *common, "--wait", "60"], cwd=work, check=True,
                       capture_output=True)
        r = subprocess.run([satrap, "submit", job, "--follow", "--json", *common], cwd=work,
                           capture_output=True, text=True, timeout=1800)
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        if rec["state"] != "SUCCEEDED":
            sys.exit(f"tls_cost: job with tls={tls}: {rec['state']} {rec.get('message')}")
        return rec["samples_per_sec"]
    finally:
        subprocess.run([satrap, "down", *common], cwd=work, capture_output=True)


try:
    tls, plain = [], []
    for i in range(rounds):
        plain.append(run_job("off", 5270))
        tls.append(run_job("required", 5280))
        print(f"round {i}: plaintext {plain[-1]:.0f} samples/s, tls {tls[-1]:.0f} samples/s",
              flush=True)
    ratio = sorted(t / p for t, p in zip(tls, plain))[len(tls) // 2]
    print(f"ratio={ratio:.3f} (median TLS/plaintext samples/s over {rounds} round(s); goal >= 0.9)")
finally:
    shutil.rmtree(work, ignore_errors=True)
