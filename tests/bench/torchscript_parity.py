#!/usr/bin/python3
"""Accuracy parity of a PyTorch module trained by satrap against the same module trained by a plain
PyTorch loop (issue 43): the DLRM of examples/models/models.py, scripted once; satrap trains that
file (model.type torchscript, 1 trainer, staleness 0: synchronous), the loop trains the same file
(torch.jit.load: the same initial dense weights; one file per seed, paired) with nn.EmbeddingBag tables (sparse gradients),
on the same rows in the same order, with the same optimizers (Adagrad on both parts, the same
rates, accumulators starting at 0, eps 1e-8) and embedding init (uniform +-0.01). Prints both
test AUCs and their difference (goal: |diff| <= 0.002).

usage: tests/bench/torchscript_parity.py [synthetic|frappe] [--epochs N]
  synthetic: Criteo-format files from satrap's synthetic teacher (`satrap gen-criteo`), 26 slots
  frappe:    ../shared/data/frappe (train frappe.validation.libfm, test frappe.test.libfm), 10 fields
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SATRAP = os.environ.get("SATRAP_BIN", os.path.join(root, "build", "bin", "satrap"))
FRAPPE = os.path.join(root, "..", "shared", "data", "frappe")
FRAPPE_STARTS = [0, 957, 5039, 5046, 5053, 5055, 5058, 5060, 5069, 5149]


def auc(labels, scores):
    order = np.argsort(scores, kind="mergesort")
    s = np.asarray(scores)[order]
    y = np.asarray(labels)[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):  # average ranks of ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    pos = y.sum()
    neg = len(y) - pos
    return (ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg)


def read_criteo(path, vocab):
    dense, ids, labels = [], [], []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        labels.append(float(f[0]))
        dense.append([math.log1p(float(x)) if x and float(x) > 0 else 0.0 for x in f[1:14]])
        row = []
        for s, v in enumerate(f[14:40]):
            row.append(vocab[s].setdefault(v, len(vocab[s])))
        ids.append(row)
    return np.array(dense, np.float32), np.array(ids, np.int64), np.array(labels, np.float32)


def read_frappe(path, vocab):
    dense, ids, labels = [], [], []
    for line in open(path):
        t = line.split()
        labels.append(1.0 if float(t[0]) > 0 else 0.0)
        row = [0] * len(FRAPPE_STARTS)
        for item in t[1:]:
            g = int(item.split(":")[0])
            s = max(k for k, start in enumerate(FRAPPE_STARTS) if g >= start)
            row[s] = vocab[s].setdefault(g, len(vocab[s]))
        ids.append(row)
        dense.append([1.0])  # satrap gives formats without dense features one constant 1.0
    return np.array(dense, np.float32), np.array(ids, np.int64), np.array(labels, np.float32)


def torch_loop(module_path, train, test, slots, dim, epochs, batch, lr_dense, lr_emb, threads, seed):
    torch.set_num_threads(threads)
    torch.manual_seed(seed)  # the embedding tables' initial rows (the module's are the file's)
    model = torch.jit.load(module_path)
    dense_tr, ids_tr, y_tr = train
    dense_te, ids_te, y_te = test
    rows = [int(max(ids_tr[:, s].max(), ids_te[:, s].max())) + 1 for s in range(slots)]
    tables = [torch.nn.EmbeddingBag(r, dim, mode="sum", sparse=True) for r in rows]
    for t in tables:
        torch.nn.init.uniform_(t.weight, -0.01, 0.01)
    opt_d = torch.optim.Adagrad(model.parameters(), lr=lr_dense, eps=1e-8)
    opt_s = torch.optim.Adagrad([t.weight for t in tables], lr=lr_emb, eps=1e-8)
    n = len(y_tr)
    start = time.perf_counter()

    def pooled(ids):
        offs = torch.arange(ids.shape[0])
        return torch.stack([tables[s](torch.from_numpy(ids[:, s]), offs) for s in range(slots)], 1)

    for _ in range(epochs):
        model.train()
        for a in range(0, n - batch + 1, batch):  # full batches, as satrap's training stream
            d = torch.from_numpy(dense_tr[a:a + batch])
            y = torch.from_numpy(y_tr[a:a + batch])
            opt_d.zero_grad()
            opt_s.zero_grad()
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(d, pooled(ids_tr[a:a + batch])), y)
            loss.backward()
            opt_d.step()
            opt_s.step()
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        z = torch.cat([model(torch.from_numpy(dense_te[a:a + 4096]), pooled(ids_te[a:a + 4096]))
                       for a in range(0, len(y_te), 4096)])
    return auc(y_te, z.numpy()), (n // batch) * batch * epochs / seconds


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default="synthetic", choices=["synthetic", "frappe"])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--train-samples", type=int, default=200000)
    p.add_argument("--seeds", type=int, default=3,
                   help="paired runs: per seed one module file (both sides) and torch's table init")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="satrap-parity-")
    batch, dim, lr_dense, lr_emb = 256, 16, 0.05, 0.05
    if a.data == "synthetic":
        subprocess.run([SATRAP, "gen-criteo", "--out", work, "--train-samples", str(a.train_samples),
                        "--test-samples", "40000", "--files", "1"], check=True, capture_output=True)
        train_f, test_f = os.path.join(work, "train-0.txt"), os.path.join(work, "test.txt")
        slots, dense_n = 26, 13
        vocab = [dict() for _ in range(slots)]
        train, test = read_criteo(train_f, vocab), read_criteo(test_f, vocab)
        data_yaml = "  source: criteo\n"
    else:
        train_f = os.path.join(FRAPPE, "frappe.validation.libfm")
        test_f = os.path.join(FRAPPE, "frappe.test.libfm")
        if not os.path.exists(train_f):
            print("frappe data not found under " + FRAPPE + ": skipped")
            return 77
        slots, dense_n = 10, 1
        vocab = [dict() for _ in range(slots)]
        train, test = read_frappe(train_f, vocab), read_frappe(test_f, vocab)
        data_yaml = "  source: libfm\n  field_starts: %s\n" % FRAPPE_STARTS
    results = []
    for seed in range(a.seeds):
        module = os.path.join(work, "dlrm-%d.pt" % seed)
        subprocess.run(["/usr/bin/python3", os.path.join(root, "examples", "models", "script.py"),
                        "dlrm", "-o", module, "--dense-features", str(dense_n), "--slots", str(slots),
                        "--dim", str(dim), "--bottom", "32", "--top", "64,32", "--interaction", "dot",
                        "--seed", str(seed)], check=True, capture_output=True)
        job = os.path.join(work, "job.yaml")
        with open(job, "w") as f:
            f.write("name: parity\ndata:\n%s  train_files: [%s]\n  test_files: [%s]\n  shuffle: false\n"
                    "  cache_dir: %s\n" % (data_yaml, train_f, test_f, os.path.join(work, "cache")))
            f.write("model:\n  type: torchscript\n  file: %s\n  dim: %d\n"
                    "  dense_optimizer: {kind: adagrad, learning_rate: %g, eps: 1e-8, ema_decay: 0}\n"
                    "  embedding: {optimizer: adagrad, learning_rate: %g, initial_accumulator: 0,"
                    " eps: 1e-8, init: uniform, init_scale: 0.01}\n" % (module, dim, lr_dense, lr_emb))
            f.write("training: {batch_size: %d, train_batches: 0, epochs: %d, test_batches: 0, staleness: 0}\n"
                    "placement: {shards: 1, aggregators: 1, loaders: 1, trainers: 1}\n" % (batch, a.epochs))
        r = subprocess.run([SATRAP, "train", "--job", job, "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("satrap failed:\n" + r.stderr)
        s = json.loads(r.stdout.strip().splitlines()[-1])
        t_auc, t_sps = torch_loop(module, train, test, slots, dim, a.epochs, batch, lr_dense, lr_emb,
                                  1, seed)
        results.append((s["test_auc"], t_auc, s["samples_per_sec"], t_sps))
        print("seed %d: satrap test_auc=%.4f (%.0f samples/s)  torch test_auc=%.4f (%.0f samples/s, "
              "1 thread)  diff=%+.4f" % (seed, s["test_auc"], s["samples_per_sec"], t_auc, t_sps,
                                         s["test_auc"] - t_auc), flush=True)
    params = sum(x.numel() for x in torch.jit.load(module).parameters())
    print("model: DLRM dense %d, %d slots x dim %d, bottom 32, dot, top 64-32-1: %d dense parameters "
          "(one TorchScript file per seed for both sides)" % (dense_n, slots, dim, params))
    print("data: %s, %d train / %d test samples, %d epoch(s), batch %d"
          % (a.data, len(train[2]), len(test[2]), a.epochs, batch))
    sa, ta = np.mean([r[0] for r in results]), np.mean([r[1] for r in results])
    print("satrap_auc=%.4f torch_auc=%.4f auc_diff=%+.4f (means over %d seeds; goal |diff| <= 0.002)"
          % (sa, ta, sa - ta, len(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
