#!/usr/bin/env python3
"""Several labels (issue 44): each label of data.labels is a task of the network, with its own
logit, loss weight (training.task_weights) and test figures.

  synthetic  the click-and-purchase teacher (data.labels [click, purchase]) trained embedded:
             each task's test AUC close to its oracle (the AUC of the true probabilities)
  jsonl      JSON lines with a click and a purchase-given-click label written by Python with a
             known signal, trained embedded with task weights; each task's test AUC near its
             oracle; --test-scores has a column per task, and their AUCs are the reported ones;
             a line without the second label is an error naming it (exit 2)
  cluster    the jsonl job submitted to a 3-node loopback cluster (ports 5740-5749): it succeeds
             and its task-weighted test AUC matches the embedded run's; its job record has each
             task's test AUC by label, near the embedded run's

usage: two_labels.py SATRAP WORKDIR SCENARIO"""
import json
import math
import os
import random
import shutil
import subprocess
import sys

SATRAP, WORK, SCENARIO = sys.argv[1:4]
SATRAP, WORK = os.path.abspath(SATRAP), os.path.abspath(WORK)


def run(*args, check=True):
    r = subprocess.run([SATRAP, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.exit("FAILED: satrap %s\nstdout:\n%s\nstderr:\n%s" % (" ".join(args), r.stdout, r.stderr))
    return r


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def auc(scores, labels):  # ties at mid-rank
    pairs = sorted(zip(scores, labels))
    ranks, i = [], 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        ranks += [(i + j + 1) / 2.0] * (j - i)
        i = j
    pos = sum(l for _, l in pairs)
    neg = len(pairs) - pos
    return (sum(r for r, (_, l) in zip(ranks, pairs) if l) - pos * (pos + 1) / 2) / (pos * neg)


def synthetic():
    r = run("train", "--labels", "click,purchase", "--task-weights", "1,1", "--train-batches",
            "600", "--test-batches", "100", "--json")
    out = last_json(r.stdout)
    tasks = out["tasks"]
    assert set(tasks) == {"click", "purchase"}, out
    for name, t in tasks.items():
        gap = t["oracle_auc"] - t["test_auc"]
        print("synthetic %s: test auc %.4f, oracle %.4f, gap %.4f" % (name, t["test_auc"],
                                                                     t["oracle_auc"], gap))
        assert gap < 0.035, out  # (measured 0.0216 and 0.0241 at 400 batches)
    mean = (tasks["click"]["test_auc"] + tasks["purchase"]["test_auc"]) / 2
    assert abs(out["test_auc"] - mean) < 1e-9, out  # the headline figure is the weighted mean
    assert "test: task purchase" in r.stdout


USER_EFFECT = [random.Random(u).gauss(0, 1.2) for u in range(300)]
ITEM_EFFECT = [random.Random(1000 + i).gauss(0, 1.2) for i in range(200)]


def write_jsonl(path, n, rng, oracle):
    # click: a user's and an item's own propensity and the price; a purchase given a click: the
    # price (strongly) and whether the item is of group 0.
    with open(path, "w") as f:
        for _ in range(n):
            user, item = rng.randrange(300), rng.randrange(200)
            price = round(rng.gauss(0, 1), 3)
            p = 1 / (1 + math.exp(-(USER_EFFECT[user] + ITEM_EFFECT[item] - 1.0 + 0.3 * price)))
            q = 1 / (1 + math.exp(-(0.5 - 1.5 * price - 1.0 * (item % 3 == 0))))
            click = rng.random() < p
            buy = click and rng.random() < q
            oracle.append((p, p * q, int(click), int(buy)))
            f.write(json.dumps({"click": int(click), "buy": buy, "user": user, "item": item,
                                "price": price}) + "\n")


def jsonl_job(name):
    rng = random.Random(4402)
    oracle = []
    write_jsonl(os.path.join(WORK, "train.jsonl"), 30000, rng, [])
    write_jsonl(os.path.join(WORK, "test.jsonl"), 6000, rng, oracle)
    path = os.path.join(WORK, name + ".yaml")
    with open(path, "w") as f:
        f.write("name: %s\nmodel: {dim: 8}\n"
                "data: {source: jsonl, labels: [click, buy], train_files: [train.jsonl],\n"
                "       test_files: [test.jsonl], cache_dir: cache,\n"
                "       features: [{name: user, kind: id}, {name: item, kind: id},\n"
                "                  {name: price, kind: dense}]}\n"
                "training: {batch_size: 256, train_batches: 0, epochs: 3, test_batches: 0,\n"
                "           staleness: 0, task_weights: [1, 0.5]}\n"
                "placement: {loaders: 2, trainers: 1}\n" % name)
    return path, oracle


def jsonl():
    job, oracle = jsonl_job("two-labels")
    scores = os.path.join(WORK, "scores.tsv")
    out = last_json(run("train", "--job", job, "--json", "--test-scores", scores).stdout)
    rows = [l.rstrip("\n").split("\t") for l in open(scores)]
    assert len(rows) == 6000 and all(len(r) == 2 for r in rows), rows[:3]
    for k, name in enumerate(["click", "buy"]):
        want = auc([p[k] for p in oracle], [p[2 + k] for p in oracle])
        got = out["tasks"][name]["test_auc"]
        mine = auc([float(r[k]) for r in rows], [p[2 + k] for p in oracle])
        print("jsonl %s: test auc %.4f (from the scores file %.4f), oracle %.4f" % (name, got, mine, want))
        assert abs(mine - got) < 2e-3, (name, mine, got)
        assert got > want - 0.03, (name, got, want)
    w = out["tasks"]
    assert abs(out["test_auc"] - (w["click"]["test_auc"] + 0.5 * w["buy"]["test_auc"]) / 1.5) < 1e-9
    # A line without the second label: the file, the line and the label's name.
    with open(os.path.join(WORK, "bad.jsonl"), "w") as f:
        f.write('{"click": 1, "buy": 0, "user": 1, "item": 2, "price": 0.5}\n')
        f.write('{"click": 1, "user": 1, "item": 2, "price": 0.5}\n')
    bad = os.path.join(WORK, "bad.yaml")
    with open(bad, "w") as f:
        f.write(open(job).read().replace("train_files: [train.jsonl]", "train_files: [bad.jsonl]"))
    r = run("train", "--job", bad, check=False)
    assert r.returncode == 2 and "bad.jsonl:2:" in r.stderr and "'buy'" in r.stderr, r.stderr


def cluster():
    base = 5740
    job, _ = jsonl_job("two-labels-cluster")
    manifest = os.path.join(WORK, "manifest.yaml")
    state = os.path.join(WORK, "state")
    shutil.rmtree(state, ignore_errors=True)
    with open(manifest, "w") as f:
        f.write("cluster: labels-%d\nhead: {host: 127.0.0.1, port: %d, status_port: %d}\n"
                "nodes:\n  - name: node-{i}\n    count: 3\n    host: 127.0.0.1\n    port: %d\n"
                "    resources: {cores: 2, memory: 4GiB, gpus: 0}\n" % (os.getpid(), base, base + 9, base + 1))
    common = ["--manifest", manifest, "--state-dir", state]
    try:
        run("up", *common, "--wait", "60")
        c = last_json(run("submit", job, "--follow", "--json", *common).stdout)
        e = last_json(run("train", "--job", job, "--json").stdout)
        assert c["state"] == "SUCCEEDED", c
        d = abs(c["test_auc"] - e["test_auc"])
        print("cluster: task-weighted test auc %.4f, embedded %.4f (|diff| %.4f)"
              % (c["test_auc"], e["test_auc"], d))
        assert d <= 0.01, (c, e)
        # The job's record (satrap jobs, /status) has each task's test AUC by label.
        assert set(c["task_test_auc"]) == {"click", "buy"}, c
        for name, auc in c["task_test_auc"].items():
            print("cluster: task %s test auc %.4f, embedded %.4f" % (name, auc, e["tasks"][name]["test_auc"]))
            assert abs(auc - e["tasks"][name]["test_auc"]) <= 0.02, (name, c, e)
    finally:
        run("down", *common, check=False)
        subprocess.run(["pkill", "-9", "-f", "--", "--state-dir " + state], check=False)


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)
{"synthetic": synthetic, "jsonl": jsonl, "cluster": cluster}[SCENARIO]()
print("two_labels %s: PASS" % SCENARIO)
