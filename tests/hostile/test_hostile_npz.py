"""``.npz`` archives built to hurt the decompression: members that produce more than they
declare (deflate, bzip2, lzma), members that honestly expand a thousandfold and more, nested
zips, lying sizes and CRCs, archives of very many members.

What is promised: a member never produces more bytes than its declared size (which its
``.npy`` header's shape and dtype fix); one byte more is refused; an honest member costs the
memory it declares and no more, whatever its compression ratio; one that does not fit the
memory there is is refused before any byte is decompressed.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hostile_support import assert_one_line_error, bounded, record, run_isolated
from test_hostile_files import npy_bytes, npy_header, npz

from quantscope.cli import main
from quantscope.io import TensorFileError, list_tensors, load_for_analysis, load_tensor

CODECS = {"deflate": zipfile.ZIP_DEFLATED, "bzip2": zipfile.ZIP_BZIP2,
          "lzma": zipfile.ZIP_LZMA}


def _f32_header(n: int) -> bytes:
    return npy_header(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}")


def _zeros_member(compression: int, n: int) -> bytes:
    """An archive of one honest member ``x.npy``: ``n`` float32 zeros, written in 16 MiB
    pieces so the test itself stays small."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf, zf.open("x.npy", "w",
                                                                    force_zip64=True) as fh:
        fh.write(_f32_header(n))
        left = 4 * n
        block = bytes(1 << 24)
        while left:
            fh.write(block[:min(left, len(block))])
            left -= min(left, len(block))
    return buffer.getvalue()


def _lying_member(compression: int, n: int, real_bytes: int) -> bytes:
    """An archive of one member ``x.npy`` whose header declares ``n`` float32 values and whose
    sizes (local header and central directory) agree, while its data decompresses to the
    header and ``real_bytes`` zero bytes: the archive lies about what its data produces."""
    head = _f32_header(n)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        zf.writestr("x.npy", head + bytes(real_bytes))
    data = bytearray(buffer.getvalue())
    declared = len(head) + 4 * n
    struct.pack_into("<I", data, 22, declared)  # the local header, at the start
    struct.pack_into("<I", data, data.rindex(b"PK\x01\x02") + 24, declared)
    return bytes(data)


@pytest.fixture(scope="module")
def liars(tmp_path_factory) -> dict[str, Path]:
    """Per codec: a member whose header and sizes declare 16,384 float32 values (64 KiB) while
    its data decompresses to 64 MiB of zeros."""
    tmp = tmp_path_factory.mktemp("liars")
    n = 1 << 14
    out = {}
    for name, codec in CODECS.items():
        path = tmp / f"{name}.npz"
        path.write_bytes(_lying_member(codec, n, real_bytes=16 << 20))
        out[name] = path
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_a_member_producing_more_than_it_declares_stops_at_that_byte(liars, codec):
    path = liars[codec]
    with bounded(limit=8 << 20, seconds=20):
        (info,) = list_tensors(path)  # the header alone is honest
        assert info.shape == (1 << 14,)
        for load in (load_for_analysis, load_tensor):
            with pytest.raises(TensorFileError) as caught:
                load(path)
            message = str(caught.value)
            assert "decompresses to more than the 65664 bytes it declares" in message
            assert "\n" not in message
    record(refused=True)


def test_the_command_line_says_it_in_one_line(liars, capsys):
    code = main(["report", str(liars["bzip2"])])
    out, err = capsys.readouterr()
    assert_one_line_error(code, out, err, "decompresses to more than")
    record(refused=True)


_PEAK_CHILD = """
import json, resource, sys
import numpy as np
from quantscope.io import TensorFileError, load_for_analysis

def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmHWM:"))

def vmsize():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) << 10 for l in f if l.startswith("VmSize:"))

out = {}
for path in PATHS:
    before = hwm()
    x, _ = load_for_analysis(path)
    out[path] = {"rise": hwm() - before, "n": int(x.size), "nonzero": int(np.count_nonzero(x))}
    del x
# the same archives with only 64 MiB of address space left: refused before decompressing
limit = vmsize() + (64 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
for path in PATHS:
    try:
        load_for_analysis(path)
        out[path]["capped"] = "loaded"
    except TensorFileError as exc:
        out[path]["capped"] = str(exc)
print(json.dumps(out))
"""


