#!/usr/bin/env python3
"""TFRecord of tf.train.Example (`data.source: tfrecord`, issue 44) against the same samples as
JSON lines. The Examples are written with Google's protobuf library (Debian's python3-protobuf,
from tests/cli/proto/example.proto compiled by protoc at run time); the framing's CRC-32C is
computed here from its definition.

  parity    every kind of feature (int64 and bytes ids, a bag, a sequence sharing the item table,
            a weighted bag, a float), two labels (int64 and float): trained from TFRecord (train
            plain, test gzip) and from JSON lines, the two jobs' test figures are identical; the
            TFRecord job exported, `satrap predict` gives its test scores, and `satrap serve`
            (loopback port 5392) asked with the same samples as JSON objects gives predict's
  cluster   the same every-kind job from TFRecord: embedded with checkpoints, then resumed from
            its checkpoint folder (the same test figures, per task, at staleness 0); submitted to a
            3-node loopback cluster (ports 5750-5759) with checkpoints: it succeeds, its test AUC
            near the embedded run's, and its record has each task's test AUC by label; and the
            same samples as JSON lines on the cluster
  damaged   a flipped byte fails its record's CRC, a cut file is truncated: both are errors
            (exit 2) naming the file and the record, whatever data.on_error says; an Example
            without a feature is an error with on_error fail and is counted with skip

usage: tfrecord_end_to_end.py SATRAP WORKDIR SCENARIO"""
import gzip
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys

SATRAP, WORK, SCENARIO = sys.argv[1:4]
SATRAP, WORK = os.path.abspath(SATRAP), os.path.abspath(WORK)
PROTO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")


