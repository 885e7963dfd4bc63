"""The GGUF block types against llama.cpp and gguf-py.

* llama.cpp's ``quantize_row_*_ref`` bytes, recorded by tests/data/make_gguf_reference.py on
  the bundled MiniLM tensors and on constructed edge cases: ours must equal them block for
  block (0 mismatching blocks, every type), and llama.cpp's own ``dequantize_row_*`` output
  (its SHA-256) must equal our decoding;
* gguf-py, live: its NumPy quantizers (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) must write our bytes, and
  its dequantizer must give our values, bit for bit, from our bytes for every type.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from oracles import need
from quantscope.core.formats.gguf import GGUF_TYPES, decode, encode
from quantscope.io.samples import sample_path

DATA = Path(__file__).parents[1] / "data" / "gguf_reference.npz"
#: The recording's names of the types (llama.cpp's) -> ours.
OURS = {t.ggml_name[0].lower() + t.ggml_name[1:]: n for n, t in GGUF_TYPES.items()}
REAL = {"query_weight": 147456, "gelu_activations": 65536, "ffn_weight": 65536}
LEGACY = ("gguf_q8_0", "gguf_q4_0", "gguf_q4_1", "gguf_q5_0", "gguf_q5_1")


@pytest.fixture(scope="module")
def reference():
    with np.load(DATA, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _cases(reference) -> dict[str, np.ndarray]:
    out = {}
    for name, n in REAL.items():
        out[f"real:{name}"] = np.load(sample_path(name)).astype(np.float32).reshape(-1)[:n]
    for key in reference:
        if key.startswith("edge:") and key.endswith("/input"):
            out[key[:-len("/input")]] = reference[key]
    return out


def test_reference_covers_every_type_and_case(reference):
    cases = _cases(reference)
    assert len(cases) == 22
    for case in cases:
        for rec in OURS:
            assert f"{case}/{rec}" in reference, (case, rec)


@pytest.mark.parametrize("rec_name", sorted(OURS))
def test_bytes_equal_llama_cpp(reference, rec_name):
    """Every recorded case, this type: 0 mismatching blocks, decoded values equal to
    llama.cpp's dequantize_row (by digest)."""
    name = OURS[rec_name]
    t = GGUF_TYPES[name]
    compared = 0
    for case, x in _cases(reference).items():
        assert hashlib.sha256(x.tobytes()).hexdigest() == str(
            reference[f"{case}/input_sha256"]), case
        want = reference[f"{case}/{rec_name}"].reshape(-1, t.type_size)
        got = encode(x.reshape(-1, t.block), name).reshape(-1, t.type_size)
        bad = np.flatnonzero((got != want).any(axis=1))
        assert bad.size == 0, f"{case}: {bad.size} of {want.shape[0]} blocks differ ({bad[:5]})"
        compared += want.shape[0]
        with np.errstate(over="ignore", invalid="ignore"):
            back = decode(got, name, (x.size,))
        assert hashlib.sha256(back.tobytes()).hexdigest() == str(
            reference[f"{case}/{rec_name}/dequantized_sha256"]), case
    assert compared >= (147456 + 65536 * 2) // t.block


@pytest.mark.parametrize("name", sorted(GGUF_TYPES))
def test_gguf_py_dequantizes_our_bytes_to_our_values(reference, name):
    gguf = need("gguf")
    qtype = getattr(gguf.GGMLQuantizationType, GGUF_TYPES[name].ggml_name)
    mismatches = compared = 0
    for _case, x in _cases(reference).items():
        b = encode(x.reshape(-1, GGUF_TYPES[name].block), name)
        with np.errstate(all="ignore"):
            ours = decode(b, name, (*b.shape[:-1], x.size // b.shape[0])).reshape(-1)
            theirs = gguf.quants.dequantize(b.reshape(-1), qtype).reshape(-1)
        mismatches += int(np.count_nonzero(ours.view(np.uint32) != theirs.view(np.uint32)))
        compared += x.size
    assert (mismatches, compared) == (0, compared)
    assert compared > 270000


@pytest.mark.parametrize("name", LEGACY)
def test_gguf_py_quantizers_write_our_bytes(reference, name):
    gguf = need("gguf")
    t = GGUF_TYPES[name]
    qtype = getattr(gguf.GGMLQuantizationType, t.ggml_name)
    for case, x in _cases(reference).items():
        if case == "edge:float16_overflow":
            continue  # gguf-py computes the same bytes but warns on the inf scales
        rows = x.reshape(-1, 256)
        ours = encode(rows, name)
        with np.errstate(all="ignore"):  # gguf-py's 1/d of the subnormal case overflows
            theirs = gguf.quants.quantize(rows, qtype)
        bad = int(np.count_nonzero((ours.reshape(-1, t.type_size)
                                    != theirs.reshape(-1, t.type_size)).any(axis=1)))
        assert bad == 0, f"{case}: {bad} blocks differ from gguf-py"


def test_float16_overflow_case_still_matches_llama_cpp(reference):
    """Scales beyond float16 become inf in llama.cpp's bytes; ours are the same bytes."""
    x = reference["edge:float16_overflow/input"]
    got = encode(x, "gguf_q8_0")
    assert np.array_equal(got, reference["edge:float16_overflow/q8_0"])
    d = got.reshape(-1, 34)[:, :2].copy().view(np.float16)
    assert np.isinf(d).any()
