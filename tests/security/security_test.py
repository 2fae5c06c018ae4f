#!/usr/bin/env python3
"""The security probes of README "Security", on a real 2-node TLS cluster on loopback.

An outsider with nothing but the head's address, then one with a valid client certificate (but
no node certificate, node token or admin token), tries what the issue lists: handshakes without a
certificate or with another CA's, every forged or unauthorised message, garbage and 4 GiB frames
on every port, 200 HTTP clients plus 20 slow-loris connections, and `satrap down` with a hostile
cluster name or a stale pid file. Every probe must be refused or harmless: the processes stay up,
grow by less than 64 MB, /metrics counts the refusals, and a job then runs to SUCCEEDED.

usage: security_test.py SATRAP SECURITY_PROBE   (ports 5200-5299)
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

satrap, probe = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
base = 5200
work = tempfile.mkdtemp(prefix="satrap-security-")
state = os.path.join(work, "state")
manifest = os.path.join(work, "manifest.yaml")
certs = os.path.join(state, "certs")
status_url = f"http://127.0.0.1:{base + 9}"
started = []


def fail(msg):
    print(f"security_test: FAIL: {msg}", file=sys.stderr)
    for f in sorted(os.listdir(state)) if os.path.isdir(state) else []:
        if f.endswith(".log"):
            print(f"== {f}", file=sys.stderr)
            with open(os.path.join(state, f), errors="replace") as fh:
                print("".join(fh.readlines()[-25:]), file=sys.stderr)
    sys.exit(1)


def run(*args, check=True, timeout=120, **kw):
    r = subprocess.run(list(args), cwd=work, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        fail(f"{' '.join(args[:3])}...: exit {r.returncode}: {r.stdout}{r.stderr}")
    return r


def common():
    return ["--manifest", manifest, "--state-dir", state]


def http(path, timeout=5):
    with urllib.request.urlopen(status_url + path, timeout=timeout) as r:
        return r.read().decode()


def pids():
    out = {}
    for f in os.listdir(state):
        if f.endswith(".pid"):
            with open(os.path.join(state, f)) as fh:
                out[f[:-4]] = int(fh.readline())
    return out


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def cleanup():
    subprocess.run([satrap, "down", *common()], cwd=work, capture_output=True, timeout=60)
    for p in started:
        try:
            p.kill()
        except OSError:
            pass
    shutil.rmtree(work, ignore_errors=True)


def write_manifest(path, cluster, port0, extra=""):
    with open(path, "w") as f:
        f.write(f"""cluster: {cluster}
