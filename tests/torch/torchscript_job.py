#!/usr/bin/env python3
"""model.type torchscript through the command (label `torch`): a PyTorch module trained embedded
by satrap, exported, predicted and served with parity; each contract breach refused with exit 2
before any actor starts; a checkpoint resume bit-exact at staleness 0; early stopping restoring
the best module. Real processes on loopback (port 5391), cleaned up on exit.

usage: torchscript_job.py SATRAP MODULES_DIR WORKDIR SCENARIO
  SCENARIO: train_export_serve | contract | resume | early_stopping | cluster | sequences
Ports: 5391 (serve), 5380-5389 (the cluster)."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time

SATRAP, MODULES, WORK, SCENARIO = sys.argv[1:5]
SATRAP, MODULES, WORK = (os.path.abspath(p) for p in (SATRAP, MODULES, WORK))
PORT = 5391
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


def scores(path):
    return [float(l.split("\t")[-1]) for l in open(path) if l.strip()]


def module(name):
    return os.path.join(MODULES, name)


def serve(model):
    """`satrap serve` of `model` on PORT (cleaned up on exit), once it answers /readyz."""
    p = subprocess.Popen([SATRAP, "serve", "--model", model, "--port", str(PORT), "--host", "127.0.0.1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs.append(p)
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=5)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("satrap serve did not become ready")


def job(name, body):
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write("name: %s\n%s" % (name, body))
    return path


TINY = ("data:\n  synthetic: {slots: 4, vocab: 2000}\n"
        "training: {batch_size: 64, train_batches: 40, test_batches: 4, staleness: 1}\n"
        "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2}\n")


def train_export_serve():
    # Each example trains the tiny job on 2 trainers (their test batches interleave: the export's
    # scores equal theirs only if both replicas hold the same module after every all-reduce).
    for name in ("dlrm_s4.pt", "dcn_v2_s4.pt", "attention_s4.pt"):
        j = job("ts", "model: {type: torchscript, file: %s}\n" % module(name) + TINY)
        m = os.path.join(WORK, "model-" + name)
        shutil.rmtree(m, ignore_errors=True)
        s = os.path.join(WORK, "scores-" + name + ".tsv")
        tr = last_json(run("train", "--job", j, "--json", "--export", m, "--test-scores", s).stdout)
        assert tr["samples"] == 2560 and 0.55 < tr["test_auc"] <= 1, (name, tr)
        assert os.path.getsize(os.path.join(m, "module.pt")) > 0
        o = os.path.join(WORK, "predict-" + name + ".tsv")
        p = last_json(run("predict", "--model", m, "--out", o, "--json").stdout)
        a, b = scores(s), scores(o)
        assert len(a) == len(b) == 256, (len(a), len(b))
        worst = max(abs(x - y) for x, y in zip(a, b))
        assert worst <= 1e-6 and abs(p["auc"] - tr["test_auc"]) <= 1e-6, (name, worst, p, tr)
        print("%s: test_auc %.4f, predict auc %.6f, max |score diff| %.2g"
              % (name, tr["test_auc"], p["auc"], worst))
    # That the exported module.pt holds the trained parameters: tests/torch/torchscript_test.cpp.
    # Serve the last model: a request's score equals predict's.
    inst = os.path.join(WORK, "inst.jsonl")  # predict writes the test split's instances here
    out = os.path.join(WORK, "inst-scores.tsv")
    run("predict", "--model", m, "--instances", inst, "--out", out)
    want = scores(out)
    serve(m)
    try:
        rows = [json.loads(l) for l in open(inst)]
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        c.request("POST", "/v1/models/ts:predict", json.dumps({"instances": rows}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        body = json.loads(r.read())
        assert r.status == 200, body
        worst = max(abs(x - y) for x, y in zip(body["predictions"], want))
        assert worst <= 1e-6, worst
        print("serve: %d instances, max |serve - predict| %.2g" % (len(rows), worst))
    finally:
        cleanup()


def contract():
    cases = [
        ("bad_three_args.pt", "forward takes 3 argument(s)"),
        ("bad_two_outputs.pt", "forward returned [3, 2]"),
        ("bad_double.pt", "expected float32"),
        ("bad_corrupt.pt", "not a TorchScript archive"),
        ("bad_newer.pt", "made by a newer torch"),
        ("dlrm_s8.pt", "embeddings [3, 4, 16]"),  # a module for 8 slots, a job with 4
    ]
    for name, want in cases:
        j = job("bad", "model: {type: torchscript, file: %s}\n" % module(name) + TINY)
        r = run("train", "--job", j, "--log-level", "info", check=False)
        assert r.returncode == 2, (name, r.returncode, r.stderr)
        assert want in r.stderr, (name, want, r.stderr)
        assert "spawn" not in r.stderr, (name, "an actor was spawned", r.stderr)
        print("%s: exit 2, %s" % (name, r.stderr.strip().splitlines()[-1][:160]))
    r = run("train", "--model", "torchscript", check=False)
    assert r.returncode == 2 and "--model-file" in r.stderr, r.stderr
    r = run("train", "--model", "torchscript", "--model-file", os.path.join(WORK, "none.pt"), check=False)
    assert r.returncode == 2 and "none.pt" in r.stderr, r.stderr
    r = run("train", "--model-file", module("dlrm_s4.pt"), check=False)
    assert r.returncode == 2 and "expected model.type torchscript" in r.stderr, r.stderr
    print("missing file, missing type: exit 2 with the fix in the message")


def resume():
    # One trainer, staleness 0: deterministic; the resumed run tests exactly as the first.
    j = job("ts", "model: {type: torchscript, file: %s}\n" % module("dcn_v2_s4.pt") + TINY)
    flags = ["--staleness", "0", "--trainers", "1"]
    ck = os.path.join(WORK, "ckpt")
    shutil.rmtree(ck, ignore_errors=True)
    a = last_json(run("train", "--job", j, *flags, "--checkpoint-dir", ck, "--checkpoint-every", "16",
                      "--json").stdout)
    b = last_json(run("train", "--job", j, *flags, "--resume", ck, "--json").stdout)
    assert a["checkpoints"] >= 1 and b["test_auc"] == a["test_auc"], (a, b)
    print("resume: test_auc %.6f both (checkpoints %d)" % (a["test_auc"], a["checkpoints"]))


def early_stopping():
    # Evaluations every 10 steps, patience 2, a high dense rate: the job stops past its best and
    # restores the module of its best evaluation; re-evaluated, the restored module scores as it
    # did then.
    j = job("ts", "model: {type: torchscript, file: %s, dense_optimizer: {learning_rate: 0.5}}\n"
            % module("dlrm_s4.pt")
            + "data:\n  synthetic: {slots: 4, vocab: 2000}\n"
            "training: {batch_size: 64, train_batches: 400, test_batches: 4, validation_batches: 4,"
            " eval_every: 10, staleness: 0, early_stopping: {patience: 2}}\n"
            "placement: {shards: 1, aggregators: 1, loaders: 1, trainers: 1}\n")
    out = last_json(run("train", "--job", j, "--json").stdout)
    print("early stopping:", {k: out.get(k) for k in ("steps", "best_step", "validation_auc",
                                                     "restored_validation_auc", "test_auc")})
    assert out["best_step"] is not None, out
    assert abs(out["restored_validation_auc"] - out["validation_auc"]) <= 1e-9, out


def sequences():
    # Unpooled sequences reach a DIN module ([B, L, E] and lengths). The synthetic history job
    # resumes bit-exact from a checkpoint at staleness 0; export is refused with the reason.
    hist = ("model: {type: torchscript, file: %s}\n" % module("din_s4_l5.pt")
            + "data:\n  synthetic: {slots: 4, vocab: 2000, history: 5, history_pooling: none}\n"
            "training: {batch_size: 64, train_batches: 40, test_batches: 4, staleness: 0}\n"
            "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 1}\n")
    j = job("din", hist)
    ck = os.path.join(WORK, "ckpt-din")
    shutil.rmtree(ck, ignore_errors=True)
    a = last_json(run("train", "--job", j, "--checkpoint-dir", ck, "--checkpoint-every", "16",
                      "--json").stdout)
    b = last_json(run("train", "--job", j, "--resume", ck, "--json").stdout)
    assert a["checkpoints"] >= 1 and b["test_auc"] == a["test_auc"], (a, b)
    assert 0.5 < a["test_auc"] <= 1, a
    print("synthetic history, DIN: test_auc %.6f, resumed %.6f" % (a["test_auc"], b["test_auc"]))
    r = run("train", "--job", j, "--export", os.path.join(WORK, "din-model"), check=False)
    assert r.returncode == 2 and "data.synthetic.history" in r.stderr, r.stderr
    # JSON lines: the history names the item table (shared rows); a click is likely when the
    # candidate is in the history. DIN sees which items the history holds.
    import random
    rnd = random.Random(44)
    data = os.path.join(WORK, "seq.jsonl")
    with open(data, "w") as f:
        for i in range(6000):
            n = rnd.randint(0, 8)
            history = [rnd.randrange(200) for _ in range(n)]
            item = rnd.choice(history) if history and rnd.random() < 0.5 else rnd.randrange(200)
            p = 0.85 if item in history[-5:] else 0.15
            f.write(json.dumps({"user": rnd.randrange(100), "item": item, "history": history,
                                "tags": ["t%d" % rnd.randrange(30) for _ in range(rnd.randint(0, 3))],
                                "price": rnd.random(), "click": int(rnd.random() < p)}) + "\n")
    body = ("model: {type: torchscript, file: %s, dense_optimizer: {learning_rate: 0.05}}\n"
            % module("din_d1_s3_l5.pt")
            + "data:\n  source: jsonl\n  train_files: [%s]\n  test_fraction: 0.2\n"
              "  labels: [click]\n  cache_dir: %s\n  features:\n"
              "    - {name: user, kind: id}\n    - {name: item, kind: id}\n"
              "    - {name: history, kind: sequence, table: item, max_length: 5, pooling: none}\n"
              "    - {name: tags, kind: bag}\n    - {name: price, kind: dense}\n"
            % (data, os.path.join(WORK, "cache"))
    # Staleness 0: at staleness 1 under a full ctest -j2 run one run reached 0.60 (0.80 alone);
    # the attention over stale history rows is not investigated yet (README "Not yet").
            + "training: {batch_size: 64, train_batches: 300, test_batches: 0, staleness: 0}\n"
              "placement: {shards: 2, aggregators: 1, loaders: 1, trainers: 2}\n")
    dm = os.path.join(WORK, "din-jsonl-model")
    shutil.rmtree(dm, ignore_errors=True)
    t = last_json(run("train", "--job", job("din-jsonl", body), "--json", "--export", dm).stdout)
    print("JSON lines, history unpooled, DIN: test_auc %.4f on %d samples" % (t["test_auc"], t["samples"]))
    assert t["test_auc"] > 0.75, t
    # Exported, the unpooled history scores as in training: predict on the job's split gives its
    # test AUC; served with the data's own lines as instances, predict's scores.
    p = last_json(run("predict", "--model", dm, "--json").stdout)
    assert abs(p["auc"] - t["test_auc"]) <= 1e-6, (p, t)
    lines = open(data).read().splitlines()[:200]
    few = os.path.join(WORK, "seq-few.jsonl")
    with open(few, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = os.path.join(WORK, "seq-few.tsv")
    run("predict", "--model", dm, "--data", few, "--out", out)
    want = scores(out)
    serve(dm)
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
        c.request("POST", "/v1/models/din-jsonl:predict",
                  json.dumps({"instances": [json.loads(l) for l in lines]}))
        r = c.getresponse()
        got = json.loads(r.read())
        assert r.status == 200, got
        worst = max(abs(x - y) for x, y in zip(got["predictions"], want))
        assert len(got["predictions"]) == len(want) == 200 and worst <= 1e-6, (worst, len(want))
        print("DIN exported: predict auc %.6f, serve vs predict max |diff| %.2g over %d lines"
              % (p["auc"], worst, len(want)))
    finally:
        cleanup()


def cluster():
    # The module travels inside the job (model.module) from `satrap submit` to every node of a
    # 3-node loopback cluster; the job's test AUC equals the embedded run's.
    base = 5380
    manifest = os.path.join(WORK, "manifest.yaml")
    state = os.path.join(WORK, "state")
    shutil.rmtree(state, ignore_errors=True)
    with open(manifest, "w") as f:
        f.write("cluster: torch-%d\nhead: {host: 127.0.0.1, port: %d, status_port: %d}\n"
                "nodes:\n  - name: node-{i}\n    count: 3\n    host: 127.0.0.1\n    port: %d\n"
                "    resources: {cores: 2, memory: 4GiB, gpus: 0}\n" % (os.getpid(), base, base + 9, base + 1))
    body = ("model: {type: torchscript, file: %s}\n" % module("dcn_v2_s4.pt")
            + "data:\n  synthetic: {slots: 4, vocab: 2000}\n"
            "training: {batch_size: 64, train_batches: 120, test_batches: 8, staleness: 1}\n"
            "placement: {shards: 2, aggregators: 2, loaders: 2, trainers: 2}\n")
    j = job("ts-cluster", body)
    common = ["--manifest", manifest, "--state-dir", state]
    try:
        run("up", *common, "--wait", "60")
        r = run("submit", j, "--follow", "--json", *common)
        c = last_json(r.stdout)
        e = last_json(run("train", "--job", j, "--json").stdout)
        assert c["state"] == "SUCCEEDED", c
        d = abs(c["test_auc"] - e["test_auc"])
        print("cluster: test_auc %.4f, embedded %.4f (|diff| %.4f)" % (c["test_auc"], e["test_auc"], d))
        assert d <= 0.005, (c, e)
        # Unpooled sequences on the cluster: DIN on the synthetic history, as embedded. At 120
        # batches and 512 test samples two embedded runs alone differed by up to 0.01 (the
        # attention is far from converged and both runs are asynchronous); at 480 batches and 2,048
        # test samples five embedded runs spanned 0.0021, so the bound is 0.01.
        js = job("din-cluster", "model: {type: torchscript, file: %s}\n" % module("din_s4_l5.pt")
                 + "data:\n  synthetic: {slots: 4, vocab: 2000, history: 5, history_pooling: none}\n"
                 "training: {batch_size: 64, train_batches: 480, test_batches: 32, staleness: 1}\n"
                 "placement: {shards: 2, aggregators: 2, loaders: 2, trainers: 2}\n")
        c = last_json(run("submit", js, "--follow", "--json", *common).stdout)
        e = last_json(run("train", "--job", js, "--json").stdout)
        assert c["state"] == "SUCCEEDED", c
        d = abs(c["test_auc"] - e["test_auc"])
        print("cluster, DIN on a history: test_auc %.4f, embedded %.4f (|diff| %.4f)"
              % (c["test_auc"], e["test_auc"], d))
        assert d <= 0.01, (c, e)
        # A module past the size bound is refused before anything starts.
        big = os.path.join(WORK, "big.pt")
        with open(big, "wb") as f:
            f.truncate((64 << 20) + 1)
        r = run("submit", job("big", "model: {type: torchscript, file: %s}\n" % big + TINY), *common,
                check=False)
        assert r.returncode == 2 and "at most" in r.stderr, r.stderr
        os.remove(big)
    finally:
        run("down", *common, check=False)
        subprocess.run(["pkill", "-9", "-f", "--", "--state-dir " + state], check=False)


os.makedirs(WORK, exist_ok=True)
try:
    {"train_export_serve": train_export_serve, "contract": contract, "resume": resume,
     "early_stopping": early_stopping, "cluster": cluster, "sequences": sequences}[SCENARIO]()
finally:
    cleanup()
