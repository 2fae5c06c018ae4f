"""Dense networks a team brings to satrap, in plain PyTorch.

satrap's contract (README "Your model", models/dense/torchscript.hpp):

    forward(self, dense: Tensor, embeddings: Tensor) -> Tensor
        dense       float32 [B, D]     the batch's dense features
        embeddings  float32 [B, S, E]  the pooled embedding of each of the S sparse features
        returns     float32 [B]        one logit per sample (loss: binary cross-entropy)

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


MODELS = {"dlrm": DLRM, "dcn_v2": DCNv2, "attention": AttentionPool}
