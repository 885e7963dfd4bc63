"""Fuzzing: corrupt valid files at random; only TensorFileError (or success) may come out.

Each example starts from a valid file of one format, applies a few hypothesis-chosen
corruptions — byte flips, truncation, insertions, deletions and, most usefully, rewritten
numbers inside the header (shapes, offsets, lengths that now lie) — and then lists, loads
and converts every tensor the loader still accepts. A success must return exactly what the
header promised and never more bytes than the file can account for.
"""

from __future__ import annotations

import io
import re
import tempfile
import warnings
import zipfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from io_file_builders import npy_bytes, safetensors_bytes

from quantscope.io import TensorFileError, list_tensors, load_for_analysis, load_tensor


def _npz_bytes(compression: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        zf.writestr("w.npy", npy_bytes(np.linspace(-2, 3, 30, dtype=np.float32).reshape(5, 6)))
        zf.writestr("b.npy", npy_bytes(np.arange(7, dtype=np.int16)))
    return buffer.getvalue()


_RNG = np.random.default_rng(0)
BASES: dict[str, tuple[str, bytes]] = {
    "npy": (".npy", npy_bytes(np.asfortranarray(_RNG.standard_normal((6, 5))))),
    "npz_stored": (".npz", _npz_bytes(zipfile.ZIP_STORED)),
    "npz_deflated": (".npz", _npz_bytes(zipfile.ZIP_DEFLATED)),
    "safetensors": (".safetensors", safetensors_bytes({
        "a.weight": _RNG.standard_normal((4, 6)).astype(ml_dtypes.bfloat16),
        "a.bias": _RNG.standard_normal(6).astype(np.float32),
        "fp8": _RNG.standard_normal((3, 3)).astype(ml_dtypes.float8_e4m3fn),
        "empty": np.zeros((0, 2), np.float16),
    }, metadata={"format": "pt"})),
}

_DIGITS = re.compile(rb"\d+")

mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 2**20), st.integers(1, 255)),
    st.tuples(st.just("flip_head"), st.integers(0, 300), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 2**20)),
    st.tuples(st.just("insert"), st.integers(0, 2**20), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 2**20), st.integers(1, 16)),
    st.tuples(st.just("number"), st.integers(0, 40),
              st.one_of(st.integers(0, 300), st.integers(0, 2**64 - 1))),
)


def _mutate(data: bytes, ops) -> bytes:
    buf = bytearray(data)
    for op in ops:
        if not buf:
            break
        kind = op[0]
        if kind in ("flip", "flip_head"):
            buf[op[1] % len(buf)] ^= op[2]
        elif kind == "truncate":
            del buf[op[1] % len(buf):]
        elif kind == "insert":
            pos = op[1] % (len(buf) + 1)
            buf[pos:pos] = op[2]
        elif kind == "delete":
            pos = op[1] % len(buf)
            del buf[pos:pos + op[2]]
        else:  # rewrite the k-th number in the first 400 bytes: a header that now lies
            runs = list(_DIGITS.finditer(bytes(buf[:400])))
            if runs:
                run = runs[op[1] % len(runs)]
                buf[run.start():run.end()] = str(op[2]).encode()
    return bytes(buf)


def _exercise(path: Path, file_size: int, compressed: bool) -> None:
    """List, load and convert everything; check successes keep the header's promises."""
    try:
        infos = list_tensors(path)
    except TensorFileError:
        return
    # what a loader may hand back is bounded by the bytes the file really holds
    limit = file_size * 1032 + 4096 if compressed else file_size
    for info in infos:
        try:
            array = load_tensor(path, info.name)
        except TensorFileError:
            continue
        assert array.shape == info.shape and array.nbytes == info.nbytes <= limit
        assert array.dtype.name == info.dtype
        np.asarray(array).tobytes()  # touch every byte of the mapping
        try:
            values, again = load_for_analysis(path, info.name)
        except TensorFileError as exc:  # load_tensor just worked: emptiness, or float64
            # values float32 cannot hold (refused with their count and place) are left
            assert (info.size == 0 and "is empty" in str(exc)) or (
                "beyond float32's range" in str(exc) and info.dtype == "float64")
            continue
        assert values.dtype == np.float32 and values.shape == info.shape and again == info


@pytest.mark.parametrize("base", list(BASES))
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(mutation, min_size=1, max_size=4))
def test_corrupted_files_raise_only_documented_errors(base, ops):
    suffix, content = BASES[base]
    corrupted = _mutate(content, ops)
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("error")  # a stray warning is an undocumented outcome too
        path = Path(tmp) / f"fuzzed{suffix}"
        path.write_bytes(corrupted)
        _exercise(path, len(corrupted), compressed=base == "npz_deflated")


@pytest.mark.parametrize("base", list(BASES))
def test_unmodified_bases_load_completely(base, tmp_path):
    """The fuzzer's starting points are valid, so rejections above come from corruption."""
    suffix, content = BASES[base]
    path = tmp_path / f"valid{suffix}"
    path.write_bytes(content)
    infos = list_tensors(path)
    assert infos
    for info in infos:
        assert load_tensor(path, info.name).shape == info.shape