def run(*args, check=True):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit("FAILED: satrap %s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = crc_table()


def masked_crc(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    head = struct.pack("<Q", len(payload))
    return head + struct.pack("<I", masked_crc(head)) + payload + struct.pack("<I", masked_crc(payload))


def example_module():
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        print("SKIPPED: python3-protobuf is not installed (ops/setup.sh installs it)")
        sys.exit(77)
    if not shutil.which("protoc"):
        print("SKIPPED: protoc is not installed (ops/setup.sh installs protobuf-compiler)")
        sys.exit(77)
    out = os.path.join(WORK, "pb")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["protoc", "-I", PROTO, "--python_out", out, os.path.join(PROTO, "example.proto")],
                   check=True)
    sys.path.insert(0, out)
    import example_pb2
    return example_pb2


def samples(n, rng):
    out = []
    for _ in range(n):
        user, item = rng.randrange(200), rng.randrange(150)
        history = [rng.randrange(150) for _ in range(rng.randrange(0, 12))]
        tags = [rng.randrange(40) for _ in range(rng.randrange(0, 5))]
        topics = rng.sample(range(20), rng.randrange(1, 4))
        weights = [round(rng.random(), 3) for _ in topics]
        price = round(rng.gauss(0, 1), 3)
        logit = math.sin(user) + math.cos(item) + 0.5 * price + sum(
            w * (1 if t < 10 else -1) for t, w in zip(topics, weights))
        click = int(rng.random() < 1 / (1 + math.exp(-logit)))
        buy = float(click and rng.random() < 1 / (1 + math.exp(price)))
        item_id = item if item % 2 else "sku-%d" % item
        out.append({"click": click, "buy": buy, "user": user, "item": item_id,
                    "history": [h if h % 2 else "sku-%d" % h for h in history], "tags": tags,
                    "topics": {"ids": topics, "weights": weights}, "price": price})
    return out


def to_example(pb, s, drop=None):
    ex = pb.Example()
    f = ex.features.feature

    def ids(name, values):
        if values and isinstance(values[0], str):
            f[name].bytes_list.value.extend(v.encode() for v in values)
        elif values and all(isinstance(v, int) for v in values):
            f[name].int64_list.value.extend(values)
        else:  # a mix of ints and strings cannot be one list: the ints as their text is another
            raise ValueError("mixed ids")

    f["click"].int64_list.value.append(s["click"])
    f["buy"].float_list.value.append(s["buy"])
    ids("user", [s["user"]])
    ids("item", [s["item"]])
    if s["history"]:
        # A list holds one type: split by type would change the sequence, so histories are
        # written as they are only when uniform; otherwise all as bytes of mixed spelling.
        if all(isinstance(h, str) for h in s["history"]) or all(isinstance(h, int) for h in s["history"]):
            ids("history", s["history"])
        else:
            f["history"].bytes_list.value.extend(str(h).encode() for h in s["history"])
    else:
        f["history"].int64_list.SetInParent()
    if s["tags"]:
        ids("tags", s["tags"])
    else:
        f["tags"].int64_list.SetInParent()
    ids("topics", s["topics"]["ids"])
    f["topics_weights"].float_list.value.extend(s["topics"]["weights"])
    f["price"].float_list.value.append(s["price"])
    f["unused"].bytes_list.value.append(b"ignored")
    if drop:
        del f[drop]
    return ex.SerializeToString()


def uniform(s):
    """The sample as both formats can say it: a mixed history becomes all strings (TFRecord lists
    hold one type; JSON lines then spells the ints as strings too, the same ids)."""
    h = s["history"]
    if h and not (all(isinstance(x, str) for x in h) or all(isinstance(x, int) for x in h)):
        s = dict(s, history=[str(x) for x in h])
    return s


def write_both(name, data, pb, gz=False):
    data = [uniform(s) for s in data]
    with open(os.path.join(WORK, name + ".jsonl"), "w") as f:
        for s in data:
            f.write(json.dumps(s) + "\n")
    blob = b"".join(frame(to_example(pb, s)) for s in data)
    path = os.path.join(WORK, name + ".tfrecord" + (".gz" if gz else ""))
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(blob)
    return path


def job(name, source, train, test, on_error="fail"):
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write("name: %s\nmodel: {dim: 8}\n"
                "data: {source: %s, labels: [click, buy], train_files: [%s], test_files: [%s],\n"
                "       cache_dir: cache-%s, on_error: %s,\n"
                "       features: [{name: user, kind: id}, {name: item, kind: id},\n"
                "                  {name: history, kind: sequence, table: item, max_length: 8},\n"
                "                  {name: tags, kind: bag, max_length: 10},\n"
                "                  {name: topics, kind: bag, weights: true},\n"
                "                  {name: price, kind: dense}]}\n"
                "training: {batch_size: 128, train_batches: 0, epochs: 2, test_batches: 0, staleness: 0}\n"
                "placement: {loaders: 1, trainers: 1}\n" % (name, source, train, test, name, on_error))
    return path


def parity():
    pb = example_module()
    rng = random.Random(4404)
    write_both("train", samples(8000, rng), pb)
    write_both("test", samples(2000, rng), pb, gz=True)
    t = last_json(run("train", "--job", job("tf", "tfrecord", "train.tfrecord", "test.tfrecord.gz"), "--json",
                      "--export", "tf-model", "--test-scores", "tf-scores.tsv").stdout)
    j = last_json(run("train", "--job", job("js", "jsonl", "train.jsonl", "test.jsonl"), "--json").stdout)
    print("tfrecord: test auc %.6f (click %.4f, buy %.4f); jsonl: %.6f" % (
        t["test_auc"], t["tasks"]["click"]["test_auc"], t["tasks"]["buy"]["test_auc"], j["test_auc"]))
    assert t["test_samples"] == j["test_samples"] == 2000, (t, j)
    assert t["test_auc"] == j["test_auc"] and t["test_logloss"] == j["test_logloss"], (t, j)
    assert t["tasks"] == j["tasks"], (t, j)
    assert t["test_auc"] > 0.6, t
    serve_tfrecord_model(t)


def serve_tfrecord_model(t):
    import http.client
    import time
    train_rows = [[float(x) for x in l.split("\t")] for l in open("tf-scores.tsv") if l.strip()]
    p = last_json(run("predict", "--model", "tf-model", "--out", "tf-predict.tsv", "--json").stdout)
    rows = [[float(x) for x in l.split("\t")][2:] for l in open("tf-predict.tsv") if l.strip()]
    assert len(rows) == len(train_rows) == 2000, (len(rows), len(train_rows))
    worst = max(abs(a - b) for r, w in zip(rows, train_rows) for a, b in zip(r, w))
    assert worst <= 1e-6, worst
    for k, name in enumerate(["click", "buy"]):
        assert abs(p["tasks"][k]["auc"] - t["tasks"][name]["test_auc"]) < 2e-3, (p, t["tasks"])
    lines = [json.loads(l) for l in open("test.jsonl")]
    srv = subprocess.Popen([SATRAP, "serve", "--model", "tf-model", "--port", "5392", "--host", "127.0.0.1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            try:
                c = http.client.HTTPConnection("127.0.0.1", 5392, timeout=5)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.05)
        served = 0
        for i in range(0, len(lines), 100):
            c = http.client.HTTPConnection("127.0.0.1", 5392, timeout=10)
            c.request("POST", "/v1/models/tf:predict", json.dumps({"instances": lines[i:i + 100]}))
            r = c.getresponse()
            got = json.loads(r.read())
            assert r.status == 200, got
            for j, pr in enumerate(got["predictions"]):
                worst = max(worst, abs(pr["click"] - rows[i + j][0]), abs(pr["buy"] - rows[i + j][1]))
                served += 1
        assert served == 2000 and worst <= 1e-6, (served, worst)
        print("tfrecord model: predict = train scores, serve (JSON objects) = predict; max |diff| %.2g" % worst)
    finally:
        srv.terminate()
        srv.wait(timeout=10)


def cluster():
    pb = example_module()
    rng = random.Random(4406)
    write_both("train", samples(6000, rng), pb)
    write_both("test", samples(1500, rng), pb, gz=True)
    j = job("tf", "tfrecord", "train.tfrecord", "test.tfrecord.gz")
    shutil.rmtree("ckpt", ignore_errors=True)
    a = last_json(run("train", "--job", j, "--checkpoint-dir", "ckpt", "--checkpoint-every", "30",
                      "--json").stdout)
    b = last_json(run("train", "--job", j, "--resume", "ckpt", "--json").stdout)
    print("embedded: test auc %.6f, resumed from its checkpoint %.6f (%d checkpoints)"
          % (a["test_auc"], b["test_auc"], a["checkpoints"]))
    assert a["checkpoints"] >= 2 and b["batches_replayed"] >= 0, a
    assert b["test_auc"] == a["test_auc"] and b["tasks"] == a["tasks"], (a, b)
    base = 5750
    state = os.path.join(WORK, "state")
    with open("manifest.yaml", "w") as f:
        f.write("cluster: tfrecord-%d\nhead: {host: 127.0.0.1, port: %d, status_port: %d}\n"
                "nodes:\n  - name: node-{i}\n    count: 3\n    host: 127.0.0.1\n    port: %d\n"
                "    resources: {cores: 2, memory: 4GiB, gpus: 0}\n" % (os.getpid(), base, base + 9, base + 1))
    with open("tf-cluster.yaml", "w") as f:
        f.write(open(j).read().replace("name: tf\n", "name: tf-cluster\n")
                + "checkpoint: {dir: %s, every_steps: 30}\n" % os.path.join(WORK, "ckpt-cluster"))
    common = ["--manifest", "manifest.yaml", "--state-dir", state]
    try:
        run("up", *common, "--wait", "60")
        c = last_json(run("submit", "tf-cluster.yaml", "--follow", "--json", *common).stdout)
        assert c["state"] == "SUCCEEDED" and c["checkpoints"] >= 2, c
        d = abs(c["test_auc"] - a["test_auc"])
        print("cluster: test auc %.4f (embedded %.4f, |diff| %.4f), tasks %s"
              % (c["test_auc"], a["test_auc"], d, c["task_test_auc"]))
        assert d <= 0.01, (c, a)
        assert set(c["task_test_auc"]) == {"click", "buy"}, c
        # The same samples as JSON lines on the cluster: the same figures as from TFRecord.
        with open("js-cluster.yaml", "w") as f:
            f.write(open(job("js", "jsonl", "train.jsonl", "test.jsonl")).read()
                    .replace("name: js\n", "name: js-cluster\n"))
        c2 = last_json(run("submit", "js-cluster.yaml", "--follow", "--json", *common).stdout)
        assert c2["state"] == "SUCCEEDED", c2
        print("cluster, JSON lines: test auc %.4f" % c2["test_auc"])
        assert abs(c2["test_auc"] - a["test_auc"]) <= 0.01, (c2, a)
    finally:
        run("down", *common, check=False)
        subprocess.run(["pkill", "-9", "-f", "--", "--state-dir " + state], check=False)


def damaged():
    pb = example_module()
    rng = random.Random(4405)
    data = samples(300, rng)
    good = write_both("good", data, pb)
    raw = open(good, "rb").read()
    # A flipped byte inside record 3's payload.
    first = len(frame(to_example(pb, uniform(data[0]))))
    second = len(frame(to_example(pb, uniform(data[1]))))
    flipped = bytearray(raw)
    flipped[first + second + 20] ^= 0x40
    open(os.path.join(WORK, "flipped.tfrecord"), "wb").write(bytes(flipped))
    open(os.path.join(WORK, "cut.tfrecord"), "wb").write(raw[: len(raw) - 7])
    for name, want in (("flipped", "record 3's data fails its CRC"), ("cut", "truncated: the file ends inside record 300")):
        for policy in ("fail", "skip"):
            r = run("train", "--job", job(name + policy, "tfrecord", name + ".tfrecord", "good.tfrecord", policy),
                    check=False)
            assert r.returncode == 2 and name + ".tfrecord" in r.stderr and want in r.stderr, (name, policy, r.stderr)
    # An Example without the feature 'item' (record 5): an error, or skipped and counted.
    blob = b"".join(frame(to_example(pb, uniform(s), drop="item" if i == 4 else None)) for i, s in enumerate(data))
    open(os.path.join(WORK, "missing.tfrecord"), "wb").write(blob)
    r = run("train", "--job", job("mf", "tfrecord", "missing.tfrecord", "good.tfrecord"), check=False)
    assert r.returncode == 2 and "missing.tfrecord: record 5" in r.stderr and "the feature 'item'" in r.stderr, r.stderr
    r = run("train", "--job", job("ms", "tfrecord", "missing.tfrecord", "good.tfrecord", "skip"))
    assert "1 bad input lines skipped: missing_feature=1" in r.stdout, r.stdout


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)
{"parity": parity, "damaged": damaged, "cluster": cluster}[SCENARIO]()
print("tfrecord_end_to_end %s: PASS" % SCENARIO)
