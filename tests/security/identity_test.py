#!/usr/bin/env python3
"""One of issue 45's identity attacks on a real 2-node TLS cluster on loopback (README "Security").

A holder of the *client* certificate, speaking BASP by hand (security_probe basp: OpenSSL plus
CAF's serializer), claims node ids that are not its own:
  claim_head       a handshake to node-0 claiming the head's node id: must be refused (closed);
  claim_own        a handshake to the head claiming the head's own id: must be refused;
  claim_node       a handshake to the head claiming node-0's id: must be refused;
  forged_down      a down message of node-0's agent to the head, claiming node-0: the head must
                   not lose node-0;
  routed_kill      exit(kill) to the admin claiming the admin itself as sender: the admin must
                   live (/status and /readyz 200);
  forged_heartbeat a heartbeat for node-0 with a fake role, claiming node-0's agent as sender:
                   /status must not show the role.
Each must also move satrap_peer_refused_total in the head's /metrics (claims to a node: the
node's refusal is seen by the probe), and the cluster must stay ready.

usage: identity_test.py SATRAP SECURITY_PROBE ATTACK   (ports 5860-5869)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

satrap, probe, attack = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3]
base = 5860
work = tempfile.mkdtemp(prefix="satrap-identity-")
state = os.path.join(work, "state")
manifest = os.path.join(work, "manifest.yaml")
certs = os.path.join(state, "certs")
status_url = f"http://127.0.0.1:{base + 9}"


def fail(msg):
    print(f"identity_test {attack}: FAIL: {msg}", file=sys.stderr)
    for f in sorted(os.listdir(state)) if os.path.isdir(state) else []:
        if f.endswith(".log"):
            print(f"== {f}", file=sys.stderr)
            with open(os.path.join(state, f), errors="replace") as fh:
                print("".join(fh.readlines()[-15:]), file=sys.stderr)
    sys.exit(1)


def common():
    return ["--manifest", manifest, "--state-dir", state]


def http(path, timeout=5):
    try:
        with urllib.request.urlopen(status_url + path, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def refused_total():
    total = 0.0
    for line in http("/metrics")[1].splitlines():
        if line.startswith("satrap_peer_refused_total{"):
            total += float(line.split()[-1])
    return total


def head_log():
    path = os.path.join(state, "head.log")
    return open(path, errors="replace").read() if os.path.exists(path) else ""


def main():
    os.makedirs(state)
    with open(manifest, "w") as f:
        f.write(f"""cluster: ident-{os.getpid()}
head: {{host: 127.0.0.1, port: {base}, status_port: {base + 9}}}
nodes:
  - name: node-{{i}}
    count: 2
    host: 127.0.0.1
    port: {base + 1}
    resources: {{cores: 1, memory: 2GiB, gpus: 0}}
""")
    r = subprocess.run([satrap, "up", *common(), "--wait", "60"], cwd=work, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        fail(f"satrap up: {r.stdout}{r.stderr}")
    if http("/readyz")[0] != 200:
        fail("not ready before the attack")
    before = refused_total()
    p = subprocess.Popen([probe, "basp", manifest, certs, attack], cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Meanwhile /status, ten times a second: a forged heartbeat's role shows there until the
    # node's next real heartbeat replaces it.
    forged_seen = False
    while p.poll() is None:
        code, status = http("/status")
        forged_seen = forged_seen or "forged_role" in status
        time.sleep(0.1)
    out, err = p.communicate(timeout=60)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    print(r.stdout, end="")
    if r.returncode == 2:
        fail(f"the probe could not run: {r.stdout}{r.stderr}")
    if r.returncode != 0:
        fail(f"the claim was accepted: {r.stdout}{r.stderr}")
    time.sleep(2)  # a heartbeat interval: the forged effects would show by now
    code, status = http("/status")
    if code != 200 or http("/readyz")[0] != 200 or http("/healthz")[0] != 200:
        fail(f"the head is not ready after the attack (/status {code})")
    if attack == "forged_down" and "node_lost name=node-0" in head_log():
        fail("the head lost node-0 to a forged down message")
    if attack == "forged_heartbeat" and (forged_seen or "forged_role" in status):
        fail("a forged heartbeat put a fake role on node-0 in /status")
    if attack != "claim_head":  # the head's own counter (claim_head is refused by node-0)
        after = refused_total()
        print(f"satrap_peer_refused_total: {before:.0f} -> {after:.0f}")
        if after <= before:
            fail("/metrics does not count the refusal (satrap_peer_refused_total)")
    print(f"identity_test {attack}: PASS")


try:
    main()
finally:
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True, timeout=60)
    shutil.rmtree(work, ignore_errors=True)
