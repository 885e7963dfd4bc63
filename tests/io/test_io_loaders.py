"""Loaders on valid files: every format and dtype comes back bit-exact, lazily and read-only."""

from __future__ import annotations

import re
import warnings
import zipfile

import ml_dtypes
import numpy as np
import pytest
from io_file_builders import npy_bytes, safetensors_bytes, write

from oracles import need
from quantscope.io import (
    TensorFileError,
    detect_format,
    list_tensors,
    load_for_analysis,
    load_tensor,
)
from quantscope.io.safetensors import read_metadata
from quantscope.io.samples import UnknownSampleError, list_samples, sample_path

RNG = np.random.default_rng(6)

NPY_DTYPES = ["<f2", "<f4", "<f8", ">f4", ">f8", "i1", "u1", "<i4", ">i2", "<u8", "?"]
ST_DTYPES = [np.float64, np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
             ml_dtypes.float8_e5m2, np.int8, np.uint8, np.int32, np.int64, np.bool_]


def _random(shape, dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.asarray(RNG.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(RNG.integers(max(info.min, -1000), min(info.max, 1000), shape),
                          dtype=dtype)
    return np.asarray(RNG.standard_normal(shape) * 3, dtype=dtype)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("dtype", NPY_DTYPES)
@pytest.mark.parametrize("shape", [(5, 7), (3,), (), (0, 4), (2, 3, 4)])
def test_npy_round_trip_is_bit_exact_and_memory_mapped(tmp_path, dtype, shape):
    array = _random(shape, dtype)
    path = tmp_path / "t.npy"
    np.save(path, array)
    [info] = list_tensors(path)
    assert (info.name, info.shape, info.nbytes, info.format) == ("t", shape, array.nbytes, "npy")
    assert info.dtype == np.dtype(dtype).name and info.file_dtype == np.dtype(dtype).str
    loaded = load_tensor(path)
    assert loaded.dtype == np.dtype(dtype) and loaded.shape == shape
    assert _bits(loaded) == _bits(array)
    if array.size:
        assert isinstance(loaded, np.memmap)
        assert not loaded.flags.writeable


def test_npy_fortran_order_keeps_values(tmp_path):
    array = np.asfortranarray(_random((4, 6), "<f4"))
    np.save(tmp_path / "f.npy", array)
    loaded = load_tensor(tmp_path / "f.npy")
    assert loaded.flags.f_contiguous
    np.testing.assert_array_equal(loaded, array)
    values, _ = load_for_analysis(tmp_path / "f.npy")
    assert values.flags.c_contiguous
    np.testing.assert_array_equal(values, array)


@pytest.mark.parametrize("compressed", [False, True])
def test_npz_lists_members_and_loads_each(tmp_path, compressed):
    arrays = {"w": _random((8, 3), "<f4"), "b": _random((3,), "<f2"),
              "codes": _random((2, 2), "i1")}
    path = tmp_path / "a.npz"
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    infos = {i.name: i for i in list_tensors(path)}
    assert set(infos) == set(arrays)
    for name, array in arrays.items():
        assert infos[name].shape == array.shape and infos[name].dtype == array.dtype.name
        loaded = load_tensor(path, name)
        assert _bits(loaded) == _bits(array) and loaded.dtype == array.dtype
        assert isinstance(loaded, np.memmap) is (not compressed)
        assert not loaded.flags.writeable


def test_npz_without_name_lists_the_choices(tmp_path):
    np.savez(tmp_path / "two.npz", alpha=np.ones(2), beta=np.zeros(3))
    with pytest.raises(TensorFileError, match=r"two\.npz: holds 2 tensors.*alpha, beta"):
        load_tensor(tmp_path / "two.npz")
    with pytest.raises(TensorFileError, match=r"no tensor named 'gamma'; available: alpha"):
        load_tensor(tmp_path / "two.npz", "gamma")


def test_single_member_npz_needs_no_name(tmp_path):
    np.savez(tmp_path / "one.npz", only=np.arange(4.0))
    np.testing.assert_array_equal(load_tensor(tmp_path / "one.npz"), np.arange(4.0))


@pytest.mark.parametrize("dtype", ST_DTYPES)
def test_safetensors_every_dtype_bit_exact(tmp_path, dtype):
    tensors = {"layer.weight": _random((6, 5), dtype), "layer.bias": _random((5,), dtype),
               "empty": _random((0, 3), dtype)}
    path = write(tmp_path / "m.safetensors", safetensors_bytes(tensors, {"format": "pt"}))
    infos = list_tensors(path)
    assert [i.name for i in infos] == list(tensors)
    for info, (name, array) in zip(infos, tensors.items(), strict=True):
        assert info.shape == array.shape and info.nbytes == array.nbytes
        assert info.dtype == np.dtype(dtype).name
        loaded = load_tensor(path, name)
        assert loaded.dtype == np.dtype(dtype) and _bits(loaded) == _bits(array)
    assert read_metadata(path) == {"format": "pt"}
    assert isinstance(load_tensor(path, "layer.weight"), np.memmap)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                   ml_dtypes.float8_e5m2, np.float16])
