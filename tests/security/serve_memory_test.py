#!/usr/bin/env python3
"""`satrap serve` under the worst bodies its 8 MiB cap admits (issue 45; README "Security").

A small model is trained and exported, served with the defaults (8 MiB body cap), and warmed
with good requests; its RSS then is "idle". Then 24 clients at once send the worst bodies under
the cap (8 of each), each retrying after Retry-After (with jitter) until it is answered:
  nested   8 MiB of '[' (a depth bomb) in "instances";
  v1_ids   a /v1 request of full bags (65,536 ids each, "1,1,1,..."): 8 MiB, 4 M ids;
  v2_ids   a /v2 infer request whose ids tensor holds 8 MiB of ids (4 M), its datatype first and
           its shape (more instances than a request may have) last.
Every answer must be 200 (v1_ids is a valid request), 400, or 503 with Retry-After (the server's
in-flight body budget taken), the server's RSS must stay under idle + 100 MB throughout (sampled
every 20 ms), and a good request must be answered 200 afterwards.
Before that, a request of 12 instances of 49,152 ids each (scored in 3 slices of whole instances,
serving/model_server_batching.cpp) must give each instance's logit as scored alone.

usage: serve_memory_test.py SATRAP WORKDIR   (loopback port 5730)
"""
import http.client
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

SATRAP, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PORT = 5730
CONCURRENCY, ROUNDS, BOUND_MB = 24, 1, 100
procs = []


def fail(msg):
    print(f"serve_memory_test: FAIL: {msg}", file=sys.stderr)
    log = os.path.join(WORK, "serve.log")
    if os.path.exists(log):
        print("== serve.log\n" + "".join(open(log, errors="replace").readlines()[-20:]),
              file=sys.stderr)
    sys.exit(1)


def run(*args):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"satrap {' '.join(args[:2])}: {r.stdout}{r.stderr}")
    return r


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def post(path, body, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=timeout)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read(), r.getheader("Retry-After")
    finally:
        c.close()


def bodies(limit):
    n = (limit - 200) // 2
    ids = b",".join([b"1"] * n)
    nested = b'{"instances":' + b"[" * (limit - 100)
    # Full bags (65,536 ids, the most a bag takes) in as many instances as fit.
    bag = b"[" + b",".join([b"1"] * 65536) + b"]"
    inst = b'{"dense":[0,0,0,0],"slots":[' + b",".join([bag] * 6) + b"]}"
    v1 = b'{"instances":[' + b",".join([inst] * ((limit - 100) // (len(inst) + 1))) + b"]}"
    # The datatype first (values stored typed as they come), the shape last.
    v2 = (b'{"inputs":[{"name":"ids","datatype":"INT64","data":[' + ids
          + b'],"shape":[' + str(n // 6).encode() + b',6]},{"name":"dense","shape":[1,4],'
          b'"datatype":"FP32","data":[0,0,0,0]}]}')
    for name, b in [("nested", nested), ("v1_ids", v1), ("v2_ids", v2)]:
        assert len(b) <= limit, (name, len(b))
    return [("nested", "/v1/models/kv:predict", nested), ("v1_ids", "/v1/models/kv:predict", v1),
            ("v2_ids", "/v2/models/kv/infer", v2)]


def check_sliced():
    insts = [{"dense": [i / 10, 0, 1, 2],
              "slots": [list(range(1000 * i + s, 1000 * i + s + 8192)) for s in range(6)]}
             for i in range(12)]
    st, data, _ = post("/v1/models/kv:predict", json.dumps({"instances": insts}).encode())
    if st != 200:
        fail(f"12 instances of 49,152 ids: {st} {data[:200]!r}")
    together = json.loads(data)["logits"]
    for i, inst in enumerate(insts):
        st, data, _ = post("/v1/models/kv:predict", json.dumps({"instances": [inst]}).encode())
        alone = json.loads(data)["logits"][0]
        if abs(alone - together[i]) > 1e-4 * max(1.0, abs(alone)):
            fail(f"instance {i}: logit {together[i]} in a sliced request, {alone} alone")
    print("sliced scoring: 12 instances x 49,152 ids (3 slices) agree with each scored alone")


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    model = os.path.join(WORK, "model")
    run("train", "--name", "kv", "--slots", "6", "--dense-features", "4", "--vocab", "20000",
        "--train-batches", "20", "--test-batches", "1", "--batch-size", "128", "--export", model)
    log = open(os.path.join(WORK, "serve.log"), "w")
    p = subprocess.Popen([SATRAP, "serve", "--model", model, "--port", str(PORT), "--threads", "2"],
                         stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    good = json.dumps({"instances": [{"dense": [0.5, 0, 1, 2], "slots": [[1], [2], [3], [4], [5],
                                                                          [6]]}]}).encode()
    deadline = time.time() + 30
    while True:
        if p.poll() is not None:
            fail("serve exited")
        try:
            if post("/v1/models/kv:predict", good, timeout=2)[0] == 200:
                break
        except OSError:
            pass
        if time.time() > deadline:
            fail("serve did not answer")
        time.sleep(0.2)
    for _ in range(20):
        post("/v1/models/kv:predict", good)
    check_sliced()
    time.sleep(0.5)
    idle = rss_mb(p.pid)
    cases = bodies(8 << 20)
    statuses, errors = {}, []
    lock = threading.Lock()

    rng = random.Random(45)
    delays = [[1 + 2 * rng.random() for _ in range(100)] for _ in range(CONCURRENCY)]

    def client(i):
        for r in range(ROUNDS):
            name, path, body = cases[(i + r) % len(cases)]
            for attempt in range(100):
                try:
                    st, data, retry = post(path, body)
                except OSError as e:
                    with lock:
                        errors.append(f"{name}: {e}")
                    break
                with lock:
                    statuses[(name, st)] = statuses.get((name, st), 0) + 1
                    if (st == 200 and name != "v1_ids") or (st == 503 and not retry) \
                            or st not in (200, 400, 503):
                        errors.append(f"{name}: {st} retry-after={retry} {data[:200]!r}")
                if st != 503:
                    break
                time.sleep(float(retry) * delays[i][attempt])
            else:
                with lock:
                    errors.append(f"{name}: still 503 after 100 tries")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CONCURRENCY)]
    peak = idle
    start = time.time()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mb(p.pid))
        time.sleep(0.02)
    peak = max(peak, rss_mb(p.pid))
    for t in threads:
        t.join()
    print("answers:", ", ".join(f"{n} {s}: {c}" for (n, s), c in sorted(statuses.items())))
    print(f"serve rss: idle {idle:.0f} MB, peak {peak:.0f} MB (+{peak - idle:.0f}, bound "
          f"+{BOUND_MB}) under {CONCURRENCY} clients x {ROUNDS} worst 8 MiB bodies, "
          f"{time.time() - start:.1f} s")
    answered = {n for (n, st) in statuses if st != 503}
    if answered != {c[0] for c in cases}:
        fail(f"not every worst body was answered (only {sorted(answered)})")
    if errors:
        fail(f"{len(errors)} unexpected answers, e.g. {errors[:3]}")
    if p.poll() is not None:
        fail("serve died")
    if peak - idle > BOUND_MB:
        fail(f"serve grew by {peak - idle:.0f} MB (> {BOUND_MB}) under the worst bodies")
    st, data, _ = post("/v1/models/kv:predict", good)
    if st != 200:
        fail(f"a good request after the attack: {st} {data[:200]!r}")
    print("serve_memory_test: PASS")


try:
    main()
finally:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
    shutil.rmtree(WORK, ignore_errors=True)
