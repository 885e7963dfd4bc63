"""Tensor files built to hurt: every loader lists and loads them with a one-line
``TensorFileError`` (or the data the header promised), in bounded memory and time.

The corpus holds the findings so far (zero-size tensors with huge dimensions, numbers past
Python's 4300-digit limit, overlapping zip members, a million empty
safetensors entries, hostile file names); hypothesis then builds headers from scratch.
The byte-level corruption fuzzer of valid files lives in tests/io/test_io_fuzz.py; zip bombs
and lying members in test_hostile_npz.py.
"""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hostile_support import bounded, hostile_settings, record, run_isolated
from hypothesis import given
from hypothesis import strategies as st

from quantscope.io import TensorFileError, list_tensors, load_for_analysis, load_tensor


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npy_header(header: str, data: bytes = b"") -> bytes:
    text = header.encode("latin1")
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def safetensors(header: object, data: bytes = b"") -> bytes:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def npz(members: dict[str, bytes], compression=zipfile.ZIP_STORED, **kw) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression, **kw) as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return buffer.getvalue()


def _overlapping() -> bytes:
    """Two central-directory entries pointing at the same deflated member: each is honest,
    together they claim twice the data (a few thousand such make a 245 KB file list 149 GiB)."""
    member = npy_bytes(np.zeros(200_000, np.float32))
    content = bytearray(npz({"a.npy": member}, zipfile.ZIP_DEFLATED))
    central = content.rindex(b"PK\x01\x02")
    end = content.rindex(b"PK\x05\x06")
    entry = bytes(content[central:end])
    second = bytearray(entry)
    second[46:51] = b"b.npy"
    directory = entry + bytes(second)
    record = bytearray(content[end:])
    struct.pack_into("<HHII", record, 8, 2, 2, len(directory), central)
    return bytes(content[:central]) + directory + bytes(record)


HUGE = 10**2000  # 2001 digits: fine alone, its products pass Python's 4300-digit str limit

CORPUS: list[tuple[str, str, object, str]] = [
    # (id, suffix, content or builder, a fragment of the one-line message)
    ("npy zero-size (0, 2**64)", ".npy",
     npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 18446744073709551616), }"),
     "too large for any array"),
    ("safetensors zero-size (0, 2**64)", ".safetensors",
     safetensors({"e": {"dtype": "F32", "shape": [0, 2**64], "data_offsets": [0, 0]}}),
     "too large for any array"),
    ("safetensors 6000-digit byte count", ".safetensors",
     safetensors({"w": {"dtype": "F32", "shape": [HUGE, HUGE, HUGE], "data_offsets": [0, 4]}},
                 b"\0" * 4), "digit number"),
    ("npy 4800-digit hex dimension", ".npy",
     npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0x" + "f" * 4000 + ",), }"),
     "digit number"),
    ("overlapping members", ".npz", _overlapping, "overlaps"),
    ("1.5M empty safetensors entries", ".safetensors", lambda: struct.pack(
        "<Q", 0) + b"", None),  # replaced below (built lazily: 86 MB)
]


def _many_empty_entries(n: int = 1_500_000) -> bytes:
    entry = '"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}'
    text = ("{" + ",".join(entry % i for i in range(n)) + "}").encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


CORPUS[-1] = ("1.5M empty safetensors entries", ".safetensors", _many_empty_entries,
              "more than the 100,000 tensors")


def _refused(path: Path, fragment: str | None) -> None:
    for call in (lambda: list_tensors(path), lambda: load_for_analysis(path)):
        with pytest.raises(TensorFileError) as caught:
            call()
        message = str(caught.value)
        assert "\n" not in message and len(message) < 1000, message
        if fragment:
            assert fragment in message, message


@pytest.mark.parametrize(("name", "suffix", "content", "fragment"), CORPUS,
                         ids=[c[0] for c in CORPUS])
def test_corpus_is_refused_in_one_line_bounded(tmp_path, name, suffix, content, fragment):
    data = content() if callable(content) else content
    path = tmp_path / f"hostile{suffix}"
    path.write_bytes(data)
    del data
    with warnings.catch_warnings(), bounded(limit=64 << 20, seconds=20):
        warnings.simplefilter("error")
        _refused(path, fragment)
    record(refused=True)


def test_compressed_members_decompress_into_the_final_buffer(tmp_path):
    """Loading a 64 MiB deflated member costs the result and a block, not 3x the size."""
    n = (64 << 20) // 4
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    path = tmp_path / "big.npz"
    np.savez_compressed(path, x=x)
    del x
    with bounded(limit=(64 << 20) + (8 << 20), seconds=60):
        values, _ = load_for_analysis(path)
    assert values.shape == (n,)
    with bounded(limit=(64 << 20) + (8 << 20), seconds=60):
        raw = load_tensor(path)
    assert raw.nbytes == 64 << 20


