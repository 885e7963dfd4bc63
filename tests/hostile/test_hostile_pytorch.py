"""PyTorch checkpoints built to hurt: pickles that import or call anything, memo bombs, deep
nesting, lying storage sizes and offsets, zip members named outside the archive, truncated
legacy files. Each is refused with one ``TensorFileError`` naming the file, nothing is ever
executed (payloads that would leave a marker file prove it), and memory and time stay bounded.
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import zipfile

import pytest
from hostile_support import bounded

from quantscope.io import TensorFileError, list_tensors, load_for_analysis
from quantscope.io.pytorch import LEGACY_HEAD


def _ops(value) -> bytes:
    """The opcodes that push ``value`` (protocol 2, without PROTO and STOP)."""
    return pickle.dumps(value, protocol=2)[2:-1]


def _tensor_ops(*, key="0", storage=b"FloatStorage", numel=4, offset=0, shape=(4,),
                stride=(1,), pid_len=5) -> bytes:
    """Opcodes pushing ``_rebuild_tensor_v2(<storage pid>, offset, shape, stride, False,
    OrderedDict())``."""
    pid = (b"(" + _ops("storage") + b"ctorch\n" + storage + b"\n" + _ops(key) + _ops("cpu")
           + _ops(numel) + (_ops(None) if pid_len == 6 else b"") + b"t")
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" + pid + b"Q" + _ops(offset) + _ops(shape)
            + _ops(stride) + b"\x89" + b"ccollections\nOrderedDict\n)R" + b"tR")


def _tensor_pkl(**kwargs) -> bytes:
    """``{'w': <a tensor>}`` (see :func:`_tensor_ops`)."""
    return b"\x80\x02}(" + _ops("w") + _tensor_ops(**kwargs) + b"u."


def _torch_zip(path, pkl: bytes, storages: dict[str, bytes] | None = None,
               extra: dict[str, bytes] | None = None):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", b"little")
        for key, data in (storages if storages is not None else {"0": bytes(16)}).items():
            zf.writestr(f"archive/data/{key}", data)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    return path


def _refused(path, *fragments: str) -> str:
    for call in (lambda: list_tensors(path), lambda: load_for_analysis(path, "w")):
        with bounded(limit=64 << 20, seconds=20), pytest.raises(TensorFileError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(os.fspath(path)) and "\n" not in message, message
        for fragment in fragments:
            assert fragment in message, message
    return message


class _Payload:
    """Unpickling this opens (creates) a marker file: proof that something ran code."""

    marker = ""

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_payload_that_runs_under_pickle_is_refused_and_runs_nothing(tmp_path):
    proof = tmp_path / "proof"
    _Payload.marker = str(proof)
    payload = pickle.dumps({"w": _Payload()}, protocol=2)
    pickle.loads(payload).get("w").close()  # the real unpickler does run it
    assert proof.exists()
    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    payload = pickle.dumps({"w": _Payload()}, protocol=2)
    path = _torch_zip(tmp_path / "evil.pt", payload)
    _refused(path, "names 'io.open'", "nothing in the file was imported or run")
    assert not marker.exists()
    legacy = tmp_path / "evil_legacy.pt"
    legacy.write_bytes(LEGACY_HEAD + b"." + _ops(1001).join([b"\x80\x02", b"."])
                       + b"\x80\x02}." + payload)
    _refused(legacy, "object graph: names 'io.open'")
    assert not marker.exists()


@pytest.mark.parametrize(("pkl", "fragment"), [
    (b"\x80\x02cos\nsystem\nX\x04\x00\x00\x00trueR.", "names 'os.system'"),
    (b"\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93\x94.", "names 'os.system'"),
    (b"\x80\x02cbuiltins\neval\n.", "names 'builtins.eval'"),
    (b"\x80\x02ctorch\nFloatStorage\n)R.", "calls a StorageType"),
    (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nK\x01R.", "arguments that are not a tuple"),
    (b"\x80\x02}X\x01\x00\x00\x00wK\x01b.", "sets the state of a str"),
    (b"\x80\x02(cos\nsystem\nX\x01\x00\x00\x00xo.", "names 'os.system'"),
    (b"\x80\x02(X\x01\x00\x00\x00xi__builtin__\nlist\n.", "uses the INST opcode"),
    (b"\x80\x02ccollections\nOrderedDict\n)\x81.", "uses the NEWOBJ opcode"),
    (b"\x80\x02\x82\x01.", "uses the EXT1 opcode"),
    (b"\x80\x02h\x05.", "reads memo entry 5 that was never stored"),
    (b"\x80\x02cnumpy\ndtype\nX\x02\x00\x00\x00O8\x89\x88\x87R.", "not a plain number type"),
    (b"\x80\x02cnumpy.core.multiarray\nscalar\ncnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88"
     b"\x87RC\x03abc\x86R.", "builds a NumPy float64 scalar from 3 bytes"),
    (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\n.", "names 'numpy.core.multiarray."
                                                        "_reconstruct'"),
    (b"\x80\x02}K\x01.", "leaves values on its stack"),
    (b"\x80\x02}]K\x01s.", "a dict key or set item is a list"),
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00w", "truncated"),
    (b"\x80\x02\xff.", "corrupt or truncated"),
    (b"\x80\x02" + b"(" * 500 + b".", "nests more than 100 levels"),
    (b"\x80\x02X\x01\x00\x00\x00kQ.", "persistent id that is not"),
])
def test_opcodes_that_import_call_or_corrupt_are_refused(tmp_path, pkl, fragment):
    _refused(_torch_zip(tmp_path / "bad.pt", pkl), fragment)


def test_memo_bomb_and_deep_nesting_are_refused_quickly(tmp_path):
    # each level is a list holding the previous level twice: 2**60 paths to walk
    bomb = b"\x80\x02(" + _tensor_ops() + b"lq\x00"  # level 0: a list holding a tensor
    for level in range(1, 61):  # POP the last level, MARK, GET it twice, LIST, PUT
        bomb += b"0(h" + bytes([level - 1]) + b"h" + bytes([level - 1]) + b"lq" + bytes([level])
    bomb += b"."
    _refused(_torch_zip(tmp_path / "bomb.pt", bomb), "memo bomb")
    deep = b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b"."  # lists APPENDed into lists
    _refused(_torch_zip(tmp_path / "deep.pt", deep), "nests more than 100 levels")
    cycle = b"\x80\x02]q\x00h\x00a."  # a list inside itself
    _refused(_torch_zip(tmp_path / "cycle.pt", cycle), "container inside itself")


@pytest.mark.parametrize(("kwargs", "storages", "fragment"), [
    ({"numel": 1000}, {"0": bytes(16)}, "holds 1000 elements (4000 bytes) but its member "
                                        "holds 16 bytes"),
    ({"numel": 2**62}, {"0": bytes(16)}, "but its member holds 16 bytes"),
    ({"offset": 3, "shape": (4,)}, {"0": bytes(16)}, "reaches element 6 of a storage of 4"),
    ({"shape": (2**62, 2**62), "stride": (1, 1)}, {"0": bytes(16)}, "reaches element"),
    ({"shape": (2, 2), "stride": (3, 1)}, {"0": bytes(16)}, "reaches element 4"),
    ({"shape": (10**9,), "stride": (0,)}, {"0": bytes(16)}, "repeats a storage of 4 elements "
                                                           "more than 16 times over"),
    ({"shape": (5, 13), "stride": (0, 0)}, {"0": bytes(16)}, "more than 16 times over"),
    ({"offset": -1}, {"0": bytes(16)}, "negative size, stride or offset"),
    ({"stride": (-1,)}, {"0": bytes(16)}, "negative size, stride or offset"),
    ({"shape": (4,), "stride": (1, 1)}, {"0": bytes(16)}, "1 dimensions and 2 strides"),
    ({"key": "9"}, {"0": bytes(16)}, "refers to storage '9', which the archive does not hold"),
    ({"storage": b"ComplexFloatStorage", "numel": 2}, {"0": bytes(16)}, "unsupported dtypes"),
    ({"storage": b"Nonsense"}, {"0": bytes(16)}, "names 'torch.Nonsense'"),
])
def test_lying_storages_and_views_are_refused(tmp_path, kwargs, storages, fragment):
    _refused(_torch_zip(tmp_path / "lie.pt", _tensor_pkl(**kwargs), storages), fragment)


@pytest.mark.parametrize("name", ["archive/../../etc/passwd", "/abs/data/0", "a\\b"])
def test_zip_members_named_outside_the_archive_are_refused(tmp_path, name):
    path = _torch_zip(tmp_path / "escape.pt", _tensor_pkl(), extra={name: b"x"})
    _refused(path, "a path outside the archive's folder")


def _legacy(storage_count: int, data: bytes, pkl: bytes | None = None) -> bytes:
    graph = pkl if pkl is not None else _tensor_pkl(key="k", pid_len=6)
    return (LEGACY_HEAD + b"." + b"\x80\x02" + _ops(1001) + b"." + b"\x80\x02"
            + _ops({"little_endian": True}) + b"." + graph + b"\x80\x02" + _ops(["k"]) + b"."
            + struct.pack("<q", storage_count) + data)


def test_legacy_files_that_lie_or_end_early_are_refused(tmp_path):
    good = tmp_path / "good.pt"
    good.write_bytes(_legacy(4, struct.pack("<4f", 1, 2, 3, 4)))
    assert load_for_analysis(good, "w")[0].tolist() == [1, 2, 3, 4]
    for name, content, fragment in [
        ("count.pt", _legacy(5, bytes(20)), "holds 5 elements but the object graph says 4"),
        ("short.pt", _legacy(4, bytes(12)), "past the end of the"),
        ("cut.pt", _legacy(4, b"")[:60], "truncated"),
        ("huge_string.pt", LEGACY_HEAD + b".\x80\x02\x8d" + struct.pack("<Q", 2**60) + b"x",
         "corrupt or truncated"),
        ("magic.pt", LEGACY_HEAD + b"." + b"\x80\x02" + _ops(7) + b".",
         "legacy protocol version 7"),
        ("views.pt", _legacy(4, bytes(16), _tensor_pkl(key="k", pid_len=6).replace(
            b"N" + b"t", b"K\x01t")), "storage views"),
    ]:
        path = tmp_path / name
        path.write_bytes(content)
        _refused(path, fragment)


def test_plain_pickles_and_tar_checkpoints_are_named(tmp_path):
    plain = tmp_path / "weights.pt"
    plain.write_bytes(pickle.dumps({"w": [1.0, 2.0]}))
    _refused(plain, "is a Python pickle; quantscope never unpickles")
    tar = tmp_path / "old.pt"
    raw = io.BytesIO()
    import tarfile

    with tarfile.open(fileobj=raw, mode="w") as tf:
        info = tarfile.TarInfo("pickle")
        info.size = 3
        tf.addfile(info, io.BytesIO(b"abc"))
    tar.write_bytes(raw.getvalue())
    _refused(tar, "is a tar archive without the storages, tensors and pickle members")


def test_the_command_line_refuses_a_payload_in_one_line(tmp_path, capsys):
    from hostile_support import assert_one_line_error

    from quantscope.cli import main

    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    path = _torch_zip(tmp_path / "evil.pt", pickle.dumps({"w": _Payload()}, protocol=2))
    for argv in (["report", str(path), "--tensor", "w"], ["scan", str(path)],
                 ["export", str(path), "--tensor", "w", "-o", str(tmp_path / "o.npz")]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert_one_line_error(code, out, err, "names 'io.open'")
    assert not marker.exists() and not (tmp_path / "o.npz").exists()


def _tar(path, members: dict[str, bytes]):
    import tarfile

    with tarfile.open(path, "w") as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def _storage_table(numel: int, data: bytes) -> bytes:
    return (pickle.dumps(1, protocol=2) + b"\x80\x02(" + _ops(0) + _ops("cpu")
            + b"ctorch\nFloatStorage\nt." + struct.pack("<q", numel) + data
            + pickle.dumps([], protocol=2))


def _tensor_table(storage_key: int = 0, ndim: int = 1, dims=(4,), strides=(1,)) -> bytes:
    return (pickle.dumps(1, protocol=2) + b"\x80\x02(" + _ops(0) + _ops(storage_key)
            + b"ctorch\nFloatTensor\nt." + struct.pack("<ii", ndim, 0)
            + struct.pack(f"<{len(dims)}q", *dims) + struct.pack(f"<{len(strides)}q", *strides)
            + struct.pack("<q", 0))


_GRAPH = b"\x80\x02}X\x01\x00\x00\x00wX\x01\x00\x00\x000Qs."


def test_tar_checkpoints_that_lie_or_import_are_refused(tmp_path):
    good = _tar(tmp_path / "good.pt", {"storages": _storage_table(4, struct.pack("<4f", *range(
        4))), "tensors": _tensor_table(), "pickle": _GRAPH})
    assert load_for_analysis(good, "w")[0].tolist() == [0, 1, 2, 3]
    marker = tmp_path / "pwned"
    _Payload.marker = str(marker)
    for name, members, fragment in [
        ("count.pt", {"storages": _storage_table(1000, bytes(16))}, "claims 1000 elements, "
                                                                    "more than its member"),
        ("dims.pt", {"tensors": _tensor_table(dims=(5,))}, "reaches element 4 of a storage "
                                                           "of 4"),
        ("ndim.pt", {"tensors": _tensor_table(ndim=1000)}, "has 1000 dimensions"),
        ("missing.pt", {"tensors": _tensor_table(storage_key=7)}, "refers to a missing "
                                                                  "storage"),
        ("module.pt", {"pickle": b"\x80\x02(ctorch.nn\nLinear\nX\x01\x00\x00\x00aX\x01"
                                 b"\x00\x00\x00bt" + b"Q."}, "names 'torch.nn.Linear'"),
        ("payload.pt", {"pickle": pickle.dumps({"w": _Payload()}, protocol=2)},
         "names 'io.open'"),
        ("unknown.pt", {"pickle": b"\x80\x02X\x01\x00\x00\x009Q."}, "tensor '9', which the "
                                                                  "tensor table does not hold"),
    ]:
        parts = {"storages": _storage_table(4, bytes(16)), "tensors": _tensor_table(),
                 "pickle": _GRAPH, **members}
        _refused(_tar(tmp_path / name, parts), fragment)
    assert not marker.exists()
