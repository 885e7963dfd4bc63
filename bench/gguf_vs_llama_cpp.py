"""llama.cpp's own C quantizers beside quantscope's, on this machine: processor time per
element of each GGUF type's reference quantizer (``quantize_row_*_ref``) and of
:func:`quantscope.core.formats.gguf.encode` (one thread), and whether the bytes are equal, on a
Llama-like MLP weight and a heavy-tailed tensor.

Run: ``PYTHONPATH=src python bench/gguf_vs_llama_cpp.py /path/to/libggml_quants.so [--rows R]``
with the library built as ``tests/data/make_gguf_reference.py`` describes (ggml-quants.c of
the vendored llama.cpp, ``gcc -O2 -DNDEBUG``, no ``-march``). Processor time, not wall time:
on a shared machine it is the figure other processes do not inflate.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import ctypes  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from llm_formats import llama_mlp_weight  # noqa: E402
from quantscope.core.formats.gguf import GGUF_TYPES  # noqa: E402
from quantscope.core.formats.gguf_kernel import encode_blocks  # noqa: E402
from quantscope.core.kernels.read_only import read_only  # noqa: E402


def c_quantizer(lib, ggml_name: str):
    """``quantize_row_<type>_ref`` (llama.cpp spells the k-quants ``q4_K``)."""
    name = ggml_name.lower()
    if name.endswith("_k"):
        name = name[:-1] + "K"
    fn = getattr(lib, f"quantize_row_{name}_ref")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lib")
    ap.add_argument("--rows", type=int, default=2048)
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    rng = np.random.default_rng(1)
    tensors = {"llama-like": llama_mlp_weight(args.rows, 4096),
               "student-t": (rng.standard_t(2, (args.rows // 4, 4096))
                             * rng.uniform(1e-4, 10, (args.rows // 4, 1))).astype(np.float32)}
    print(f"{'type':10s} {'llama.cpp C':>12s} {'quantscope':>12s} {'ratio':>6s}  bytes")
    for name, t in GGUF_TYPES.items():
        fn = c_quantizer(lib, t.ggml_name)
        tc = tq = 0.0
        n = bad = 0
        for x in tensors.values():
            flat = np.ascontiguousarray(x.reshape(-1))
            ref = np.empty((flat.size // t.block, t.type_size), np.uint8)
            mine = np.empty_like(ref)
            xb = read_only(flat.reshape(-1, t.block))  # the loop the engine hands it
            encode_blocks(t.ggml_type, xb[:2], mine[:2])  # compiled or loaded before timing
            c = time.process_time()
            fn(flat.ctypes.data, ref.ctypes.data, flat.size)
            tc += time.process_time() - c
            c = time.process_time()
            encode_blocks(t.ggml_type, xb, mine)
            tq += time.process_time() - c
            n += flat.size
            bad += int((mine != ref).any(axis=1).sum())
        print(f"{name:10s} {tc / n * 1e9:9.1f} ns {tq / n * 1e9:9.1f} ns {tq / tc:6.2f}  "
              f"{bad} of {n // t.block} blocks differ", flush=True)


if __name__ == "__main__":
    main()
