#!/usr/bin/env python3
"""Frames bounded per peer, not only per connection (issue 45; README "Security", runtime/frame_limit.hpp).

A holder of the *client* certificate opens many connections to the head of a 1-node TLS cluster
on loopback (security.max_frame_bytes: 64MiB) and on each announces a 60 MiB frame (each under
the per-frame bound), in three ways (security_probe bigframes):
  raw        right after the TLS handshake, before any BASP handshake;
  handshake  after its BASP handshake, sending 4 KiB of the payload and holding the rest;
  delivered  after its BASP handshake, the whole payload (to an actor nobody published), the
             connection then kept open.
CAF 0.17 would allocate every announced frame (and keep a delivered frame's buffer while its
connection lives): 6 connections took the head past 360 MB. Each case must keep the head's RSS
within 160 MB of before it (one frame of the peer's 64 MiB budget in flight, plus slack), the
refusals must show in /metrics (satrap_peer_refused_total{reason=handshake_frame|frame_budget}),
and the head must stay ready.

usage: frame_budget_test.py SATRAP SECURITY_PROBE   (ports 5890-5899)
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

satrap, probe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
base = 5890
work = tempfile.mkdtemp(prefix="satrap-frames-")
state = os.path.join(work, "state")
manifest = os.path.join(work, "manifest.yaml")
certs = os.path.join(state, "certs")
status_url = f"http://127.0.0.1:{base + 9}"
connections, frame_mib, bound_mb = 6, 60, 160


def fail(msg):
    print(f"frame_budget_test: FAIL: {msg}", file=sys.stderr)
    path = os.path.join(state, "head.log")
    if os.path.exists(path):
        with open(path, errors="replace") as fh:
            print("== head.log\n" + "".join(fh.readlines()[-20:]), file=sys.stderr)
    sys.exit(1)


def common():
    return ["--manifest", manifest, "--state-dir", state]


def http(path, timeout=5):
    try:
        with urllib.request.urlopen(status_url + path, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def refused(reason):
    key = f'satrap_peer_refused_total{{reason="{reason}"}}'
    for line in http("/metrics")[1].splitlines():
        if line.startswith(key):
            return float(line.split()[-1])
    return 0.0


def head_pid():
    with open(os.path.join(state, "head.pid")) as f:
        return int(f.readline())


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def attack(mode, pid):
    before = rss_mb(pid)
    p = subprocess.Popen([probe, "bigframes", "127.0.0.1", str(base), certs, str(connections),
                          str(frame_mib), "4", mode], cwd=work, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    peak = before
    while p.poll() is None:
        peak = max(peak, rss_mb(pid))
        time.sleep(0.05)
    out, err = p.communicate(timeout=60)
    peak = max(peak, rss_mb(pid))
    print(out, end="")
    if p.returncode != 0:
        fail(f"{mode}: the probe could not run: {out}{err}")
    growth = peak - before
    print(f"{mode:9s}: head rss {before:.0f} MB -> peak {peak:.0f} MB (+{growth:.0f}, bound "
          f"+{bound_mb}) with {connections} connections x {frame_mib} MiB")
    if growth > bound_mb:
        fail(f"{mode}: the head grew by {growth:.0f} MB (> {bound_mb}) from one peer's frames")
    return out


def main():
    os.makedirs(state)
    with open(manifest, "w") as f:
        f.write(f"""cluster: frames-{os.getpid()}
head: {{host: 127.0.0.1, port: {base}, status_port: {base + 9}}}
nodes:
  - name: node-0
    host: 127.0.0.1
    port: {base + 1}
    resources: {{cores: 1, memory: 2GiB, gpus: 0}}
security: {{max_frame_bytes: 64MiB}}
""")
    r = subprocess.run([satrap, "up", *common(), "--wait", "60"], cwd=work, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        fail(f"satrap up: {r.stdout}{r.stderr}")
    if http("/readyz")[0] != 200:
        fail("not ready before the attack")
    pid = head_pid()
    attack("raw", pid)
    if refused("handshake_frame") < connections:
        fail("frames before the BASP handshake were not refused "
             "(satrap_peer_refused_total{reason=\"handshake_frame\"})")
    out = attack("handshake", pid)
    if refused("frame_budget") < connections - 1:
        fail("one peer's frames past its budget were not refused "
             "(satrap_peer_refused_total{reason=\"frame_budget\"})")
    if f"closed={connections - 1}" not in out and f"closed={connections}" not in out:
        fail(f"the connections past the peer's budget were not closed: {out}")
    attack("delivered", pid)
    time.sleep(1)
    if http("/readyz")[0] != 200 or http("/healthz")[0] != 200:
        fail("the head is not ready after the frames")
    print("frame_budget_test: PASS")


try:
    main()
finally:
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True, timeout=60)
    shutil.rmtree(work, ignore_errors=True)
