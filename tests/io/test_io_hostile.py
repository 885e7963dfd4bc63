"""Hostile and broken files: each gives one precise TensorFileError naming the file.

Nothing is ever unpickled (a payload that would leave a marker file proves it), and no
header can make a loader allocate or map more than the file really holds.
"""

from __future__ import annotations

import os
import pickle
import struct
import zipfile

import numpy as np
import pytest
from io_file_builders import npy_bytes, npy_with_header, raw_safetensors, safetensors_bytes, write

from quantscope.errors import QuantscopeError
from quantscope.io import TensorFileError, list_tensors, load_for_analysis, load_tensor


class _Payload:
    """Unpickling this creates a marker file: proof that something ran code."""

    marker = ""

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _refused(path, match: str) -> TensorFileError:
    """Both listing and loading must refuse with a message naming the file and the problem."""
    for call in (lambda: list_tensors(path), lambda: load_for_analysis(path)):
        with pytest.raises(TensorFileError, match=match) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(os.fspath(path)) and "\n" not in message
    assert isinstance(caught.value, QuantscopeError) and isinstance(caught.value, ValueError)
    return caught.value


def test_pickled_object_npy_is_refused_and_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    path = tmp_path / "evil.npy"
    np.save(path, np.array([_Payload(), 1], dtype=object), allow_pickle=True)
    _refused(path, "holds Python objects.*never|refused because loading it would unpickle")
    assert not marker.exists()


def test_pickled_member_in_npz_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    path = tmp_path / "evil.npz"
    np.savez(path, good=np.ones(3), evil=np.array([_Payload()], dtype=object))
    with pytest.raises(TensorFileError, match=r"member 'evil\.npy' holds Python objects"):
        list_tensors(path)
    with pytest.raises(TensorFileError, match="holds Python objects"):
        load_tensor(path, "evil")
    assert not marker.exists()


def test_raw_pickle_is_named_as_such(tmp_path):
    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    path = write(tmp_path / "weights.npy", pickle.dumps(_Payload()))
    _refused(path, "is a Python pickle; quantscope never unpickles")
    assert not marker.exists()


def test_pytorch_style_zip_is_read_as_one_and_other_pickles_are_explained(tmp_path):
    path = tmp_path / "model.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pickle.dumps({"w": 1}))
    _refused(path, "holds no tensors quantscope can read")  # a PyTorch zip, renamed
    other = tmp_path / "other.npz"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("state/model.pkl", pickle.dumps({"w": 1}))
    _refused(other, "zip holding pickles .*never unpickles")


@pytest.mark.parametrize(("array", "match"), [
    (np.zeros(3, np.complex64), "complex numbers are not supported"),
    (np.array(["a", "bc"]), "unicode strings are not numeric"),
    (np.array([b"a", b"bc"]), "byte strings are not numeric"),
    (np.zeros(2, [("x", "<f4"), ("y", "<i4")]), r"structured dtype"),
    (np.array(["2020-01-01"], "datetime64[D]"), "datetimes are not numeric"),
    (np.zeros(2, "V4"), "raw void bytes"),
])
def test_unsupported_npy_dtypes(tmp_path, array, match):
    path = tmp_path / "bad.npy"
    np.save(path, array)
    _refused(path, match)


def test_npz_member_with_unsupported_dtype_names_the_member(tmp_path):
    np.savez(tmp_path / "c.npz", z=np.zeros(4, np.complex128))
    _refused(tmp_path / "c.npz", "member 'z.npy' has unsupported dtype '<c16': complex")


@pytest.mark.parametrize("cut", [1, 7, 9, 30, 127, 128 + 4 * 12 - 1])
def test_truncated_npy(tmp_path, cut):
    full = npy_bytes(np.arange(12, dtype=np.float32))
    assert len(full) == 128 + 48
    path = write(tmp_path / "t.npy", full[:cut])
    _refused(path, "truncated")


def test_npy_header_that_lies_about_its_shape(tmp_path):
    data = np.arange(10, dtype="<f4").tobytes()
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 10), }"
    path = write(tmp_path / "liar.npy", npy_with_header(header, data))
    _refused(path, r"truncated or its header lies: shape \(1000000000000, 10\) of float32 "
                   r"needs 40000000000000 data bytes, only 40 present")


@pytest.mark.parametrize(("header", "match"), [
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "negative dimension"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", "non-integer"),
    ("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", "fortran_order must be"),
    ("{'descr': '<f4', 'shape': (1,), }", "exactly the keys"),
    ("{'descr': 'q9', 'fortran_order': False, 'shape': (1,), }", "unknown dtype 'q9'"),
    ("__import__('os').system('echo pwned')", "unparsable header"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 200 + ")" * 200 + "}",
     "unparsable header|shape"),
    ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", "structured"),
    ("{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (1,), }", "sub-array"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 70 + "), }",
     "70 dimensions"),
])
def test_malformed_npy_headers(tmp_path, header, match):
    path = write(tmp_path / "h.npy", npy_with_header(header, b"\0" * 64))
    _refused(path, match)