def test_bf16_widens_block_by_block(tmp_path):
    """float32 out of a 32 MiB bf16 tensor: the result plus a block, no full stored copy."""
    import ml_dtypes

    n = 16 << 20
    header = {"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}
    path = tmp_path / "b.safetensors"
    path.write_bytes(safetensors(header, np.ones(n, ml_dtypes.bfloat16).tobytes()))
    with bounded(limit=(4 * n) + (12 << 20), seconds=60):
        values, _ = load_for_analysis(path, "w")
    assert values.dtype == np.float32 and float(values[-1]) == 1.0


def test_hostile_file_names_are_escaped(tmp_path):
    path = tmp_path / "a\nb\x1b[2J.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00\xff")
    with pytest.raises(TensorFileError) as caught:
        list_tensors(path)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and r"\x1b[2J" in message


def test_one_dimensional_per_channel_is_bounded():
    """A 10^7-element 1-D tensor 'per channel' (one scale per element) is refused at once
    instead of peaking at 2.7 GB in report and 7 GB in the window."""
    outcome = run_isolated("""
import sys
import numpy as np
np.save("/dev/shm/qs_1d.npy" if __import__("os").path.isdir("/dev/shm") else "qs_1d.npy",
        np.random.default_rng(0).standard_normal(10**7).astype(np.float32))
from quantscope.cli import main
path = "/dev/shm/qs_1d.npy" if __import__("os").path.isdir("/dev/shm") else "qs_1d.npy"
try:
    code = main(["report", path, "--json"])
finally:
    __import__("os").unlink(path)
sys.exit(code)
""", timeout=120)
    assert outcome.code in (0, 2), outcome.describe()
    assert "Traceback" not in outcome.err
    assert outcome.peak_rss < 800 << 20, outcome.describe()


# -- hypothesis: headers built from scratch ------------------------------------------------------
dims = st.one_of(st.integers(0, 8), st.integers(0, 2**70), st.just(2**64), st.just(0))
shapes = st.lists(dims, max_size=5)
st_dtypes = st.sampled_from(["F32", "F16", "BF16", "F64", "I8", "U8", "BOOL", "F8_E4M3", "C64",
                             "X", 7])


@hostile_settings(ci=150, long=4000)
@given(entries=st.lists(st.tuples(st.text(max_size=6), st_dtypes, shapes,
                                  st.lists(st.integers(-2, 2**66), min_size=2, max_size=2)),
                        max_size=4),
       data_len=st.integers(0, 256))
def test_random_safetensors_headers(tmp_path_factory, entries, data_len):
    header = {name: {"dtype": dt, "shape": shape, "data_offsets": offs}
              for name, dt, shape, offs in entries}
    path = tmp_path_factory.mktemp("st") / "h.safetensors"
    path.write_bytes(safetensors(header, bytes(data_len)))
    _exercise(path, data_len)


@hostile_settings(ci=150, long=4000)
@given(descr=st.sampled_from(["<f4", ">f4", "<f2", "|b1", "<i8", "<c8", "|O", "<U3", "V4",
                              "<f4 "]),
       shape=shapes, fortran=st.booleans(), data_len=st.integers(0, 256),
       compression=st.sampled_from([None, zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                    zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]))
def test_random_npy_headers_alone_and_in_npz(tmp_path_factory, descr, shape, fortran,
                                             data_len, compression):
    text = f"{{'descr': {descr!r}, 'fortran_order': {fortran}, 'shape': {tuple(shape)!r}, }}"
    member = npy_header(text, bytes(data_len))
    tmp = tmp_path_factory.mktemp("npy")
    if compression is None:
        path = tmp / "h.npy"
        path.write_bytes(member)
    else:
        path = tmp / "h.npz"
        path.write_bytes(npz({"x.npy": member, "y.npy": npy_bytes(np.ones(3))}, compression))
    _exercise(path, data_len)


def _exercise(path: Path, data_len: int) -> None:
    """List and load everything: typed one-line errors, or exactly what was promised."""
    with warnings.catch_warnings(), bounded(limit=32 << 20, seconds=20):
        warnings.simplefilter("error")
        try:
            infos = list_tensors(path)
        except TensorFileError as exc:
            assert "\n" not in str(exc)
            record(refused=True)
            return
        record(refused=False)
        for info in infos:
            try:
                values, again = load_for_analysis(path, info.name)
            except TensorFileError as exc:
                assert "\n" not in str(exc)
                record(refused=True)
                continue
            record(refused=False)
            assert values.shape == info.shape and values.dtype == np.float32
            assert again == info and info.nbytes <= max(data_len, 24)
