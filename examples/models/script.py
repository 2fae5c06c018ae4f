#!/usr/bin/env python3
"""Scripts one of the example models (models.py) into a TorchScript file satrap trains.

    /usr/bin/python3 examples/models/script.py dlrm -o dlrm.pt \\
        --dense-features 13 --slots 8 --dim 16
    satrap train --model-type torchscript --model-file dlrm.pt

The shapes must be the job's: --dense-features and --slots as the data has them (the default
synthetic data: 13 and 8; Criteo: 13 and 26; Frappe libsvm: 1 and 10), --dim as model.dim.
--seed fixes the initial weights (every satrap trainer starts from the file's).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402


def sizes(text):
    return [int(x) for x in text.split(",") if x]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", choices=sorted(MODELS))
    p.add_argument("-o", "--output", required=True, help="the TorchScript file to write")
    p.add_argument("--dense-features", type=int, default=13)
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--bottom", type=sizes, default=None, help="hidden sizes, e.g. 32")
    p.add_argument("--top", type=sizes, default=None, help="hidden sizes, e.g. 64,32 ('' for none)")
    p.add_argument("--interaction", choices=["dot", "dot_cat"], default=None, help="dlrm only")
    p.add_argument("--sequences", type=sizes, default=None,
                   help="din: each unpooled sequence's max_length, e.g. 20 (the job's slots then "
                        "count the pooled features only, --dense-features the dense ones only)")
    p.add_argument("--target", type=int, default=None,
                   help="din: the pooled slot of the candidate item (default 1)")
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    kwargs = {}
    if a.bottom is not None:
        kwargs["bottom"] = a.bottom
    if a.top is not None:
        kwargs["top"] = a.top
    if a.interaction is not None:
        if a.model != "dlrm":
            p.error("--interaction is for dlrm")
        kwargs["interaction"] = a.interaction
    for key in ("sequences", "target"):
        if getattr(a, key) is not None:
            if a.model != "din":
                p.error(f"--{key} is for din")
            kwargs[key] = getattr(a, key)
    module = MODELS[a.model](a.dense_features, a.slots, a.dim, **kwargs)
    scripted = torch.jit.script(module)
    scripted.save(a.output)
    params = sum(t.numel() for t in module.parameters())
    seqs = "".join(f", sequence [B, {n}, {a.dim}]" for n in kwargs.get("sequences", []))
    print(f"{a.output}: {a.model}, {params} parameters, dense [B, {a.dense_features}], "
          f"embeddings [B, {a.slots}, {a.dim}]{seqs} -> logits [B]")


if __name__ == "__main__":
    main()