def test_npy_header_length_beyond_limit(tmp_path):
    # version 2.0: a 4-byte length field claiming ~4 GiB of header
    content = b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF) + b"{" * 100
    _refused(write(tmp_path / "h.npy", content), "declares a 4294967295-byte header")


def test_npy_unknown_version(tmp_path):
    content = b"\x93NUMPY\x09\x00" + b"\0" * 200
    _refused(write(tmp_path / "v.npy", content), "unknown .npy format version 9.0")


@pytest.mark.parametrize(("name", "make", "match"), [
    ("missing.npy", None, "no such file"),
    ("empty.safetensors", b"", r"is empty \(0 bytes\)"),
    ("short.safetensors", b"\x05\0\0", "truncated"),
    ("text.txt", b"hello world, not a tensor", "unrecognised format"),
    ("notzip.npz", b"just some text that is long", "not a NumPy .npz file"),
])
def test_paths_that_are_not_tensor_files(tmp_path, name, make, match):
    path = tmp_path / name
    if make is not None:
        path.write_bytes(make)
    _refused(path, match)


def test_directory_and_fifo(tmp_path):
    _refused(tmp_path, "is a directory")
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    _refused(fifo, "not a regular file")  # and does not block reading it


# --- safetensors -----------------------------------------------------------------------------

def _entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


@pytest.mark.parametrize(("header", "data", "match"), [
    ({"a": _entry(offsets=(0, 8))}, b"\0" * 4, r"run past the 4-byte data buffer"),
    ({"a": _entry(offsets=(0, 8)), "b": _entry(offsets=(4, 12))}, b"\0" * 12,
     "'b': data overlaps tensor 'a'"),
    ({"a": _entry(offsets=(8, 16))}, b"\0" * 16, "hole of 8 bytes before tensor 'a'"),
    ({"a": _entry()}, b"\0" * 12, "4 bytes after the last tensor are not described"),
    ({"a": _entry(shape=(3,))}, b"\0" * 8,
     r"header lies — shape \[3\] of F32 needs 12 bytes but data_offsets span 8"),
    ({"a": _entry(offsets=(8, 0))}, b"\0" * 8, "end 0 is before begin 8"),
    ({"a": _entry(offsets=(0, -8))}, b"\0" * 8, "two non-negative integers"),
    ({"a": _entry(dtype="C64")}, b"\0" * 8, "unsupported dtype 'C64': complex"),
    ({"a": _entry(dtype="F128")}, b"\0" * 8, "unsupported dtype 'F128'"),
    ({"a": _entry(dtype=7)}, b"\0" * 8, "unsupported dtype 7"),
    ({"a": _entry(shape=(-2,))}, b"\0" * 8, "negative dimension"),
    ({"a": _entry(shape=(True, 2))}, b"\0" * 8, "non-integer"),
    ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, "lacks data_offsets"),
    ({"a": [1, 2]}, b"\0" * 8, "entry must be an object"),
    ({"__metadata__": {"k": 1}, "a": _entry()}, b"\0" * 8, "__metadata__ must map strings"),
    ([1, 2, 3], b"", "does not start with"),
    ({"a": _entry(shape=(2**40, 2**40), offsets=(0, 8))}, b"\0" * 8, "header lies"),
])
def test_safetensors_headers_that_lie(tmp_path, header, data, match):
    path = write(tmp_path / "m.safetensors", raw_safetensors(header, data))
    _refused(path, match)


def test_safetensors_header_length_of_2_to_the_63(tmp_path):
    content = struct.pack("<Q", 2**63) + b'{"a": {}}'
    _refused(write(tmp_path / "m.safetensors", content),
             "header length field says 9223372036854775808 bytes but the file holds only 9")