def test_low_precision_floats_widen_exactly_for_analysis(tmp_path, dtype):
    array = _random((16, 16), dtype)
    path = write(tmp_path / "lp.safetensors", safetensors_bytes({"x": array}))
    values, info = load_for_analysis(path)
    assert values.dtype == np.float32 and info.dtype == np.dtype(dtype).name
    # widening is exact: converting back gives the stored bits again
    assert _bits(values.astype(dtype)) == _bits(array)
    np.testing.assert_array_equal(values.astype(np.float64), array.astype(np.float64))


def test_bf16_sample_matches_the_bit_definition_of_bfloat16():
    path = sample_path("bf16_checkpoint")
    name = "encoder.layer.0.attention.self.query.weight"
    values, info = load_for_analysis(path, name)
    assert info.file_dtype == "BF16" and info.shape == (384, 384)
    raw = load_tensor(path, name).view(np.uint16)
    expected = (raw.astype(np.uint32) << 16).view(np.float32)  # bf16 = top half of a float32
    np.testing.assert_array_equal(values, expected)
    # and it is the rounded float32 query weight shipped beside it
    f32 = np.load(sample_path("query_weight"))
    np.testing.assert_array_equal(values, f32.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_float64_beyond_float32_is_refused_with_count_and_place(tmp_path):
    """Values that would become inf in float32 are named before any number is shown (they
    used to be counted as non-finite and dropped, the screen saying only "SQNR inf")."""
    np.save(tmp_path / "big.npy", np.array([[1.5, 1e300], [-1e300, 2.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would now fail the test
        with pytest.raises(TensorFileError, match=re.escape(
                "2 float64 value(s) beyond float32's range (±3.403e+38), the first at index "
                "(0, 1) (1e+300)")):
            load_for_analysis(tmp_path / "big.npy")
    np.save(tmp_path / "fine.npy", np.array([np.inf, -3e38, 1.5]))  # inf is inf already
    values, _ = load_for_analysis(tmp_path / "fine.npy")
    np.testing.assert_array_equal(values, np.array([np.inf, -3e38, 1.5], np.float32))


def test_format_comes_from_content_not_extension(tmp_path):
    array = _random((3, 3), "<f4")
    renamed = write(tmp_path / "weights.bin", npy_bytes(array))
    assert detect_format(renamed) == "npy"
    np.testing.assert_array_equal(load_tensor(renamed), array)
    st = write(tmp_path / "model.dat", safetensors_bytes({"x": array}))
    assert detect_format(st) == "safetensors"


def test_empty_tensor_loads_but_cannot_be_analysed(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0, 5), np.float32))
    assert load_tensor(tmp_path / "e.npy").shape == (0, 5)
    with pytest.raises(TensorFileError, match=r"e\.npy: tensor 'e' is empty"):
        load_for_analysis(tmp_path / "e.npy")


def test_npy_name_must_match_when_given(tmp_path):
    np.save(tmp_path / "act.npy", np.ones(3))
    assert load_tensor(tmp_path / "act.npy", "act").shape == (3,)
    with pytest.raises(TensorFileError, match="no tensor named 'w'; available: act"):
        load_tensor(tmp_path / "act.npy", "w")


def test_every_bundled_sample_loads():
    samples = list_samples()
    assert {name for name, _, _ in samples} == {
        "gelu_activations", "output_activations", "query_weight", "ffn_weight",
        "bf16_checkpoint"}
    for name, path, description in samples:
        assert path == sample_path(name) and path.is_file() and description
        for info in list_tensors(path):
            values, _ = load_for_analysis(path, info.name)
            assert values.shape == info.shape and np.isfinite(values).all()
    assert len(list_tensors(sample_path("bf16_checkpoint"))) == 16
    assert (sample_path("gelu_activations").parent / "NOTICE.md").is_file()


def test_unknown_sample_lists_the_names():
    with pytest.raises(UnknownSampleError, match="unknown sample 'nope'; available: gelu"):
        sample_path("nope")


def test_listing_a_compressed_npz_does_not_decompress_the_data(tmp_path, monkeypatch):
    big = np.zeros((1000, 1000), np.float32)  # 4 MB that compresses to a few KB
    np.savez_compressed(tmp_path / "z.npz", big=big)
    read_sizes = []
    original = zipfile.ZipExtFile.read

    def counting_read(self, n=-1):
        data = original(self, n)
        read_sizes.append(len(data))
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counting_read)
    [info] = list_tensors(tmp_path / "z.npz")
    assert info.nbytes == big.nbytes
    assert sum(read_sizes) < 1024  # magic + header only


def test_unaligned_safetensors_data_still_loads_exactly(tmp_path):
    """Hand-written files need not pad the header to 8 bytes; float64 data may sit at an odd
    address, which the memory map must handle (unaligned arrays are still correct)."""
    tensors = {"odd": np.array([1], np.int8), "f64": _random((5, 3), "<f8")}
    path = write(tmp_path / "u.safetensors", safetensors_bytes(tensors, pad_to=1))
    loaded = load_tensor(path, "f64")
    assert _bits(loaded) == _bits(tensors["f64"])
    values, _ = load_for_analysis(path, "f64")
    np.testing.assert_array_equal(values, tensors["f64"].astype(np.float32))


@pytest.mark.parametrize("fmt", ["npy", "safetensors"])
def test_file_larger_than_memory_opens_without_reading_it(tmp_path, fmt):
    """A sparse 32 GiB file (more than this kind of machine's RAM) lists and maps at once."""
    import json
    import resource
    import struct

    from io_file_builders import npy_with_header

    n = 2**33  # float32 elements: 32 GiB
    if fmt == "npy":
        head = npy_with_header(f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}",
                               b"")
    else:
        text = json.dumps({"big": {"dtype": "F32", "shape": [n],
                                   "data_offsets": [0, 4 * n]}}).encode()
        head = struct.pack("<Q", len(text)) + text
    path = tmp_path / f"huge.{fmt}"
    with open(path, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + 4 * n)
    if path.stat().st_blocks * 512 > 2**20:
        pytest.skip("this filesystem does not support sparse files")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    [info] = list_tensors(path)
    assert info.nbytes == 4 * n
    array = load_tensor(path)
    assert isinstance(array, np.memmap) and array.shape == (n,)
    np.testing.assert_array_equal(array[-4:], np.zeros(4, np.float32))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024  # far below the 32 GiB the header declares


def test_agrees_with_the_reference_safetensors_package_when_installed(tmp_path):
    """Cross-check with the `safetensors` package (the `oracles` extra, not a dependency):
    files it writes read bit-exactly here, and ours read there."""
    st = need("safetensors.numpy")
    tensors = {"w": _random((7, 5), "<f4"), "h": _random((3,), "<f2"), "i": _random((4,), "i1")}
    theirs = tmp_path / "theirs.safetensors"
    st.save_file(tensors, str(theirs), metadata={"k": "v"})
    for name, array in tensors.items():
        assert _bits(load_tensor(theirs, name)) == _bits(array)
    assert read_metadata(theirs) == {"k": "v"}
    ours = write(tmp_path / "ours.safetensors", safetensors_bytes(tensors))
    for name, array in st.load_file(str(ours)).items():
        assert _bits(array) == _bits(tensors[name])


def test_zero_dim_npy_keeps_its_shape_for_analysis(tmp_path):
    """A stored scalar stays 0-d (np.ascontiguousarray would have made it shape (1,))."""
    from quantscope.io import load_for_analysis

    path = tmp_path / "scalar.npy"
    np.save(path, np.float64(2.5))
    x, info = load_for_analysis(path)
    assert x.shape == () and info.shape == () and x.dtype == np.float32 and float(x) == 2.5
