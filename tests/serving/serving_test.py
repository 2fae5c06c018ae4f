#!/usr/bin/env python3
"""Serving tests (label `serving`): export -> predict parity, export -> serve parity with bad
requests, hot reload under load. Real processes on loopback (ports 5300-5399), cleaned up on exit.

  named: a job with named features of every kind (a string id, an integer id, a weighted bag and
  a bag sharing its table, a mean-pooled sequence sharing the item table, a dense number) and two
  labels, from JSON lines: train --export, predict (per task, the same scores as the training
  run's), and serve with the data's own JSON objects as instances (the same scores as predict,
  per label), with bad instances refused naming the instance and the feature; and a libsvm job
  with data.value_weights, served with "weights" beside "slots" (predict --instances writes them).

  online: satrap train --export-dir exports the model at each checkpoint while satrap serve
  --watch answers from concurrent clients: no failed request once a model is up, the served
  version moves forward through several steps, the newest --export-keep exports kept.

usage: serving_test.py SATRAP WORKDIR SCENARIO
  SCENARIO: predict_parity | serve | hot_reload | named | online
"""
import http.client
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

SATRAP, WORK, SCENARIO = sys.argv[1], sys.argv[2], sys.argv[3]
PORTS = {"serve": 5301, "hot_reload": 5302, "named": 5303, "online": 5304}
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
        sys.exit("FAILED: satrap %s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def read_scores(path):
    return [float(l.split("\t")[-1]) for l in open(path) if l.strip()]


def check_parity(train_scores, predict_scores, train_auc, predict_auc, what):
    assert len(train_scores) == len(predict_scores), (what, len(train_scores), len(predict_scores))
    worst = max(abs(a - b) for a, b in zip(train_scores, predict_scores))
    assert worst <= 1e-6, "%s: a score differs by %g (> 1e-6)" % (what, worst)
    assert abs(train_auc - predict_auc) <= 1e-9, "%s: auc %r != %r" % (what, train_auc, predict_auc)
    print("%s: %d rows, auc %.6f both, max |score diff| %.2g" % (what, len(train_scores), train_auc, worst))


def criteo_model(work, name="criteo-serve", extra=()):
    """Trains a small Criteo-format job with --export; returns (model dir, train json, scores)."""
    data = os.path.join(work, "data")
    if not os.path.exists(os.path.join(data, "test.txt")):
        run("gen-criteo", "--out", data, "--train-samples", "12000", "--files", "2",
            "--test-samples", "2000")
    job = os.path.join(work, name + ".yaml")
    with open(job, "w") as f:
        f.write("name: %s\n" % name)
        f.write("data: {source: criteo, train_files: [data/train-*.txt], test_files: [data/test.txt], cache_dir: cache}\n")
        f.write("training: {batch_size: 256, train_batches: 0, epochs: 1, test_batches: 0, staleness: 1}\n")
        f.write("placement: {shards: 2, aggregators: 2, loaders: 2, trainers: 2, partitions: 64}\n")
    model = os.path.join(work, name + "-model")
    scores = os.path.join(work, name + "-train-scores.txt")
    shutil.rmtree(model, ignore_errors=True)
    r = run("train", "--job", job, "--json", "--export", model, "--export-shards", "3",
            "--test-scores", scores, *extra)
    return job, model, last_json(r.stdout), read_scores(scores)


def predict_parity():
    # Criteo-format files, 2 trainers (their test batches interleave), 3 export shards.
    job, model, tr, train_scores = criteo_model(WORK)
    out = os.path.join(WORK, "predict.tsv")
    p = last_json(run("predict", "--model", model, "--data", os.path.join(WORK, "data/test.txt"),
                      "--out", out, "--json").stdout)
    assert p["rows"] == tr["test_samples"] == 2000, (p, tr)
    check_parity(train_scores, read_scores(out), tr["test_auc"], p["auc"], "criteo predict --data")
    assert p["logloss"] > 0 and 0 < p["ne"] < 1.2 and p["rows_per_sec"] > 0, p
    # Without --data: the job's own test split; another --batch gives the same scores.
    out2 = os.path.join(WORK, "predict2.tsv")
    p2 = last_json(run("predict", "--model", model, "--out", out2, "--batch", "100", "--json").stdout)
    check_parity(train_scores, read_scores(out2), tr["test_auc"], p2["auc"], "criteo predict (job's split, --batch 100)")
    # Synthetic data, fp16 rows and DCN-v2, mean pooling: the test split has ids never trained;
    # DLRM with feature crosses (predict crosses the rows as the job did).
    for model_type, precision, pool, crosses in (("dlrm", "fp16", "sum", ""), ("dcn_v2", "fp32", "mean", ""),
                                                 ("dlrm", "fp32", "sum", ", crosses: [[0, 1], [1, 2, 3]]")):
        job = os.path.join(WORK, "syn.yaml")
        with open(job, "w") as f:
            f.write("name: syn\nmodel: {type: %s, pooling: %s, embedding: {precision: %s}}\n" % (model_type, pool, precision))
            f.write("data: {synthetic: {slots: 4, vocab: 50000}%s}\n" % crosses)
            f.write("training: {batch_size: 128, train_batches: 60, test_batches: 6, staleness: 2}\n")
            f.write("placement: {shards: 3, aggregators: 1, loaders: 1, trainers: 2}\n")
        m = os.path.join(WORK, "syn-%s%s" % (model_type, "-crossed" if crosses else ""))
        shutil.rmtree(m, ignore_errors=True)
        s = os.path.join(WORK, "syn-scores.txt")
        tr = last_json(run("train", "--job", job, "--json", "--export", m, "--test-scores", s).stdout)
        o = os.path.join(WORK, "syn-predict.tsv")
        p = last_json(run("predict", "--model", m, "--out", o, "--json").stdout)
        check_parity(read_scores(s), read_scores(o), tr["test_auc"], p["auc"],
                     "synthetic %s %s %s%s" % (model_type, precision, pool, " crossed" if crosses else ""))
    # satrap export from a job's checkpoint folder.
    ck = os.path.join(WORK, "ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    run("train", "--job", job, "--checkpoint-dir", ck, "--checkpoint-every", "20")
    m = os.path.join(WORK, "from-ckpt")
    shutil.rmtree(m, ignore_errors=True)
    r = run("export", "--checkpoint", ck, "--job", job, "--out", m)
    assert "step 20" in r.stdout, r.stdout
    p = last_json(run("predict", "--model", m, "--json").stdout)
    assert p["version"] == "step-20" and 0.5 < p["auc"] < 1, p
    # Refusals with a clear message.
    r = run("export", "--checkpoint", ck, "--job", job, "--out", m, check=False)
    assert r.returncode != 0 and "not empty" in r.stderr, r.stderr
    r = run("predict", "--model", WORK, check=False)
    assert r.returncode == 2 and "MODEL.json" in r.stderr, r.stderr
    r = run("export", "--checkpoint", ck, "--job", job, "--model", "deepfm", "--out",
            os.path.join(WORK, "wrong"), check=False)
    assert r.returncode != 0 and "dense parameters" in r.stderr, r.stderr


def write_named(path, n, rng):
    # click: the user's and the item's own effect, the item being in the recent history, the
    # weighted tags and the price; buy (given a click): the price and the item's group.
    with open(path, "w") as f:
        for _ in range(n):
            user, item = rng.randrange(300), rng.randrange(200)
            history = [rng.randrange(200) for _ in range(rng.randint(0, 8))]
            if history and rng.random() < 0.4:
                item = rng.choice(history)
            tags = rng.sample(range(40), rng.randint(1, 3))
            weights = [round(rng.uniform(0.2, 2.0), 2) for _ in tags]
            topics = ["t%d" % rng.randrange(40) for _ in range(rng.randint(0, 2))]
            price = round(rng.gauss(0, 1), 3)
            z = (0.02 * (user % 50) - 0.5 + 0.01 * (item % 70) + 1.5 * (item in history[-5:])
                 + sum(w * (0.3 if t % 2 else -0.3) for t, w in zip(tags, weights)) + 0.3 * price)
            click = rng.random() < 1 / (1 + math.exp(-z))
            buy = click and rng.random() < 1 / (1 + math.exp(-(0.5 - 1.5 * price)))
            f.write(json.dumps({"click": int(click), "buy": int(buy), "user": "u%d" % user,
                                "item": item, "history": history,
                                "tags": {"ids": tags, "weights": weights}, "topics": topics,
                                "price": price}) + "\n")


def named():
    import random
    rng = random.Random(4403)
    write_named(os.path.join(WORK, "train.jsonl"), 12000, rng)
    write_named(os.path.join(WORK, "test.jsonl"), 1500, rng)
    job = os.path.join(WORK, "named.yaml")
    with open(job, "w") as f:
        f.write("name: named\nmodel: {dim: 8}\n"
                "data: {source: jsonl, labels: [click, buy], train_files: [train.jsonl],\n"
                "       test_files: [test.jsonl], cache_dir: cache,\n"
                "       features: [{name: user, kind: id}, {name: item, kind: id},\n"
                "         {name: history, kind: sequence, table: item, max_length: 5, pooling: mean},\n"
                "         {name: tags, kind: bag, table: tag, weights: true, pooling: sqrtn},\n"
                "         {name: topics, kind: bag, table: tag},\n"
                "         {name: price, kind: dense}]}\n"
                "training: {batch_size: 128, train_batches: 0, epochs: 2, test_batches: 0, staleness: 1}\n"
                "placement: {shards: 2, loaders: 1, trainers: 2, partitions: 64}\n")
    model = os.path.join(WORK, "named-model")
    shutil.rmtree(model, ignore_errors=True)
    scores = os.path.join(WORK, "train-scores.tsv")
    tr = last_json(run("train", "--job", job, "--json", "--export", model, "--export-shards", "2",
                       "--test-scores", scores).stdout)
    train_rows = [[float(x) for x in l.split("\t")] for l in open(scores) if l.strip()]
    meta = json.load(open(os.path.join(model, "MODEL.json")))
    assert [f["name"] for f in meta["features"]] == ["user", "item", "history", "tags", "topics", "price"], meta
    assert meta["labels"] == ["click", "buy"] and meta["network"]["tasks"] == 2, meta
    # predict: the job's test split, per task, the training run's scores row by row.
    out = os.path.join(WORK, "predict.tsv")
    p = last_json(run("predict", "--model", model, "--out", out, "--json").stdout)
    rows = [[float(x) for x in l.split("\t")] for l in open(out) if l.strip()]
    assert p["rows"] == len(rows) == len(train_rows) == tr["test_samples"] == 1500, (p, len(rows))
    worst = max(abs(a - b) for r, t in zip(rows, train_rows) for a, b in zip(r[2:], t))
    assert worst <= 1e-6, "predict differs from the training run's scores by %g" % worst
    assert [t["label"] for t in p["tasks"]] == ["click", "buy"], p
    for k, name in enumerate(["click", "buy"]):
        got = p["tasks"][k]["auc"]
        print("named %s: predict auc %.6f, train %.6f, max |score diff| %.2g"
              % (name, got, tr["tasks"][name]["test_auc"], worst))
        assert abs(got - tr["tasks"][name]["test_auc"]) < 2e-3, (name, p, tr["tasks"])
        assert got > 0.6, (name, got)
    r = run("predict", "--model", model, "--instances", os.path.join(WORK, "i.jsonl"), check=False)
    assert r.returncode == 2 and "named features" in r.stderr, r.stderr
    # serve: the test lines themselves are the instances (labels and all: keys that are no
    # feature are ignored), in requests of 1..50; the scores equal predict's, per label.
    lines = [json.loads(l) for l in open(os.path.join(WORK, "test.jsonl"))]
    s = Server(PORTS["named"], "--model", model, "--threads", "2")
    try:
        i, sizes, worst = 0, [1, 50, 7, 2], 0.0
        while i < len(lines):
            chunk = lines[i:i + sizes[i % 4]]
            st, r = s.predict("named", chunk)
            assert st == 200, (st, r)
            assert len(r["predictions"]) == len(chunk), r
            for j, pr in enumerate(r["predictions"]):
                assert set(pr) == {"click", "buy"}, pr
                want = rows[i + j][2:]
                worst = max(worst, abs(pr["click"] - want[0]), abs(pr["buy"] - want[1]))
            i += len(chunk)
        print("named serve: %d instances, max |score diff| against predict %.2g" % (len(lines), worst))
        assert worst <= 1e-6, worst
        # Bad instances: the instance, the reason and the feature's name.
        bad = dict(lines[0])
        del bad["item"]
        st, r = s.predict("named", [lines[1], bad])
        assert st == 400 and "instance 1" in r["error"] and "'item'" in r["error"], (st, r)
        bad = dict(lines[0], price="cheap")
        st, r = s.predict("named", [bad])
        assert st == 400 and "'price'" in r["error"], (st, r)
        bad = dict(lines[0], tags={"ids": [1, 2], "weights": [1.0]})
        st, r = s.predict("named", [bad])
        assert st == 400 and "'tags'" in r["error"], (st, r)
        st, body = s.request("POST", "/v1/models/named:predict", json.dumps({"instances": [lines[0]], "x": 1}))
        assert st == 400 and "unexpected key" in body, (st, body)
        st, body = s.request("POST", "/v1/models/named:predict", '{"instances": [{"user": "u1"')
        assert st == 400 and "instance 0" in body, (st, body)
        st, body = s.request("POST", "/v2/models/named/infer", json.dumps(
            {"inputs": [{"name": "dense", "shape": [1, 1], "datatype": "FP32", "data": [0.5]}]}))
        assert st == 400 and "named features" in body, (st, body)
        s.stop()
    finally:
        cleanup()
    value_weights(rng)


def value_weights(rng):
    # libsvm with data.value_weights: a field's ids form a bag, their values its weights. The
    # served instances (predict --instances) carry "weights" beside "slots".
    for name, n in (("vw-train.svm", 8000), ("vw-test.svm", 800)):
        with open(os.path.join(WORK, name), "w") as f:
            for _ in range(n):
                feats = {}
                for field, (lo, hi) in enumerate(((0, 30), (30, 60), (60, 100))):
                    for k in rng.sample(range(lo, hi), rng.randint(1, 3)):
                        feats[k] = round(rng.uniform(0.1, 2.0), 2)
                z = sum(v * (1 if k % 3 == 0 else -0.5) for k, v in feats.items())
                y = int(rng.random() < 1 / (1 + math.exp(-z)))
                f.write("%d %s\n" % (y, " ".join("%d:%g" % kv for kv in sorted(feats.items()))))
    job = os.path.join(WORK, "vw.yaml")
    with open(job, "w") as f:
        f.write("name: vw\nmodel: {dim: 8, pooling: mean}\n"
                "data: {source: libsvm, train_files: [vw-train.svm], test_files: [vw-test.svm],\n"
                "       field_starts: [0, 30, 60], value_weights: true, cache_dir: cache}\n"
                "training: {batch_size: 128, train_batches: 0, epochs: 2, test_batches: 0, staleness: 1}\n"
                "placement: {shards: 2, loaders: 1, trainers: 2, partitions: 64}\n")
    model = os.path.join(WORK, "vw-model")
    shutil.rmtree(model, ignore_errors=True)
    scores = os.path.join(WORK, "vw-train-scores.tsv")
    tr = last_json(run("train", "--job", job, "--json", "--export", model, "--test-scores", scores).stdout)
    inst, got = predict_rows(model, os.path.join(WORK, "vw-inst.jsonl"), os.path.join(WORK, "vw-p.tsv"))
    p = last_json(run("predict", "--model", model, "--json").stdout)
    check_parity(read_scores(scores), got, tr["test_auc"], p["auc"], "libsvm value_weights predict")
    assert all(len(i["weights"]) == 3 and [len(w) for w in i["weights"]] == [len(b) for b in i["slots"]]
               for i in inst), inst[0]
    s = Server(PORTS["named"], "--model", model, "--threads", "2")
    try:
        worst = 0.0
        for i in range(0, len(inst), 64):
            st, r = s.predict("vw", inst[i:i + 64])
            assert st == 200, (st, r)
            worst = max(worst, max(abs(a - b) for a, b in zip(r["predictions"], got[i:i + 64])))
        print("value_weights serve: %d instances, max |score diff| against predict %.2g" % (len(inst), worst))
        assert worst <= 1e-6, worst
        bad = dict(inst[0])
        del bad["weights"]
        st, r = s.predict("vw", [bad])
        assert st == 400 and "weights" in r["error"], (st, r)
        bad = dict(inst[0], weights=[w + [1.0] for w in inst[0]["weights"]])
        st, r = s.predict("vw", [bad])
        assert st == 400 and "weights[0]" in r["error"] and "ids" in r["error"], (st, r)
        s.stop()
    finally:
        cleanup()


def online():
    job = os.path.join(WORK, "online.yaml")
    with open(job, "w") as f:
        f.write("name: online\ndata: {synthetic: {slots: 4, vocab: 20000}}\n"
                "training: {batch_size: 128, train_batches: 10000, test_batches: 2, staleness: 1}\n"
                "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 1}\n")
    ck, models = os.path.join(WORK, "ckpt"), os.path.join(WORK, "models")
    for d in (ck, models):
        shutil.rmtree(d, ignore_errors=True)
    log = open(os.path.join(WORK, "train.err"), "w")
    train = subprocess.Popen([SATRAP, "train", "--job", job, "--checkpoint-dir", ck,
                              "--checkpoint-every", "800", "--export-dir", models,
                              "--export-keep", "2", "--json"],
                             stdout=subprocess.PIPE, stderr=log, text=True)
    procs.append(train)
    deadline = time.time() + 120
    first = None
    while first is None and time.time() < deadline:
        assert train.poll() is None or os.path.isdir(models), open(log.name).read()
        if os.path.isdir(models):
            for d in sorted(os.listdir(models)):
                if os.path.exists(os.path.join(models, d, "MODEL.json")):
                    first = os.path.join(models, d)
        time.sleep(0.05)
    assert first, "no model was exported: " + open(log.name).read()
    net = json.load(open(os.path.join(first, "MODEL.json")))["network"]
    inst = [{"dense": [0.5] * net["dense_features"], "slots": [[i * 7 + s] for s in range(net["slots"])]}
            for i in range(8)]
    s = Server(PORTS["online"], "--watch", models, "--watch-interval", "0.1", "--threads", "2")
    try:
        versions, errors, stop = [], [], threading.Event()

        def client():
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            while not stop.is_set():
                st, r = s.predict("online", inst, conn=conn)
                if st != 200:
                    errors.append((st, r))
                    return
                versions.append(r["version"])

        threads = [threading.Thread(target=client) for _ in range(2)]
        for t in threads:
            t.start()
        out, _ = train.communicate(timeout=240)
        time.sleep(0.6)  # the last export picked up
        stop.set()
        for t in threads:
            t.join()
        assert train.returncode == 0, open(log.name).read()
        assert not errors, errors[:3]
        steps = [int(v.split("-")[1]) for v in versions]
        distinct = sorted(set(steps))
        err = open(log.name).read()
        kept = sorted(os.listdir(models))
        print("online: %d requests, versions served %s; kept %s; %s"
              % (len(versions), distinct, kept, err.strip().splitlines()[-1]))
        assert len(distinct) >= 2, distinct
        assert len(kept) == 2 and "exported " in err, (kept, err)
        newest = max(int(k.split("-")[-1]) for k in kept)
        assert distinct[-1] == newest >= 9600, (distinct, kept)
        s.stop()
    finally:
        cleanup()


class Server:
    def __init__(self, port, *args):
        self.port = port
        self.log = open(os.path.join(WORK, "serve-%d.log" % port), "w")
        self.proc = subprocess.Popen([SATRAP, "serve", "--port", str(port), "--log-level", "info", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        procs.append(self.proc)
        deadline = time.time() + 20
        while time.time() < deadline:
            assert self.proc.poll() is None, "serve exited: " + open(self.log.name).read()
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("serve did not become ready")

    def request(self, method, path, body=None, headers=None, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        return r.status, data.decode()

    def get(self, path):
        return self.request("GET", path)

    def predict(self, name, instances, conn=None):
        status, body = self.request("POST", "/v1/models/%s:predict" % name,
                                    json.dumps({"instances": instances}), conn=conn)
        return status, (json.loads(body) if body.startswith("{") else body)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=10) == 0, "serve did not stop cleanly"


def predict_rows(model, instances_path, scores_path, *extra):
    run("predict", "--model", model, "--instances", instances_path, "--out", scores_path, *extra)
    return [json.loads(l) for l in open(instances_path)], read_scores(scores_path)


def serve():
    # With feature crosses: requests give the data's slots, the server adds the crosses.
    job, model, tr, train_scores = criteo_model(WORK, extra=("--cross", "0,1", "--cross", "2,3,4"))
    inst, scores = predict_rows(model, os.path.join(WORK, "inst.jsonl"), os.path.join(WORK, "p.tsv"))
    name = "criteo-serve"
    s = Server(PORTS["serve"], "--model", model, "--threads", "2", "--max-body-mb", "8")
    try:
        assert s.get("/healthz")[0] == 200
        # Parity: every test row, in requests of 1..64 instances, from 4 concurrent clients.
        results = {}
        errors = []

        def client(k):
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            i = k * 7
            sizes = [1, 64, 13, 2]
            n = 0
            try:
                while i < len(inst):
                    size = sizes[n % len(sizes)]
                    chunk = list(range(i, min(i + size, len(inst))))
                    st, r = s.predict(name, [inst[j] for j in chunk], conn=conn)
                    if st != 200:
                        errors.append((st, r))
                        return
                    assert r["version"] == "step-%d" % 0 or r["version"].startswith("step-"), r
                    for j, p in zip(chunk, r["predictions"]):
                        results[j] = p
                    i += size + 3 * 7 + len(sizes)
                    n += 1
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))

        # Cover every row: each thread walks its own stride; then fill the gaps serially.
        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        missing = [j for j in range(len(inst)) if j not in results]
        for a in range(0, len(missing), 64):
            chunk = missing[a:a + 64]
            st, r = s.predict(name, [inst[j] for j in chunk])
            assert st == 200, r
            for j, p in zip(chunk, r["predictions"]):
                results[j] = p
        worst = max(abs(results[j] - scores[j]) for j in range(len(inst)))
        assert worst <= 1e-6, "serve vs predict: a score differs by %g" % worst
        print("serve parity: %d rows, max |serve - predict| %.2g" % (len(inst), worst))
        # Bad requests: 4xx with a clear message; the server stays up.
        good = inst[0]
        bad = [
            ("{not json", 400, "malformed JSON"),
            (json.dumps({"instances": []}), 400, "non-empty"),
            (json.dumps({"rows": [good]}), 400, "instances"),
            (json.dumps({"instances": [dict(good, extra=1)]}), 400, "unknown key"),
            (json.dumps({"instances": [dict(good, slots=good["slots"] + [[1]])]}), 400, "unknown slot 26"),
            (json.dumps({"instances": [dict(good, slots=good["slots"][:-1])]}), 400, "25 bags"),
            (json.dumps({"instances": [dict(good, dense=good["dense"][:-1])]}), 400, "wrong dense length 12"),
            (json.dumps({"instances": [dict(good, dense=["x"] * 13)]}), 400, "expected a number"),
            (json.dumps({"instances": [dict(good, slots=[[-1]] + good["slots"][1:])]}), 400, "out of range"),
            (json.dumps({"instances": [dict(good, slots=[["18446744073709551616"]] + good["slots"][1:])]}), 400, "out of range"),
            (json.dumps({"instances": [dict(good, slots=[[1.5]] + good["slots"][1:])]}), 400, "integer id"),
            (json.dumps({"instances": [good] * 5000}), 400, "at most 4096"),
        ]
        for body, want, text in bad:
            st, r = s.request("POST", "/v1/models/%s:predict" % name, body)
            assert st == want and text in r, (body[:80], st, r)
        st, r = s.request("POST", "/v1/models/other:predict", json.dumps({"instances": [good]}))
        assert st == 404 and "criteo-serve" in r, (st, r)
        st, r = s.request("GET", "/v1/models/%s:predict" % name)
        assert st == 405, (st, r)
        # Ids given as decimal strings are the same ids.
        st, r1 = s.predict(name, [good])
        st2, r2 = s.predict(name, [dict(good, slots=[[str(i) for i in b] for b in good["slots"]])])
        assert st == st2 == 200 and r1["predictions"] == r2["predictions"], (r1, r2)
        # A 100 MB body: 413 with a message, without reading it all.
        c = socket.create_connection(("127.0.0.1", s.port))
        c.sendall(b"POST /v1/models/criteo-serve:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 104857600\r\n\r\n")
        chunk = b"[" * (1 << 20)
        try:
            for _ in range(100):
                c.sendall(chunk)
        except OSError:
            pass  # the server may answer and close before all of it is sent
        c.settimeout(10)
        head = ""
        while "larger than" not in head:
            got = c.recv(4096)
            if not got:
                break
            head += got.decode(errors="replace")
        c.close()
        assert " 413 " in head and "larger than" in head, head
        # A slow client (half a request, then silence) is cut off; others are served meanwhile.
        slow = socket.create_connection(("127.0.0.1", s.port))
        slow.sendall(b"POST /v1/models/criteo-serve:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        st, r = s.predict(name, [good])
        assert st == 200, r
        slow.settimeout(15)
        t0 = time.time()
        rest = slow.recv(4096)
        slow.close()
        assert time.time() - t0 < 12, "the slow client was not cut off"
        print("slow client cut off after %.1f s (%r)" % (time.time() - t0, rest[:40]))
        # Metrics: latency histogram, batch sizes, errors by reason.
        st, m = s.get("/metrics")
        assert st == 200
        for want in ("satrap_serve_request_seconds_bucket", "satrap_serve_batch_instances_bucket",
                     'satrap_serve_errors_total{reason="bad_request"}', 'satrap_serve_requests_total{code="200"}',
                     'satrap_serve_model_info{name="criteo-serve",version="step-'):
            assert want in m, (want, m)
        st, r = s.get("/v1/models/criteo-serve")
        assert st == 200 and "AVAILABLE" in r, r
        assert s.get("/healthz")[0] == 200 and s.get("/readyz")[0] == 200
        s.stop()
    finally:
        cleanup()


def hot_reload():
    # Two versions of one job: a checkpoint's (step 20) and the final model (step 40).
    job = os.path.join(WORK, "hr.yaml")
    with open(job, "w") as f:
        f.write("name: hr\ndata: {synthetic: {slots: 4, vocab: 5000}}\n")
        f.write("training: {batch_size: 128, train_batches: 40, test_batches: 2}\n")
        f.write("placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 1}\n")
    ck = os.path.join(WORK, "ckpt")
    watch = os.path.join(WORK, "watch")
    for d in (ck, watch):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(watch)
    run("train", "--job", job, "--checkpoint-dir", ck, "--checkpoint-every", "20")
    v1 = os.path.join(watch, "v1")
    run("export", "--checkpoint", ck, "--job", job, "--out", v1, "--version", "v1")
    inst, s1 = predict_rows(v1, os.path.join(WORK, "i1.jsonl"), os.path.join(WORK, "s1.tsv"))
    expected = {"v1": s1}
    token = os.path.join(WORK, "token")
    with open(token, "w") as f:
        f.write("s3cret-token\n")
    s = Server(PORTS["hot_reload"], "--watch", watch, "--watch-interval", "0.2",
               "--admin-token-file", token, "--threads", "2")
    try:
        stop = threading.Event()
        seen, errors, counts = [], [], [0]

        def client(k):
            conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
            last = None
            n = 0
            while not stop.is_set():
                a = (k * 37 + n * 11) % (len(inst) - 16)
                size = 1 + (n % 16)
                try:
                    st, r = s.predict("hr", inst[a:a + size], conn=conn)
                except Exception as e:  # noqa: BLE001
                    errors.append(repr(e))
                    return
                n += 1
                if st != 200:
                    errors.append((st, r))
                    continue
                seen.append((k, r["version"], a, r["predictions"]))
                if last == "step-40" and r["version"] == "v1":
                    errors.append("thread %d went back from the new version to v1" % k)
                last = r["version"]
            counts[0] += n

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.7)
        # A newer export appears in the watched folder (MODEL.json last: never seen half written):
        # the same job trained to its end (step 40), exported there by `satrap train --export`.
        v2 = os.path.join(watch, "v2")
        run("train", "--job", job, "--export", v2)
        _, s2 = predict_rows(v2, os.path.join(WORK, "i2.jsonl"), os.path.join(WORK, "s2.tsv"))
        assert max(abs(a - b) for a, b in zip(s1, s2)) > 1e-4, "the two versions must score differently"
        expected["step-40"] = s2
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
        assert not errors, errors[:5]
        versions = {v for _, v, _, _ in seen}
        assert versions == {"v1", "step-40"}, versions
        # Every response wholly one version: each prediction is that version's score of the row.
        for k, v, a, preds in seen:
            for j, p in enumerate(preds):
                assert abs(p - expected[v][a + j]) <= 1e-6, ("mixed or wrong version", k, v, a + j, p)
        st, m = s.get("/metrics")
        assert "satrap_serve_reloads_total 1" in m, m
        deadline = time.time() + 5
        while "satrap_serve_versions_mapped 1" not in s.get("/metrics")[1]:
            assert time.time() < deadline, "the old version was not unmapped"
            time.sleep(0.1)
        print("hot reload under load: %d requests, versions %s, none failed or mixed" %
              (len(seen), sorted(versions)))
        # The admin path: a wrong token is refused; the right one reloads v1 on request.
        st, r = s.request("POST", "/admin/reload?dir=" + v1, headers={"Authorization": "Bearer nope"})
        assert st == 401, (st, r)
        st, r = s.request("POST", "/admin/reload?dir=" + v1, headers={"Authorization": "Bearer s3cret-token"})
        assert st == 200 and '"v1"' in r, (st, r)
        st, r = s.predict("hr", inst[:3])
        assert r["version"] == "v1" and all(abs(p - q) <= 1e-6 for p, q in zip(r["predictions"], s1)), r
        st, r = s.request("POST", "/admin/reload?dir=" + WORK, headers={"Authorization": "Bearer s3cret-token"})
        assert st == 422 and "still serving" in r, (st, r)
        assert s.predict("hr", inst[:1])[1]["version"] == "v1"
        s.stop()
    finally:
        cleanup()


if __name__ == "__main__":
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.chdir(WORK)
    try:
        {"predict_parity": predict_parity, "serve": serve, "hot_reload": hot_reload,
         "named": named, "online": online}[SCENARIO]()
    finally:
        cleanup()
    print("PASS", SCENARIO)
