"""Hostile GGUF files: every lie in the header gives one TensorFileError naming the file,
before any allocation sized by the lie."""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "io"))
from gguf_files import raw_gguf

from quantscope.io import list_tensors
from quantscope.io.tensor_info import TensorFileError

Q8 = 8  # ggml type id of Q8_0 (34 bytes per 32 elements)


def _kv_u32(key: bytes, value: int) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<II", 4, value)


CASES = {
    "bad_magic": (b"GGUX" + bytes(60), "not a GGUF file"),
    "version_1": (raw_gguf([], version=1), "version 1"),
    "lying_tensor_count": (raw_gguf([], n_tensors=1 << 60), "more than the file"),
    "lying_kv_count": (raw_gguf([], n_kv=10 ** 12), "more than the file"),
    "huge_key_length": (raw_gguf([], n_kv=1, kv=struct.pack("<Q", 1 << 62) + bytes(16)),
                        "more than the"),
    "huge_array_count": (raw_gguf([], n_kv=1, kv=struct.pack("<Q", 1) + b"k" + struct.pack(
        "<IIQ", 9, 4, 1 << 61) + bytes(8)), "claims"),
    "unknown_value_type": (raw_gguf([], n_kv=1, kv=struct.pack("<Q", 1) + b"k"
                                    + struct.pack("<I", 77) + bytes(8)), "unknown value type"),
    "bad_alignment": (raw_gguf([], n_kv=1, kv=_kv_u32(b"general.alignment", 24)),
                      "power of two"),
    "offset_past_eof": (raw_gguf([(b"w", [32], Q8, 1 << 40)], data=bytes(34)),
                        "past the end"),
    "truncated_data": (raw_gguf([(b"w", [64], Q8, 0)], data=bytes(34)), "past the end"),
    "overlapping": (raw_gguf([(b"a", [64], Q8, 0), (b"b", [32], Q8, 32)], data=bytes(128)),
                    "overlap"),
    "misaligned_offset": (raw_gguf([(b"a", [32], Q8, 0), (b"b", [32], Q8, 40)],
                                   data=bytes(128)), "alignment"),
    "unknown_type_id": (raw_gguf([(b"w", [32], 99, 0)], data=bytes(64)), "ggml type 99"),
    "iq_type_refused": (raw_gguf([(b"w", [256], 16, 0)], data=bytes(128)), "ggml type 16"),
    "five_dims": (raw_gguf([(b"w", [32, 1, 1, 1, 1], Q8, 0)], data=bytes(64)),
                  "5 dimensions"),
    "zero_dims": (raw_gguf([(b"w", [], Q8, 0)], data=bytes(64)), "0 dimensions"),
    "shape_overflows_int64": (raw_gguf([(b"w", [1 << 40, 1 << 40], 0, 0)], data=bytes(64)),
                              "beyond int64"),
    "row_not_whole_blocks": (raw_gguf([(b"w", [48], Q8, 0)], data=bytes(64)),
                             "multiple of its block"),
    "duplicate_names": (raw_gguf([(b"w", [32], Q8, 0), (b"w", [32], Q8, 64)],
                                 data=bytes(128)), "twice"),
    "name_not_utf8": (raw_gguf([(b"\xff\xfe", [32], Q8, 0)], data=bytes(64)), "UTF-8"),
    "truncated_header": (raw_gguf([(b"w", [32], Q8, 0)])[:30], "more than the file"),
    "truncated_in_table": (raw_gguf([(b"w", [32], Q8, 0)])[:60], "past the end"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_gguf_is_one_clear_error(tmp_path, case):
    data, match = CASES[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(data)
    with pytest.raises(TensorFileError, match=match) as exc:
        list_tensors(path)
    assert path.name in str(exc.value) and "\n" not in str(exc.value)


def test_a_valid_raw_file_reads(tmp_path):
    path = tmp_path / "ok.gguf"
    path.write_bytes(raw_gguf([(b"a", [32], Q8, 0), (b"b", [32, 2], 0, 64)],
                              data=bytes(64 + 256)))
    infos = {i.name: i for i in list_tensors(path)}
    assert infos["a"].file_dtype == "Q8_0" and infos["b"].shape == (2, 32)
