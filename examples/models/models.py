"""Dense networks a team brings to satrap, in plain PyTorch.

satrap's contract (README "Your model", models/dense/torchscript.hpp):

    forward(self, dense: Tensor, embeddings: Tensor) -> Tensor
        dense       float32 [B, D]     the batch's dense features
        embeddings  float32 [B, S, E]  the pooled embedding of each of the S sparse features
        returns     float32 [B]        one logit per sample (loss: binary cross-entropy)

With unpooled sequences (data.features' `pooling: none`, or data.synthetic.history_pooling none)
forward takes two more arguments (see DIN below):

    forward(self, dense, embeddings, sequences: List[Tensor], lengths: Tensor) -> Tensor
        sequences   K x float32 [B, L_k, E]  each sequence's item embeddings, oldest first, zeros
                                             past its length
        lengths     int64 [B, K]             each sequence's length

satrap owns the embeddings (sharded, trained asynchronously); the module owns everything after
them. Script a module with script.py (or torch.jit.script(module).save(path)) and train it with
`satrap train --model-type torchscript --model-file PATH`.
"""
from typing import List

import torch
from torch import nn


def mlp(sizes: List[int], last_relu: bool) -> nn.Sequential:
    layers: List[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """DLRM (Naumov et al. 2019), the same network as satrap's built-in `model.type dlrm`:
    a bottom MLP takes the dense features to an embedding-sized vector x; the interaction is
    [x, the pairwise dots of (x, e_1..e_S), i < j] ('dot'), with the raw embeddings beside it
    ('dot_cat', satrap's default job); a top MLP (hidden sizes `top`, then 1) gives the logit."""

    def __init__(self, dense_features: int, slots: int, dim: int, bottom: List[int] = [32],
                 top: List[int] = [], interaction: str = "dot_cat"):
        super().__init__()
        self.bottom = mlp([dense_features] + bottom + [dim], last_relu=False)
        n = slots + 1
        iu = torch.triu_indices(n, n, offset=1)
        self.register_buffer("rows", iu[0])
        self.register_buffer("cols", iu[1])
        self.cat = interaction == "dot_cat"
        width = dim + n * (n - 1) // 2 + (slots * dim if self.cat else 0)
        self.top = mlp([width] + top + [1], last_relu=False)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        t = torch.cat([x.unsqueeze(1), embeddings], dim=1)  # [B, S+1, E]
        z = torch.bmm(t, t.transpose(1, 2))[:, self.rows, self.cols]  # pairwise dots, i < j
        parts = [x, z]
        if self.cat:
            parts.append(embeddings.flatten(1))
        return self.top(torch.cat(parts, dim=1)).squeeze(1)


class DCNv2(nn.Module):
    """DCN-v2 (Wang et al. 2021), stacked: x0 = [bottom(dense), e_1..e_S]; full-rank cross
    layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l; then a deep MLP to the logit."""

    def __init__(self, dense_features: int, slots: int, dim: int, bottom: List[int] = [32],
                 cross_layers: int = 3, top: List[int] = [64, 32]):
        super().__init__()
        self.bottom = mlp([dense_features] + bottom + [dim], last_relu=False)
        width = (slots + 1) * dim
        self.cross = nn.ModuleList([nn.Linear(width, width) for _ in range(cross_layers)])
        self.deep = mlp([width] + top + [1], last_relu=False)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        x0 = torch.cat([self.bottom(dense), embeddings.flatten(1)], dim=1)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        return self.deep(x).squeeze(1)


class AttentionPool(nn.Module):
    """Self-attention over the fields (AutoInt-style, one layer, several heads) before an MLP:
    a network none of satrap's built-in models has."""

    def __init__(self, dense_features: int, slots: int, dim: int, bottom: List[int] = [32],
                 heads: int = 2, top: List[int] = [64, 32]):
        super().__init__()
        self.bottom = mlp([dense_features] + bottom + [dim], last_relu=False)
        self.attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.deep = mlp([(slots + 1) * dim] + top + [1], last_relu=False)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        t = torch.cat([self.bottom(dense).unsqueeze(1), embeddings], dim=1)
        a, _ = self.attention(t, t, t, need_weights=False)
        t = self.norm(t + a)
        return self.deep(t.flatten(1)).squeeze(1)


class DIN(nn.Module):
    """Deep Interest Network (Zhou et al. 2018) on DLRM: each sequence (a user's past items) is
    pooled by attention to the candidate item (pooled slot `target`): a small MLP scores every
    past item from [q, k, q - k, q * k] (q the candidate's embedding, k the item's), the scores
    past the sequence's length are masked, and their softmax weighs the items. The attended
    vectors join the pooled embeddings as fields of a DLRM (dot interaction and the raw
    embeddings, then the top MLP)."""

    def __init__(self, dense_features: int, slots: int, dim: int, sequences: List[int] = [20],
                 target: int = 1, bottom: List[int] = [32], top: List[int] = [64, 32],
                 attention: List[int] = [32]):
        super().__init__()
        self.target = target
        self.bottom = mlp([dense_features] + bottom + [dim], last_relu=False)
        self.score = mlp([4 * dim] + attention + [1], last_relu=False)
        fields = slots + len(sequences)
        n = fields + 1
        iu = torch.triu_indices(n, n, offset=1)
        self.register_buffer("rows", iu[0])
        self.register_buffer("cols", iu[1])
        self.top = mlp([dim + n * (n - 1) // 2 + fields * dim] + top + [1], last_relu=False)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor, sequences: List[torch.Tensor],
                lengths: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        q = embeddings[:, self.target]
        fields = [embeddings]
        for k, seq in enumerate(sequences):
            positions = seq.size(1)
            qk = q.unsqueeze(1).expand(-1, positions, -1)
            s = self.score(torch.cat([qk, seq, qk - seq, qk * seq], dim=2)).squeeze(2)
            mask = torch.arange(positions, device=seq.device).unsqueeze(0) < lengths[:, k:k + 1]
            w = torch.softmax(s.masked_fill(~mask, -1e9), dim=1) * mask  # none if empty
            fields.append((w.unsqueeze(2) * seq).sum(1).unsqueeze(1))
        e = torch.cat(fields, dim=1)  # [B, S + K, E]
        t = torch.cat([x.unsqueeze(1), e], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.rows, self.cols]
        return self.top(torch.cat([x, z, e.flatten(1)], dim=1)).squeeze(1)


MODELS = {"dlrm": DLRM, "dcn_v2": DCNv2, "attention": AttentionPool, "din": DIN}