@pytest.mark.parametrize(("raw", "match"), [
    (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
    (b'{"a": NaN}', "NaN is not allowed"),
    (b'{"a": \xff}', "not valid UTF-8"),
    (b'{"a": ', "not valid JSON"),
    (b"{" + b'"a":[' * 50000 + b"]" * 50000 + b"}", "not valid JSON|entry must be"),
])
def test_safetensors_invalid_json(tmp_path, raw, match):
    content = struct.pack("<Q", len(raw)) + raw
    _refused(write(tmp_path / "m.safetensors", content), match)


def test_truncated_safetensors_is_caught_before_mapping(tmp_path):
    full = safetensors_bytes({"w": np.ones((64, 64), np.float32)})
    for cut in (len(full) - 1, len(full) - 4096, 20, 8):
        path = write(tmp_path / f"t{cut}.safetensors", full[:cut])
        _refused(path, "truncated|run past|not valid JSON")


# --- npz -------------------------------------------------------------------------------------

def _npz_with_member(path, member: bytes, compression=zipfile.ZIP_STORED, name="x.npy"):
    with zipfile.ZipFile(path, "w", compression) as zf:
        zf.writestr(name, member)
    return path


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_npz_member_whose_header_lies(tmp_path, compression):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000, 1000), }"
    member = npy_with_header(header, b"\0" * 400)
    path = _npz_with_member(tmp_path / "l.npz", member, compression)
    _refused(path, r"member 'x.npy' declares \d+ uncompressed bytes but its header "
                   r"\(shape \(1000, 1000\), float32\) needs 4000128")


def test_npz_zip_bomb_claim_is_refused_at_the_bytes_it_produces(tmp_path):
    """A deflated member whose npy header *and* zip size fields agree on ~4 GiB from a few
    compressed bytes: listed as what it claims, and refused when loading finds the data ends
    64 bytes in, with only the bytes produced ever touched (the buffer is never filled)."""
    import resource

    prefix_len = len(npy_with_header("{'descr': '<f4', 'fortran_order': False, "
                                     "'shape': (1073741800,), }", b""))
    n = (0xFFFFFFF0 - prefix_len) // 4  # the largest claim a 32-bit (non-zip64) field holds
    header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}"
    member = npy_with_header(header, b"\0" * 64)
    assert len(member) - 64 == prefix_len
    path = _npz_with_member(tmp_path / "bomb.npz", member, zipfile.ZIP_DEFLATED)
    content = bytearray(path.read_bytes())
    central = content.rindex(b"PK\x01\x02")
    declared = prefix_len + 4 * n
    struct.pack_into("<I", content, central + 24, declared)  # uncompressed size field
    struct.pack_into("<I", content, 22, declared)  # and in the local header
    write(path, bytes(content))
    assert list_tensors(path)[0].shape == (n,)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    data_bytes = declared - prefix_len
    with pytest.raises(TensorFileError, match=f"ended after 64 of {data_bytes} data bytes"):
        load_tensor(path)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB


def test_npz_crc_mismatch_is_detected(tmp_path):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=np.arange(1000, dtype=np.float32))
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("x.npy")
    content = bytearray(path.read_bytes())
    struct.pack_into("<I", content, content.rindex(b"PK\x01\x02") + 16, info.CRC ^ 0xFFFF)
    struct.pack_into("<I", content, 14, info.CRC ^ 0xFFFF)
    write(path, bytes(content))
    with pytest.raises(TensorFileError, match=r"member 'x.npy' is corrupt \(CRC mismatch"):
        load_tensor(path)


def test_npz_duplicate_member_names(tmp_path):
    path = tmp_path / "d.npz"
    with zipfile.ZipFile(path, "w") as zf, pytest.warns(UserWarning, match="Duplicate"):
        zf.writestr("x.npy", npy_bytes(np.ones(2)))
        zf.writestr("x.npy", npy_bytes(np.zeros(2)))
    _refused(path, "two members named 'x.npy'")


def test_npz_stored_member_cut_short(tmp_path):
    path = tmp_path / "s.npz"
    np.savez(path, x=np.arange(4096, dtype=np.float32))
    content = path.read_bytes()
    write(path, content[: len(content) // 2])
    _refused(path, "not a readable .npz")


def test_encrypted_member_flag(tmp_path):
    path = _npz_with_member(tmp_path / "e.npz", npy_bytes(np.ones(2)))
    content = bytearray(path.read_bytes())
    central = content.rindex(b"PK\x01\x02")
    content[central + 8] |= 1
    content[6] |= 1
    write(path, bytes(content))
    _refused(path, "member 'x.npy' is encrypted")


def test_bf16_saved_with_np_save_explains_the_lost_type(tmp_path):
    import ml_dtypes

    np.save(tmp_path / "bf.npy", np.ones(3, ml_dtypes.bfloat16))  # NumPy writes '<V2'
    _refused(tmp_path / "bf.npy", "np.save writes bfloat16/float8 arrays this way")


def test_hostile_tensor_names_cannot_break_the_one_line_message(tmp_path):
    header = {"a\nb\x1b[2J": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "c": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}
    path = write(tmp_path / "n.safetensors", raw_safetensors(header, b"\0" * 8))
    with pytest.raises(TensorFileError) as caught:
        load_tensor(path)
    message = str(caught.value)
    assert "\n" not in message and "\x1b" not in message and r"'a\nb\x1b[2J'" in message
