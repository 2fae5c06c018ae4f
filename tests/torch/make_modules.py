#!/usr/bin/env python3
"""Writes the TorchScript files the torch tests use into OUT_DIR: the examples at the tiny job's
shapes (dense 13, slots 4, dim 16) and at the default job's (slots 8), and one module per way a
module can break satrap's contract (models/dense/torchscript.hpp).
usage: make_modules.py OUT_DIR   (exit 77 when this python has no torch)"""
import os
import sys
import zipfile

try:
    import torch
    from torch import nn
except ImportError:
    print("make_modules: no torch in " + sys.executable + "; skipped")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "examples", "models"))
from models import DLRM, DCNv2, AttentionPool, DIN  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(module, name):
    torch.jit.script(module).save(os.path.join(out, name))


for slots in (4, 8):
    torch.manual_seed(7)
    save(DLRM(13, slots, 16), f"dlrm_s{slots}.pt")
    torch.manual_seed(7)
    save(DLRM(13, slots, 16, bottom=[32], top=[64, 32], interaction="dot"), f"dlrm_dot_s{slots}.pt")
    torch.manual_seed(7)
    save(DCNv2(13, slots, 16), f"dcn_v2_s{slots}.pt")
    torch.manual_seed(7)
    save(AttentionPool(13, slots, 16), f"attention_s{slots}.pt")


# Unpooled sequences: DIN over 4 pooled slots and one sequence of 5 positions.
torch.manual_seed(7)
save(DIN(13, 4, 16, sequences=[5]), "din_s4_l5.pt")
torch.manual_seed(7)
save(DIN(1, 3, 16, sequences=[5]), "din_d1_s3_l5.pt")  # torchscript_job.py's JSON lines job


class ThreeArgs(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13, 1)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor, extra: torch.Tensor):
        return self.w(dense).squeeze(1)


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13 + 4 * 16, 2)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        return self.w(torch.cat([dense, embeddings.flatten(1)], 1))


class WrongShape(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13, 1)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        return self.w(dense).reshape(1, -1)  # [1, B]


class Double(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13, 1).double()

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        return self.w(dense.double()).squeeze(1).float()


class Tuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13, 1)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        y = self.w(dense).squeeze(1)
        return (y, y)


class NoGradient(nn.Module):
    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        return torch.zeros(dense.shape[0])


class WrongDims(nn.Module):  # made for 26 slots: fails inside forward on 4
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13 + 26 * 16, 1)

    def forward(self, dense: torch.Tensor, embeddings: torch.Tensor):
        return self.w(torch.cat([dense, embeddings.flatten(1)], 1)).squeeze(1)


class IntArg(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(13, 1)

    def forward(self, dense: torch.Tensor, slots: int):
        return self.w(dense).squeeze(1)


for cls, name in [(ThreeArgs, "bad_three_args"), (TwoOutputs, "bad_two_outputs"),
                  (WrongShape, "bad_shape"), (Double, "bad_double"), (Tuple, "bad_tuple"),
                  (NoGradient, "bad_no_gradient"), (WrongDims, "bad_dims"),
                  (IntArg, "bad_int_arg")]:
    save(cls(), name + ".pt")

with open(os.path.join(out, "bad_corrupt.pt"), "wb") as f:
    f.write(b"this is not a zip archive\n" * 10)

# An archive from a "newer torch": the same zip with its version record raised past what any
# libtorch of this age reads.
src = os.path.join(out, "dlrm_s4.pt")
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(out, "bad_newer.pt"), "w",
                                                   zipfile.ZIP_STORED) as zout:
    for item in zin.infolist():
        data = zin.read(item.filename)
        if item.filename.endswith("/version"):
            data = b"99\n"
        zout.writestr(item, data)
print("make_modules: wrote", len(os.listdir(out)), "files to", out)
