#!/usr/bin/env python3
"""A model split over a fleet (issue 49; label `serving`): a synthetic model exported in 3 shards,
three partition servers (`satrap serve --shards K`) and a router (`satrap route`) in front, on
loopback ports 5320-5324, against one server holding the whole model (`satrap serve`):
  - every score the router gives equals the single server's for the same request, bit for bit,
    and `satrap predict`'s within 1e-6, in requests of 1, 64 and 7 instances;
  - a router whose servers leave partitions unheld refuses to start, naming them (exit 2);
  - a stopped partition server: the router answers 503 naming it;
  - latency, sequential requests of 1 and 64 instances through the router and to the single
    server (p50 / p99 ms; printed, not asserted: this machine is shared).
Processes are cleaned up on exit.

usage: fleet_test.py SATRAP WORKDIR"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SATRAP, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
ROUTER, SERVERS, SINGLE = 5320, [5321, 5322, 5323], 5324
procs = []


def cleanup(*_):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


signal.signal(signal.SIGTERM, lambda *a: (cleanup(), sys.exit(1)))


def run(*args, check=True):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit("FAILED: satrap %s\n%s%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def start(port, *args):
    log = open(os.path.join(WORK, "p%d.log" % port), "w")
    p = subprocess.Popen([SATRAP, *args, "--port", str(port), "--log-level", "warn"], stdout=log,
                         stderr=subprocess.STDOUT)
    procs.append(p)
    for _ in range(400):
        assert p.poll() is None, "%s exited: %s" % (args[0], open(log.name).read())
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("%s on %d did not become ready" % (args[0], port))


def post(conn, instances):
    conn.request("POST", "/v1/models/fleet:predict", json.dumps({"instances": instances}))
    r = conn.getresponse()
    return r.status, json.loads(r.read())


def latency(port, inst, size, n=200):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    times = []
    for k in range(n):
        a = (k * size) % (len(inst) - size)
        t = time.perf_counter()
        st, _ = post(c, inst[a:a + size])
        times.append((time.perf_counter() - t) * 1000)
        assert st == 200
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99) - 1]


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    job = os.path.join(WORK, "fleet.yaml")
    with open(job, "w") as f:
        f.write("name: fleet\ndata: {synthetic: {slots: 8, vocab: 50000}}\n"
                "training: {batch_size: 128, train_batches: 80, test_batches: 8, staleness: 1}\n"
                "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2, partitions: 64}\n")
    model = os.path.join(WORK, "model")
    run("train", "--job", job, "--export", model, "--export-shards", "3")
    inst_path, scores_path = os.path.join(WORK, "inst.jsonl"), os.path.join(WORK, "p.tsv")
    run("predict", "--model", model, "--instances", inst_path, "--out", scores_path)
    inst = [json.loads(l) for l in open(inst_path)]
    want = [float(l.split("\t")[-1]) for l in open(scores_path) if l.strip()]
    for k, port in enumerate(SERVERS):
        start(port, "serve", "--model", model, "--shards", str(k), "--threads", "1")
    # Two of three servers: partitions unheld, the router refuses to start.
    r = subprocess.run([SATRAP, "route", "--model", model, "--port", str(ROUTER), "--servers",
                        "127.0.0.1:%d,127.0.0.1:%d" % (SERVERS[0], SERVERS[2])],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "held by no server" in r.stderr, r.stderr
    start(ROUTER, "route", "--model", model,
          "--servers", ",".join("127.0.0.1:%d" % p for p in SERVERS))
    start(SINGLE, "serve", "--model", model, "--threads", "1")
    rc = http.client.HTTPConnection("127.0.0.1", ROUTER, timeout=10)
    sc = http.client.HTTPConnection("127.0.0.1", SINGLE, timeout=10)
    i, sizes, worst, n = 0, [1, 64, 7], 0.0, 0
    while i < len(inst):
        chunk = inst[i:i + sizes[n % 3]]
        st, r = post(rc, chunk)
        assert st == 200, (st, r)
        st2, s = post(sc, chunk)
        assert st2 == 200, (st2, s)
        assert r["predictions"] == s["predictions"] and r["logits"] == s["logits"], (i, r, s)
        assert r["version"] == s["version"]
        worst = max([worst] + [abs(a - b) for a, b in zip(r["predictions"], want[i:i + len(chunk)])])
        i += len(chunk)
        n += 1
    assert worst <= 1e-6, worst
    print("fleet: %d instances in %d requests through the router: equal to one server's bit for "
          "bit, max |diff| to predict %.2g" % (len(inst), n, worst))
    for size in (1, 64):
        rp = latency(ROUTER, inst, size)
        sp = latency(SINGLE, inst, size)
        print("latency, %d instance(s) per request, sequential: router p50 %.2f ms p99 %.2f ms; "
              "one server p50 %.2f ms p99 %.2f ms" % (size, rp[0], rp[1], sp[0], sp[1]))
    # A partition server stops: the requests that need it get a 503 naming it.
    procs[1].send_signal(signal.SIGTERM)
    procs[1].wait(timeout=10)
    st, r = post(http.client.HTTPConnection("127.0.0.1", ROUTER, timeout=10), inst[:64])
    assert st == 503 and "127.0.0.1:%d" % SERVERS[1] in r["error"], (st, r)
    print("a stopped partition server: 503, %s" % r["error"][:120])


try:
    main()
    print("fleet_test: PASS")
finally:
    cleanup()