head: {{host: 127.0.0.1, port: {port0}, status_port: {port0 + 9}}}
nodes:
  - name: node-{{i}}
    count: 2
    host: 127.0.0.1
    port: {port0 + 1}
    resources: {{cores: 2, memory: 4GiB, gpus: 0}}
{extra}""")


def run_job(name, batches=40):
    job = os.path.join(work, name + ".yaml")
    with open(job, "w") as f:
        f.write(f"name: {name}\ntraining: {{train_batches: {batches}}}\n")
    r = run(satrap, "submit", job, "--follow", "--json", *common(), check=False, timeout=300)
    if r.returncode != 0:
        fail(f"job {name} did not succeed: {r.stdout}{r.stderr}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    if rec["state"] != "SUCCEEDED":
        fail(f"job {name}: {rec['state']} {rec.get('message')}")
    return rec


def check_handshakes():
    # Credentials that must not admit a peer: none, another CA of the same cluster name, and
    # another cluster's CA.
    other_same = os.path.join(work, "other-ca")
    run(satrap, "certs", "--manifest", manifest, "--out", other_same)
    other_manifest = os.path.join(work, "other.yaml")
    write_manifest(other_manifest, "other-cluster", base + 50)
    other_cluster = os.path.join(work, "other-cluster-certs")
    run(satrap, "certs", "--manifest", other_manifest, "--out", other_cluster)
    ports = {"head": base, "node-0": base + 1}
    cases = {
        "plaintext CAF, no TLS": [],
        "TLS without a certificate": [f"{certs}/ca.pem", "", ""],
        "another CA (same cluster name)": [f"{certs}/ca.pem", f"{other_same}/client.pem",
                                           f"{other_same}/client.key"],
        "another cluster's CA": [f"{certs}/ca.pem", f"{other_cluster}/client.pem",
                                 f"{other_cluster}/client.key"],
    }
    for who, port in ports.items():
        for what, args in cases.items():
            r = run(probe, "handshake", "127.0.0.1", str(port), *args, check=False, timeout=60)
            if r.returncode != 1 or "refused" not in r.stdout:
                fail(f"{who}: {what}: not refused: {r.stdout}{r.stderr}")
            print(f"handshake {who:7s} {what:32s} refused")
        # The positive control: the cluster's client certificate is admitted.
        r = run(probe, "handshake", "127.0.0.1", str(port), f"{certs}/ca.pem",
                f"{certs}/client.pem", f"{certs}/client.key", check=False, timeout=60)
        if r.returncode != 0:
            fail(f"{who}: the cluster's client certificate was not admitted: {r.stdout}{r.stderr}")
    # openssl s_client without a certificate gets an alert, not data.
    # (TLS 1.3: the server's verdict on the client arrives after the handshake, as an alert on
    # the first read, so keep stdin open for a moment.)
    r = subprocess.run(["sh", "-c", f"sleep 2 | openssl s_client -connect 127.0.0.1:{base} "
                        f"-CAfile {certs}/ca.pem"], capture_output=True, text=True, timeout=30)
    if "alert" not in (r.stdout + r.stderr).lower():
        fail(f"openssl s_client without a certificate: no TLS alert: {r.stdout[-400:]}{r.stderr[-400:]}")
    print("openssl s_client without a certificate: TLS alert")


def metric(text, name):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.split()[-1])
    return total


def check_attack():
    r = run(probe, "attack", manifest, certs, check=False, timeout=120)
    print(r.stdout, end="")
    if r.returncode != 0:
        fail(f"an unauthorised request was accepted: {r.stdout}{r.stderr}")
    time.sleep(1)
    metrics = http("/metrics")
    for req in ["register", "nodes", "list", "get", "submit", "cancel", "checkpoint",
                "heartbeat", "progress", "tick"]:
        if metric(metrics, f'satrap_requests_refused_total{{request="{req}"}}') < 1:
            fail(f"/metrics does not count the refused {req}: {metrics}")
    if metric(metrics, "satrap_remote_exits_dropped_total") < 2:
        fail(f"/metrics does not count the dropped exits: {metrics}")
    ready = urllib.request.urlopen(status_url + "/readyz", timeout=5).status
    if ready != 200:
        fail("not ready after the attack")
    # The bare ticks started no timer chains: the head is idle again.
    head = pids()["head"]
    t0 = sum(int(x) for x in open(f"/proc/{head}/stat").read().rsplit(")", 1)[1].split()[11:13])
    time.sleep(2)
    t1 = sum(int(x) for x in open(f"/proc/{head}/stat").read().rsplit(")", 1)[1].split()[11:13])
    cpu = (t1 - t0) / os.sysconf("SC_CLK_TCK") / 2
    print(f"head cpu after the attack: {cpu:.2f} cores")
    if cpu > 0.3:
        fail(f"the head keeps busy after the attack ({cpu:.2f} cores)")


def check_frames():
    before = {n: rss_mb(p) for n, p in pids().items()}
    ports = {"head": base, "node-0": base + 1, "node-1": base + 2}
    for who, port in ports.items():
        # Raw garbage (not TLS) and a 4 GiB BASP header inside TLS with a client certificate.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(bytes(range(256)) * 16 + b"\xff\xff\xff\xff" * 8)
            time.sleep(0.2)
        r = run(probe, "frames", "127.0.0.1", str(port), certs, check=False, timeout=60)
        if r.returncode != 0:
            fail(f"frames to {who}: {r.stdout}{r.stderr}")
    time.sleep(1)
    for n, p in pids().items():
        try:
            os.kill(p, 0)
        except OSError:
            fail(f"{n} died from the frames")
        grew = rss_mb(p) - before[n]
        print(f"{n}: rss {before[n]:.0f} -> {rss_mb(p):.0f} MB after garbage and 4 GiB frames")
        if grew > 64:
            fail(f"{n} grew by {grew:.0f} MB")
    if metric(http("/metrics"), "satrap_frames_refused_total") < 1:
        fail("the head did not count the refused frames")


def check_http():
    stop = time.monotonic() + 30
    worst = [0.0]
    errors = []
    slow_socks = []

    def slow_loris(i):
        try:
            s = socket.create_connection(("127.0.0.1", base + 9), timeout=10)
            slow_socks.append(s)
            s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n")
            while time.monotonic() < stop:
                s.sendall(b"X")
                time.sleep(1.5)
        except OSError:
            pass  # the server may close it: fine

    def client(i):
        while time.monotonic() < stop:
            try:
                http("/status", timeout=10)
            except Exception as e:  # noqa: BLE001
                errors.append(str(e))
            time.sleep(0.05)

    def poll():
        while time.monotonic() < stop:
            t = time.monotonic()
            try:
                http("/status", timeout=10)
            except Exception as e:  # noqa: BLE001
                errors.append("poll: " + str(e))
            worst[0] = max(worst[0], time.monotonic() - t)
            time.sleep(0.25)

    threads = [threading.Thread(target=slow_loris, args=(i,)) for i in range(20)]
    threads += [threading.Thread(target=client, args=(i,)) for i in range(200)]
    threads.append(threading.Thread(target=poll))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in slow_socks:
        s.close()
    print(f"http: 200 clients + 20 slow-loris for 30 s: worst /status poll {worst[0]:.3f} s, "
          f"{len(errors)} client errors")
    if worst[0] >= 1.0:
        fail(f"/status took {worst[0]:.2f} s under load")
    if [e for e in errors if e.startswith("poll")]:
        fail(f"/status failed under load: {errors[:3]}")


def check_slow_clients():
    # Issue 45: 530 connections from one address (127.0.0.2) trickling one header byte every 3 s
    # (each read within the read timeout); /status and /healthz from another address must
    # answer within 1 s throughout, and the server must close the trickling connections (the
    # whole-request deadline and the per-address cap).
    import selectors
    socks = []
    for i in range(530):
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.2", 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", base + 9))
            s.sendall(b"GET /status HTTP/1.1\r\n")
            s.setblocking(False)
            socks.append(s)
        except OSError:
            pass
    stop = time.monotonic() + 24
    worst = 0.0
    errors = []
    closed = 0
    next_trickle = time.monotonic()
    while time.monotonic() < stop:
        if time.monotonic() >= next_trickle:
            for s in list(socks):
                try:
                    s.send(b"X")
                except OSError:
                    socks.remove(s)
                    s.close()
                    closed += 1
            next_trickle = time.monotonic() + 3
        for path in ("/status", "/healthz"):
            t = time.monotonic()
            try:
                http(path, timeout=10)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{path}: {e}")
            worst = max(worst, time.monotonic() - t)
        time.sleep(0.25)
    for s in socks:
        s.close()
    print(f"http: 530 trickling connections for 24 s: worst /status or /healthz {worst:.3f} s, "
          f"{closed} trickling connections closed by the server")
    if errors:
        fail(f"/status or /healthz failed under trickling connections: {errors[:3]}")
    if worst >= 1.0:
        fail(f"/status or /healthz took {worst:.2f} s under trickling connections")
    if closed < 500:
        fail(f"the server kept {530 - closed} trickling connections past the request deadline")
    m = http("/metrics")
    if metric(m, 'satrap_http_refused_total{reason="request_deadline"}') < 1:
        fail("/metrics does not count the connections past the request deadline")


def check_down():
    hostile = os.path.join(work, "hostile.yaml")
    write_manifest(hostile, "../../victim", base + 60)
    r = run(satrap, "down", "--manifest", hostile, check=False)
    if r.returncode == 0 or "no path separators" not in r.stderr:
        fail(f"a hostile cluster name was accepted: {r.stdout}{r.stderr}")
    # A stale pid file (old format) and a forged record: nothing is signalled.
    victim = subprocess.Popen(["sleep", "60"])
    started.append(victim)
    stale = os.path.join(work, "stale-state")
    os.makedirs(stale)
    with open(os.path.join(stale, "head.pid"), "w") as f:
        f.write(f"{victim.pid}\n")
    with open(os.path.join(stale, "node-node-0.pid"), "w") as f:
        f.write(f"{victim.pid}\n12345\n{b'sleep'.hex()}00\n")
    run(satrap, "down", "--manifest", manifest, "--state-dir", stale)
    time.sleep(0.3)
    if victim.poll() is not None:
        fail("satrap down signalled a process it did not start")
    victim.kill()
    print("satrap down: hostile name refused; stale pid files signalled nothing")


def main():
    # The state folder is made by `satrap up` (so it is the owner's only, checked at the end).
    write_manifest(manifest, f"sec-{os.getpid()}", base)
    check_down()
    run(satrap, "up", *common(), "--wait", "60", timeout=120)
    for f in ["ca.key", "head.key", "client.key", "node-node-0.key", "node-node-0.token"]:
        mode = os.stat(os.path.join(certs, f)).st_mode & 0o777
        if mode != 0o600:
            fail(f"{f} has mode {oct(mode)}")
    check_handshakes()
    check_attack()
    check_frames()
    check_http()
    check_slow_clients()
    rec = run_job("after-probes")
    print(f"job after the probes: {rec['state']}, {rec['samples']} samples")
    # Job specs and tokens are the owner's only.
    for path, want in [(state, 0o700), (os.path.join(state, "jobs.json"), 0o600),
                       (os.path.join(state, "admin.token"), 0o600)]:
        mode = os.stat(path).st_mode & 0o777
        if mode != want:
            fail(f"{path} has mode {oct(mode)}, expected {oct(want)}")
    # The nodes' processes do not hold the admin token (neither as a flag nor in their env), nor
    # do the nodes' files in the state dir (their logs, pid records, certificates and tokens).
    token = open(os.path.join(state, "admin.token")).read().strip()
    nodes_seen = 0
    for name, pid in pids().items():
        if name.startswith("node-"):
            nodes_seen += 1
            env = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
            if token in env or token in cmd or "admin.token" in cmd:
                fail(f"{name} holds the admin token")
    files_seen = 0
    for folder in (state, certs):
        for f in os.listdir(folder):
            if f.startswith("node-"):
                files_seen += 1
                if token in open(os.path.join(folder, f), errors="replace").read():
                    fail(f"{folder}/{f}, a node's file, holds the admin token")
    if nodes_seen < 2 or files_seen < 4:
        fail(f"expected 2 node processes and their files, saw {nodes_seen} and {files_seen}")
    print("security_test: PASS")


try:
    main()
finally:
    cleanup()