def test_honest_members_cost_what_they_declare_whatever_their_ratio(tmp_path):
    """128 MiB of zeros as deflate (about 1030:1, just under the ratio cap this replaced) and
    as bzip2 (about 300,000:1, which that cap refused): each loads with its peak memory risen
    by the tensor and a few blocks; with too little memory left each is refused up front."""
    n = (128 << 20) // 4
    paths = []
    for name in ("deflate", "bzip2"):
        path = tmp_path / f"{name}.npz"
        path.write_bytes(_zeros_member(CODECS[name], n))
        paths.append(str(path))
    ratio = (4 * n) / Path(paths[0]).stat().st_size
    assert 1000 < ratio < 1032, ratio
    outcome = run_isolated(f"PATHS = {paths!r}\n" + _PEAK_CHILD, timeout=120)
    assert outcome.code == 0 and "Traceback" not in outcome.err, outcome.describe()
    results = json.loads(outcome.out)
    for path in paths:
        got = results[path]
        assert got["n"] == n and got["nonzero"] == 0, got
        assert got["rise"] <= (128 << 20) + (24 << 20), (path, got["rise"] >> 20)
        assert "more than the" in got["capped"] and "refused before decompressing" in \
            got["capped"], got["capped"]
    record(refused=False)
    record(refused=True)


def test_nested_zips_are_not_opened(tmp_path):
    """A zip where an ``.npy`` should be (a bomb inside a bomb) is not a ``.npy`` stream; a zip
    member not named ``.npy`` is not an array."""
    inner = npz({"x.npy": npy_bytes(np.zeros(1 << 16, np.float32))}, zipfile.ZIP_DEFLATED)
    for members, fragment in (({"x.npy": inner}, "is not a .npy stream"),
                              ({"inner.npz": inner}, "holds no .npy arrays")):
        path = tmp_path / "nested.npz"
        path.write_bytes(npz(members, zipfile.ZIP_DEFLATED))
        with bounded(limit=8 << 20, seconds=10):
            for call in (list_tensors, load_for_analysis):
                with pytest.raises(TensorFileError, match=fragment):
                    call(path)
        record(refused=True)


def test_lying_crc_and_truncated_data_are_refused(tmp_path):
    x = np.random.default_rng(1).standard_normal(50_000).astype(np.float32)
    good = npz({"x.npy": npy_bytes(x)}, zipfile.ZIP_BZIP2)
    data = bytearray(good)
    for signature, crc_at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
        at = data.index(signature)
        data[at + crc_at] ^= 0xFF
    path = tmp_path / "crc.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(TensorFileError, match="CRC mismatch"):
        load_for_analysis(path)
    # the compressed data cut in half, the sizes and the directory kept
    start = good.index(b"PK\x03\x04")
    (name_len, extra_len) = struct.unpack_from("<HH", good, start + 26)
    data_at = start + 30 + name_len + extra_len
    (csize,) = struct.unpack_from("<I", good, start + 18)
    cut = bytearray(good)
    cut[data_at + csize // 2:data_at + csize] = bytes(csize - csize // 2)
    path.write_bytes(bytes(cut))
    with pytest.raises(TensorFileError, match=r"corrupt|ended after"):
        load_for_analysis(path)
    record(refused=True)
    record(refused=True)


def test_an_archive_claiming_a_million_members_is_refused_from_its_end_record(tmp_path):
    """A zip64 end record claiming 10^6 entries: refused before zipfile builds an entry
    object for each."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("x.npy", npy_bytes(np.ones(4, np.float32)))
    raw = bytearray(buffer.getvalue())
    end = raw.rindex(b"PK\x05\x06")
    record64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, 10**6, 10**6,
                           struct.unpack_from("<I", raw, end + 12)[0],
                           struct.unpack_from("<I", raw, end + 16)[0])
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    struct.pack_into("<HHII", raw, end + 8, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    path = tmp_path / "many.npz"
    path.write_bytes(bytes(raw[:end]) + record64 + locator + bytes(raw[end:]))
    with bounded(limit=8 << 20, seconds=5):
        with pytest.raises(TensorFileError, match="holds 1,000,000 zip members"):
            list_tensors(path)
    record(refused=True)


def test_many_small_members_list_in_bounded_time(tmp_path):
    path = tmp_path / "members.npz"
    one = npy_bytes(np.ones(3, np.float32))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(1000):
            zf.writestr(f"t{i}.npy", one)
    with bounded(limit=48 << 20, seconds=20):
        infos = list_tensors(path)
    assert len(infos) == 1000
    record(refused=False)


def test_an_lzma_dictionary_of_4_gib_is_cut_to_the_member(tmp_path):
    """liblzma allocates the dictionary the member's properties name before decoding: a
    64 KiB member naming a 4 GiB one decodes in a dictionary of its own size."""
    x = np.random.default_rng(2).standard_normal(1 << 14).astype(np.float32)
    data = bytearray(npz({"x.npy": npy_bytes(x)}, zipfile.ZIP_LZMA))
    (name_len, extra_len) = struct.unpack_from("<HH", data, 26)
    props = 30 + name_len + extra_len + 4  # after zip's 4-byte LZMA header
    struct.pack_into("<I", data, props + 1, 0xFFFFFFFF)
    path = tmp_path / "dict.npz"
    path.write_bytes(bytes(data))
    with bounded(limit=4 << 20, seconds=10):
        values, _ = load_for_analysis(path)
    assert np.array_equal(values, x)
    record(refused=False)
