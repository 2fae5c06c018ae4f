#!/usr/bin/python3
"""PyTorch CPU DLRM with multi-hot bags: the model a user would write with nn.EmbeddingBag.

The shape of ../shared/bench/torch_dlrm.py (13 dense features, 26 tables, dot interaction,
bottom MLP 13-512-256-64-dim, top MLP 512-256-1, Adagrad on both sides, sparse embedding
gradients), but each table's bag holds several ids: --hotness gives one bag size per table
(default: MLPerf DLRM-v2's profile, 214 ids a sample), pooled by sum. Ids are Zipf(1.1). Prints
the shapes, then samples/s.
"""
import argparse, time, torch, numpy as np

MLPERF_HOTNESS = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=1_000_000)
p.add_argument("--batch", type=int, default=2048)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--dim", type=int, default=16)
p.add_argument("--hotness", default=",".join(map(str, MLPERF_HOTNESS)))
a = p.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(0)
H = [int(x) for x in a.hotness.split(",")]
S, D, E = len(H), 13, a.dim


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


class DLRM(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = torch.nn.ModuleList(
            [torch.nn.EmbeddingBag(a.rows, E, mode="sum", sparse=True) for _ in range(S)])
        s.bot = mlp([D, 512, 256, 64, E])
        n = S + 1
        s.top = mlp([E + n * (n - 1) // 2, 512, 256, 1])
        s.li, s.lj = torch.tril_indices(n, n, -1)

    def forward(s, dense, ids, offs):
        x = s.bot(dense)
        ys = [x] + [s.emb[k](ids[k], offs[k]) for k in range(S)]
        T = torch.stack(ys, 1)
        Z = torch.bmm(T, T.transpose(1, 2))[:, s.li, s.lj]
        return s.top(torch.cat([x, Z], 1)).squeeze(1)


m = DLRM()
sparse_p = [p for e in m.emb for p in e.parameters()]
dense_p = list(m.bot.parameters()) + list(m.top.parameters())
opt_s = torch.optim.Adagrad(sparse_p, lr=0.05)
opt_d = torch.optim.Adagrad(dense_p, lr=0.05)
rng = np.random.default_rng(0)


def batch():
    ids = [torch.from_numpy((rng.zipf(1.1, a.batch * h) % a.rows).astype(np.int64)) for h in H]
    offs = [torch.arange(0, a.batch * h, h) for h in H]
    return torch.randn(a.batch, D), ids, offs, torch.randint(0, 2, (a.batch,)).float()


bs = [batch() for _ in range(4)]
lossf = torch.nn.BCEWithLogitsLoss()


def step(b):
    dense, ids, offs, y = b
    opt_s.zero_grad()
    opt_d.zero_grad()
    l = lossf(m(dense, ids, offs), y)
    l.backward()
    opt_s.step()
    opt_d.step()


dense_params = sum(p.numel() for p in dense_p)
print(f"shapes: tables={S} ids/sample={sum(H)} hotness={H} dim={E} rows/table={a.rows} "
      f"dense_params={dense_params} batch={a.batch}")
for i in range(2):
    step(bs[i % 4])
t0 = time.perf_counter()
for i in range(a.steps):
    step(bs[i % 4])
dt = time.perf_counter() - t0
print(f"torch {torch.__version__} threads={a.threads}: {a.steps * a.batch / dt:.0f} samples/s")
