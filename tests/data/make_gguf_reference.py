"""Record llama.cpp's own bytes for the GGUF block types, for tests/core/test_gguf_reference.py.

Building llama.cpp in CI would take longer than the rest of the suite, so its reference
quantizers ran here once and their output is committed as ``gguf_reference.npz``. To re-record:

1. ``pip download llama-cpp-python==0.3.36 --no-binary :all: --no-deps -d /tmp/l`` and unpack
   it (the sdist vendors llama.cpp; ``ggml-quants.c`` there had SHA-256
   ``7878680cc60493f98469a116e9b14af8b84789292ccf891c249230b2fa3d157f`` when recorded);
2. build ggml's quantizers alone, without ``-march`` (as the ggml-base library is built: no
   fused multiply-add) and with ``-DNDEBUG`` (a release build)::

       G=/tmp/l/llama_cpp_python-0.3.36/vendor/llama.cpp/ggml
       gcc -O2 -DNDEBUG -fPIC -shared -std=gnu11 -I$G/include -I$G/src \\
           $G/src/ggml-quants.c stubs.c -lm -o libggml_quants.so

   where ``stubs.c`` defines the four symbols the file needs from ggml.c and the reference
   quantizers never call (``ggml_abort``, ``ggml_row_size``, ``ggml_type_name``,
   ``ggml_type_size``; see :data:`STUBS`);
3. ``python tests/data/make_gguf_reference.py /path/to/libggml_quants.so``.

What is recorded, per case and per type: the bytes of ``quantize_row_<type>_ref`` (no
importance matrix) and the SHA-256 of ``dequantize_row_<type>`` applied to them. The cases are
three bundled MiniLM tensors (taken from the package's resources by name, not stored again)
and constructed ones whose values are stored: zeros, constant blocks, huge and tiny
magnitudes, subnormals, one outlier per block, values exactly on the rounding ties of each
type, integer grids, one-signed blocks, and scales that overflow float16.
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("gguf_reference.npz")

#: ggml names and (block elements, bytes per block) of the recorded types.
TYPES = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
         "q8_0": (32, 34), "q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144),
         "q5_K": (256, 176), "q6_K": (256, 210)}

#: The real tensors: bundled sample name -> elements recorded (a prefix of the flat tensor).
REAL = {"query_weight": 147456, "gelu_activations": 65536, "ffn_weight": 65536}

STUBS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
void ggml_abort(const char *file, int line, const char *fmt, ...) { abort(); }
size_t ggml_row_size(int type, long ne) { abort(); }
const char *ggml_type_name(int type) { return "?"; }
size_t ggml_type_size(int type) { abort(); }
"""


def constructed() -> dict[str, np.ndarray]:
    """The edge cases, 512 or more float32 values each (a multiple of 256)."""
    rng = np.random.default_rng(20261204)
    c: dict[str, np.ndarray] = {}
    c["zeros"] = np.zeros(512, np.float32)
    c["constant"] = np.full(512, 0.37, np.float32)
    c["negative_constant"] = np.full(512, -2.5, np.float32)
    c["huge"] = (rng.standard_normal(512) * 1e4).astype(np.float32)
    c["tiny"] = (rng.standard_normal(512) * 1e-6).astype(np.float32)
    c["subnormal"] = (rng.standard_normal(512) * 1e-39).astype(np.float32)
    o = (rng.standard_normal(512) * 0.01).astype(np.float32)
    o[5::32] = 50.0
    o[300] = -80.0
    c["one_outlier_per_block"] = o
    # scaled codes exactly on .5 for each scale rule: d = 8 (Q4_0), 16 (Q5_0), 127 (Q8_0)...
    c["ties_quarter_steps"] = np.tile(np.arange(-8, 8, dtype=np.float32) + 0.5, 32)
    c["ties_q8"] = np.concatenate([np.tile(np.float32([-127.0, 0.5, 1.5, -2.5, 126.5, 3.5,
                                                       -0.5, 64.5]), 32),
                                   np.tile(np.float32([127.0, -63.5, 2.5, 0.5]), 64)])
    c["ties_q4"] = np.tile(np.float32([-8.0, 0.5, 1.5, 2.5, -3.5, 6.5, -7.5, 4.0]), 64)
    c["integers"] = np.tile(np.arange(-16, 16, dtype=np.float32), 16)
    c["ramp"] = (np.arange(512, dtype=np.float32) - 256) / 8
    c["positive_only"] = np.abs(rng.standard_normal(512)).astype(np.float32)
    c["negative_only"] = -np.abs(rng.standard_normal(512)).astype(np.float32)
    one = np.zeros(512, np.float32)
    one[17] = 3.0
    one[300] = -1e-3
    c["one_nonzero_per_block"] = one
    c["mixed_magnitudes"] = (rng.standard_normal(1024) * np.repeat(
        np.float32([1e-4, 1.0, 30.0, 1e-8]), 256)).astype(np.float32)
    c["float16_overflow"] = (rng.standard_normal(512) * 1e8).astype(np.float32)
    # the sub-block searches run on many sub-blocks at once (the lanes of
    # quantscope.core.formats.gguf_lanes), so: trials whose codes, and so errors, are equal
    # (the first must win), and sub-blocks side by side that settle after different numbers
    # of Q3_K sweeps, or have no range at all
    more = np.random.default_rng(20261205)
    c["equal_error_trials"] = (more.integers(-16, 16, 1024) / 8).astype(np.float32)
    mixed = (more.standard_normal(4096) * 0.02).astype(np.float32).reshape(-1, 16)
    mixed[::7] = 0.0
    mixed[3::11] = 0.25
    mixed[5::13] = np.float32(more.integers(-4, 4, 16))
    mixed[2::9, 3] = 1.5
    c["lanes_side_by_side"] = mixed.reshape(-1)
    return c


def real(name: str) -> np.ndarray:
    from quantscope.io.samples import sample_path

    return np.load(sample_path(name)).astype(np.float32).reshape(-1)[:REAL[name]]


def record(lib: ctypes.CDLL, name: str, x: np.ndarray) -> tuple[np.ndarray, str]:
    block, size = TYPES[name]
    x = np.ascontiguousarray(x, np.float32)
    out = np.zeros(x.size // block * size, np.uint8)
    getattr(lib, f"quantize_row_{name}_ref")(x.ctypes.data_as(ctypes.c_void_p),
                                             out.ctypes.data_as(ctypes.c_void_p),
                                             ctypes.c_int64(x.size))
    back = np.zeros(x.size, np.float32)
    getattr(lib, f"dequantize_row_{name}")(out.ctypes.data_as(ctypes.c_void_p),
                                           back.ctypes.data_as(ctypes.c_void_p),
                                           ctypes.c_int64(x.size))
    return out, hashlib.sha256(back.tobytes()).hexdigest()


def main(lib_path: str) -> None:
    lib = ctypes.CDLL(lib_path)
    arrays: dict[str, np.ndarray] = {}
    cases = {f"real:{k}": real(k) for k in REAL}
    cases.update({f"edge:{k}": v for k, v in constructed().items()})
    for case, x in cases.items():
        if case.startswith("edge:"):
            arrays[f"{case}/input"] = x
        arrays[f"{case}/input_sha256"] = np.array(hashlib.sha256(x.tobytes()).hexdigest())
        for name in TYPES:
            blob, digest = record(lib, name, x)
            arrays[f"{case}/{name}"] = blob
            arrays[f"{case}/{name}/dequantized_sha256"] = np.array(digest)
    np.savez_compressed(OUT, **arrays)
    print(f"{OUT.name}: {len(cases)} cases x {len(TYPES)} types, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
