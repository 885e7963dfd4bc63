"""Reading a PyTorch checkpoint here (the opcode interpreter, no torch) against torch itself.

Saves a Llama-like state dict (bf16 matrices and fp32 norms; ``--layers`` layers of
``--width``-wide projections) with ``torch.save``, then times, interleaved so a busy machine
slows both alike:

* listing: ``list_tensors`` (every tensor's name, shape, dtype, checked against its storage)
  against ``torch.load(mmap=True, weights_only=True)`` (which also maps every storage);
* reading: ``load_for_analysis`` of every tensor (float32, in memory) against
  ``torch.load(weights_only=True)`` then ``.float()`` of each.

Prints seconds, the ratios (ours / torch) and checks every value equal.

    python bench/pytorch_load.py [--layers 4] [--width 1024] [--pairs 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from _timing import ratio
from quantscope.io import list_tensors, load_for_analysis, pytorch


def state_dict(layers: int, width: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    sd = {}
    for i in range(layers):
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            sd[f"model.layers.{i}.self_attn.{proj}.weight"] = torch.randn(
                width, width, generator=g).to(torch.bfloat16)
        for proj, shape in (("gate_proj", (4 * width, width)), ("up_proj", (4 * width, width)),
                            ("down_proj", (width, 4 * width))):
            sd[f"model.layers.{i}.mlp.{proj}.weight"] = torch.randn(
                *shape, generator=g).to(torch.bfloat16)
        sd[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(width)
    return sd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sd = state_dict(args.layers, args.width)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        torch.save(sd, path)
        size = path.stat().st_size
        print(f"checkpoint: {len(sd)} tensors, {size / 2**20:.1f} MiB ({path.name})")

        def ours_list():
            pytorch._CACHE.clear()  # parse the pickle every time, as a first open does
            return list_tensors(path)

        def torch_list():
            return torch.load(path, mmap=True, weights_only=True)

        def ours_read():
            pytorch._CACHE.clear()
            return [load_for_analysis(path, name)[0] for name in sd]

        def torch_read():
            loaded = torch.load(path, weights_only=True)
            return [t.float() for t in loaded.values()]

        compared = 0
        for name, x in zip(sd, ours_read(), strict=True):
            assert np.array_equal(x, sd[name].float().numpy()), name
            compared += x.size
        print(f"values compared: {compared:,}, mismatches: 0")
        for label, fn, base in (("list", ours_list, torch_list),
                                ("read float32", ours_read, torch_read)):
            med, lo, hi, t_ours, t_torch = ratio(fn, base, args.pairs)
            print(f"{label:13s} quantscope {t_ours * 1e3:8.1f} ms   torch {t_torch * 1e3:8.1f} ms"
                  f"   ratio {med:.2f} (range {lo:.2f}-{hi:.2f})")


if __name__ == "__main__":
    main()
