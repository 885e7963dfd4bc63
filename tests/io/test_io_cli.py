"""``quantscope scan`` / ``export`` (and ``report`` on every format) through ``cli.main``."""

from __future__ import annotations

import json
import pickle

import ml_dtypes
import numpy as np
import pytest
from io_file_builders import safetensors_bytes, write

import quantscope
from quantscope.cli import main
from quantscope.io import load_for_analysis
from quantscope.io.samples import sample_path

RNG = np.random.default_rng(60)
#: The scan sums each tensor's errors in its own order (rows as they are read, the per-tensor
#: error over distinct values): the prepared path's standard applies, sums within 1e-9
#: relative, so SQNRs within this many dB (see tests/core/test_prepared.py).
SQNR_DB = 10 * np.log10(1 + 2e-9)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2 and out == ""
    assert err.startswith("quantscope: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


@pytest.fixture
def checkpoint(tmp_path):
    """A small checkpoint where one weight has a few loud output channels."""
    wide = RNG.standard_normal((64, 32)).astype(np.float32) * 0.02
    wide[:2] *= 200  # two channels 200x louder: per-tensor scaling starves the rest
    tensors = {
        "calm.weight": (RNG.standard_normal((48, 32)) * 0.05).astype(ml_dtypes.bfloat16),
        "loud.weight": wide,
        "norm.bias": RNG.standard_normal(32).astype(np.float16),
        "token_ids": np.arange(10, dtype=np.int64),
        "empty.weight": np.zeros((0, 4), np.float32),
    }
    return write(tmp_path / "model.safetensors", safetensors_bytes(tensors))


def _engine_db(x: np.ndarray, granularity: str) -> float:
    params = quantscope.choose_qparams(x, symmetric=True, granularity=granularity, axis=0)
    return float(quantscope.analyze(x, params).sqnr_db)


def test_scan_ranks_worst_first_with_engine_numbers(capsys, checkpoint):
    code, out, err = _run(capsys, "scan", str(checkpoint), "--json")
    assert code == 0 and err == ""  # not a terminal: no progress bar unless asked
    doc = json.loads(out)
    names = [t["name"] for t in doc["tensors"]]
    assert names[0] == "loud.weight" and set(names) == {"calm.weight", "loud.weight",
                                                        "norm.bias"}
    per_tensor = [t["per_tensor_sqnr_db"] for t in doc["tensors"]]
    assert per_tensor == sorted(per_tensor)
    for row in doc["tensors"]:
        x, _ = load_for_analysis(checkpoint, row["name"])
        assert abs(row["per_tensor_sqnr_db"] - _engine_db(x, "tensor")) <= SQNR_DB
        if x.ndim >= 2:
            assert abs(row["per_channel_sqnr_db"] - _engine_db(x, "channel")) <= SQNR_DB
            assert row["gain_db"] == row["per_channel_sqnr_db"] - row["per_tensor_sqnr_db"]
        else:
            assert row["per_channel_sqnr_db"] is None and row["gain_db"] is None
    loud = doc["tensors"][0]
    gains = [t["gain_db"] for t in doc["tensors"] if t["gain_db"] is not None]
    assert loud["gain_db"] == max(gains) > 0  # per-channel rescues the starved channels
    assert doc["tensors"][[t["name"] for t in doc["tensors"]].index("calm.weight")][
        "file_dtype"] == "BF16"
    skipped = {s["name"]: s["reason"] for s in doc["skipped"]}
    assert skipped == {"token_ids": "not floating point (int64)", "empty.weight": "empty"}


def test_scan_top_sort_and_table(capsys, checkpoint):
    code, out, _ = _run(capsys, "scan", str(checkpoint), "--top", "1", "--sort", "gap")
    assert code == 0
    lines = out.splitlines()
    assert "3 floating tensors" in lines[0]
    assert lines[2].split()[:2] == ["1", "loud.weight"]
    assert "... 2 more (--top 1 shown)" in out
    assert "skipped 2: token_ids (not floating point (int64)); empty.weight (empty)" in out


def test_scan_progress_bar_goes_to_stderr(capsys, checkpoint):
    code, out, err = _run(capsys, "scan", str(checkpoint), "--progress")
    assert code == 0 and "scan [" not in out
    # redrawn in place: at least once per finished tensor, one newline at the very end
    assert err.count("\r") >= 4 and err.endswith("\n") and err.count("\n") == 1
    assert err.rstrip().endswith("100%  3/3  done")
    assert "loud.weight" in err and "3/3" in err


def test_scan_sample_and_other_formats(capsys, tmp_path):
    code, out, _ = _run(capsys, "scan", "--sample", "bf16_checkpoint", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["count"] == 16 and doc["parameters"] == 1_774_464
    np.savez(tmp_path / "w.npz", a=RNG.standard_normal((8, 8)), b=RNG.standard_normal(3))
    code, out, _ = _run(capsys, "scan", str(tmp_path / "w.npz"), "--json")
    assert code == 0 and {t["name"] for t in json.loads(out)["tensors"]} == {"a", "b"}


def test_scan_reports_nonfinite_and_survives_all_nan(capsys, tmp_path):
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    x[0, 0] = np.nan
    path = write(tmp_path / "n.safetensors", safetensors_bytes(
        {"some_nan": x, "all_nan": np.full((2, 2), np.nan, np.float32)}))
    code, out, _ = _run(capsys, "scan", str(path), "--json")
    assert code == 0
    doc = json.loads(out)
    rows = {t["name"]: t for t in doc["tensors"]}
    assert rows["some_nan"]["n_nonfinite"] == 1
    skipped = {s["name"]: s["reason"] for s in doc["skipped"]}
    assert skipped == {"all_nan": "all 4 values are NaN or infinite"}


def test_scan_all_zero_tensors_are_exact_and_json_stays_valid(capsys, tmp_path):
    path = write(tmp_path / "z.safetensors", safetensors_bytes(
        {"zero.bias": np.zeros(8, np.float32), "zero.weight": np.zeros((4, 4), np.float32),
         "w": RNG.standard_normal((4, 4)).astype(np.float32)}))
    code, out, _ = _run(capsys, "scan", str(path), "--json")
    assert code == 0 and "Infinity" not in out and "NaN" not in out
    doc = json.loads(out)
    assert doc["schema"] == "quantscope.scan/1"
    rows = [(t["name"], t["per_tensor_sqnr_db"], t["gain_db"], t.get("nonfinite"))
            for t in doc["tensors"]]
    assert rows[0][0] == "w" and rows[0][3] is None  # finite SQNR ranks before exact ones
    assert rows[1:] == [("zero.bias", None, None, {"per_tensor_sqnr_db": "inf"}),
                        ("zero.weight", None, 0.0, {"per_tensor_sqnr_db": "inf",
                                                    "per_channel_sqnr_db": "inf"})]


@pytest.mark.parametrize("argv, fragments", [
    (["scan", "/no/such/model.safetensors"], ["/no/such/model.safetensors: no such file"]),
    (["scan"], ["no input: give a FILE or --sample NAME"]),
    (["scan", "x.npy", "--sample", "query_weight"], ["either FILE or --sample"]),
    (["scan", "--sample", "nope"], ["unknown sample 'nope'; available: gelu_activations"]),
    (["scan", "--sample", "query_weight", "--top", "0"], ["--top must be at least 1"]),
    (["scan", "--sample", "query_weight", "--bits", "1"], ["bits must be between 2 and 8"]),
    (["export", "--sample", "bf16_checkpoint", "-o", "x.npz"],
     ["holds 16 tensors; choose one with --tensor NAME"]),
    (["export", "--sample", "query_weight", "--granularity", "group", "-o", "x.npz"],
     ["--granularity group needs --group-size"]),
    (["export", "--sample", "query_weight", "--granularity", "channel", "--axis", "2",
      "-o", "x.npz"], ["--axis 2 is out of range for shape (384, 384)"]),
    (["export", "--sample", "query_weight", "--bits", "9", "-o", "x.npz"], ["bits"]),
])
def test_bad_requests_exit_2_with_one_line(capsys, tmp_path, monkeypatch, argv, fragments):
    monkeypatch.chdir(tmp_path)
    _assert_one_line_error(*_run(capsys, *argv), *fragments)
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.parametrize("command", ["scan", "report", "export"])
def test_hostile_file_exits_2_on_every_command(capsys, tmp_path, command):
    path = tmp_path / "evil.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    extra = ["-o", str(tmp_path / "o.npz")] if command == "export" else []
    _assert_one_line_error(*_run(capsys, command, str(path), *extra),
                           f"{path}: array holds Python objects")
    raw = write(tmp_path / "raw.safetensors", pickle.dumps([1, 2]))
    _assert_one_line_error(*_run(capsys, command, str(raw), *extra), "is a Python pickle")


def test_report_reads_every_format(capsys, tmp_path, checkpoint):
    code, out, _ = _run(capsys, "report", str(checkpoint), "--tensor", "calm.weight", "--json")
    assert code == 0 and json.loads(out)["shape"] == [48, 32]
    np.savez_compressed(tmp_path / "a.npz", act=RNG.standard_normal((5, 6)))
    code, out, _ = _run(capsys, "report", str(tmp_path / "a.npz"), "--json")
    assert code == 0 and json.loads(out)["shape"] == [5, 6]
    _assert_one_line_error(*_run(capsys, "report", str(checkpoint)),
                           "holds 5 tensors; choose one with --tensor NAME", "loud.weight")


SCHEMES = [
    [],
    ["--granularity", "channel"],
    ["--granularity", "channel", "--axis", "-1", "--asymmetric"],
    ["--granularity", "group", "--group-size", "24", "--axis", "1"],
    ["--asymmetric", "--unsigned", "--rounding", "half_away"],
    ["--bits", "4", "--full-range", "--arithmetic", "multiply"],
]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_export_round_trip_dequantizes_to_engine_values(capsys, tmp_path, checkpoint, scheme):
    out_path = tmp_path / "codes.npz"
    code, out, err = _run(capsys, "export", str(checkpoint), "--tensor", "loud.weight",
                          "-o", str(out_path), *scheme)
    assert code == 0 and err == "" and out.startswith(f"wrote {out_path}: loud.weight")
    with np.load(out_path, allow_pickle=False) as archive:
        members = {k: archive[k] for k in archive.files}
    assert set(members) == {"codes", "scale", "zero_point", "metadata"}
    meta = json.loads(str(members["metadata"]))
    s = meta["scheme"]
    x, _ = load_for_analysis(checkpoint, "loud.weight")
    params = quantscope.choose_qparams(
        x, symmetric=s["symmetric"], granularity=s["granularity"],
        axis=s["axis"] if s["axis"] is not None else 0, group_size=s["group_size"],
        bits=s["bits"], narrow_range=s["qmin"] == -(2 ** (s["bits"] - 1)) + 1,
        signed=s["qmin"] < 0, rounding=s["rounding"], arithmetic=s["arithmetic"])
    expected_codes = params.quantize(x)
    assert members["codes"].dtype == expected_codes.dtype
    np.testing.assert_array_equal(members["codes"], expected_codes)
    assert members["scale"].dtype == np.float32 and members["zero_point"].dtype == np.int32
    restored = quantscope.dequantize(members["codes"], members["scale"],
                                     members["zero_point"], axis=s["axis"],
                                     group_size=s["group_size"])
    np.testing.assert_array_equal(restored, params.dequantize(expected_codes))
    report = quantscope.analyze(x, params)
    assert meta["report"]["sqnr_db"] == report.sqnr_db
    assert (meta["tensor"], meta["source_dtype"], meta["shape"]) == ("loud.weight", "float32",
                                                                     [64, 32])
    assert (s["qmin"], s["qmax"]) == (params.qmin, params.qmax)


def test_export_bf16_sample_and_exact_output_name(capsys, tmp_path):
    target = tmp_path / "codes.bin"  # np.savez would append .npz to a path; we do not
    code, _, _ = _run(capsys, "export", "--sample", "bf16_checkpoint", "--tensor",
                      "encoder.layer.0.output.dense.weight", "--granularity", "channel",
                      "-o", str(target))
    assert code == 0 and target.is_file() and not (tmp_path / "codes.bin.npz").exists()
    with np.load(target, allow_pickle=False) as archive:
        meta = json.loads(str(archive["metadata"]))
        assert archive["codes"].shape == (384, 1536) and archive["scale"].shape == (384,)
    assert meta["source_dtype"] == "bfloat16" and meta["source"] == "sample bf16_checkpoint"
    assert list(tmp_path.iterdir()) == [target]  # no temporary left behind


def test_export_refuses_bad_outputs(capsys, tmp_path):
    src = sample_path("query_weight")
    _assert_one_line_error(*_run(capsys, "export", str(src), "-o",
                                 str(tmp_path / "missing" / "o.npz")), "does not exist")
    _assert_one_line_error(*_run(capsys, "export", str(src), "-o", str(tmp_path)),
                           "it is a directory")
    copy = write(tmp_path / "w.npy", src.read_bytes())
    _assert_one_line_error(*_run(capsys, "export", str(copy), "-o", str(copy)),
                           "refusing to overwrite the input")
    assert copy.read_bytes() == src.read_bytes()


def test_scan_of_a_checkpoint_without_floats(capsys, tmp_path):
    path = write(tmp_path / "ids.safetensors",
                 safetensors_bytes({"ids": np.arange(5, dtype=np.int32)}))
    code, out, _ = _run(capsys, "scan", str(path))
    assert code == 0 and "0 floating tensors" in out
    assert "no floating-point tensors to scan" in out and "skipped 1: ids" in out


def test_export_nonfinite_needs_an_explicit_choice(capsys, tmp_path):
    x = np.ones((3, 4), np.float32)
    x[1, 2], x[2, 0] = np.nan, np.inf
    np.save(tmp_path / "nan.npy", x)
    out_path = tmp_path / "o.npz"
    _assert_one_line_error(*_run(capsys, "export", str(tmp_path / "nan.npy"), "-o",
                                 str(out_path)),
                           "has 2 NaN/inf value(s), the first at index (1, 2)",
                           "--nonfinite saturate")
    assert not out_path.exists()
    code, _, _ = _run(capsys, "export", str(tmp_path / "nan.npy"), "-o", str(out_path),
                      "--nonfinite", "saturate")
    assert code == 0
    with np.load(out_path, allow_pickle=False) as archive:
        codes = archive["codes"]
        meta = json.loads(str(archive["metadata"]))
    assert codes[2, 0] == 127 and codes[1, 2] == 0  # inf saturates, NaN -> zero point
    assert meta["report"]["n_nonfinite"] == 2


def _sharded(tmp_path):
    """Two shards and the index a Hugging Face writer produces for them."""
    first = {"a.weight": RNG.standard_normal((6, 4)).astype(np.float32)}
    second = {"b.weight": RNG.standard_normal((5, 4)).astype(ml_dtypes.bfloat16),
              "b.bias": np.zeros(4, np.float32)}
    write(tmp_path / "model-00001-of-00002.safetensors", safetensors_bytes(first))
    write(tmp_path / "model-00002-of-00002.safetensors", safetensors_bytes(second))
    index = {"metadata": {"total_size": 0},
             "weight_map": {**{k: "model-00001-of-00002.safetensors" for k in first},
                            **{k: "model-00002-of-00002.safetensors" for k in second}}}
    path = tmp_path / "model.safetensors.index.json"
    path.write_text(json.dumps(index))
    return path


@pytest.mark.parametrize("via", ["index", "directory"])
def test_scan_sharded_checkpoint(capsys, tmp_path, via):
    index = _sharded(tmp_path)
    code, out, _ = _run(capsys, "scan", str(index if via == "index" else tmp_path), "--json")
    assert code == 0
    rows = {t["name"]: t["file"] for t in json.loads(out)["tensors"]}
    assert rows == {"a.weight": "model-00001-of-00002.safetensors",
                    "b.weight": "model-00002-of-00002.safetensors",
                    "b.bias": "model-00002-of-00002.safetensors"}


@pytest.mark.parametrize("shard, fragment", [
    ("../outside.safetensors", "not a plain file name in the index's directory; refused"),
    ("/etc/passwd", "not a plain file name"),
    ("missing.safetensors", "'missing.safetensors', which does not exist"),
])
def test_scan_index_cannot_point_outside_its_directory(capsys, tmp_path, shard, fragment):
    index = tmp_path / "m.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": {"w": shard}}))
    _assert_one_line_error(*_run(capsys, "scan", str(index)), fragment)


def test_scan_bad_index_and_empty_directory(capsys, tmp_path):
    index = write(tmp_path / "m.index.json", b"{not json")
    _assert_one_line_error(*_run(capsys, "scan", str(index)), "not a valid JSON checkpoint index")
    write(index, b'{"weight_map": {}}')
    _assert_one_line_error(*_run(capsys, "scan", str(index)), "has no weight_map")
    (tmp_path / "empty").mkdir()
    _assert_one_line_error(*_run(capsys, "scan", str(tmp_path / "empty")),
                           "is a directory without .safetensors files")
