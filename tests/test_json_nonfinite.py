"""Every JSON quantscope writes, on tensors that quantize exactly (SQNR = inf): numbers stay
numbers, an infinity is ``null`` with a ``"nonfinite"`` flag, and no string "inf" / "nan"
stands where a number belongs (``jq``, pandas and ``JSON.parse`` do arithmetic on the column).

The tensors are built so that the exact case is certain, not hoped for: a grid of multiples of
0.5 from -63.5 to 63.5 is symmetric int8 per tensor with scale 0.5 exactly, and groups of
multiples of 0.25 from -2 to 1.75 are int4 g128 asymmetric with scale 0.25 and zero point 0.
"""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import quantscope as qs
from oracles import need
from quantscope.cli import main

#: The strings a non-finite number turns into when it is written as text.
NONFINITE_WORDS = {"inf", "-inf", "+inf", "nan", "infinity", "-infinity"}


def _exact_grid(rows: int = 8) -> np.ndarray:
    """Every row the same 255 multiples of 0.5: min/max symmetric int8 is lossless."""
    return np.tile(np.arange(-127, 128, dtype=np.float32) * 0.5, (rows, 1))


def nonfinite_strings(doc, path: str = "$") -> list[str]:
    """Where ``doc`` holds a non-finite word as a value, outside a ``"nonfinite"`` flags
    object (whose values name what the ``null`` beside them was)."""
    found = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "nonfinite":
                assert isinstance(v, dict) and all(doc.get(f.split("[")[0], 0) is None
                                                   or "[" in f for f in v), (path, v)
                continue
            found += nonfinite_strings(v, f"{path}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += nonfinite_strings(v, f"{path}[{i}]")
    elif isinstance(doc, str) and doc.strip().lower() in NONFINITE_WORDS:
        found.append(path)
    return found


def flags(doc) -> list[dict]:
    """Every ``"nonfinite"`` flags object in ``doc``."""
    out = []
    if isinstance(doc, dict):
        if "nonfinite" in doc:
            out.append(doc["nonfinite"])
        for v in doc.values():
            out += flags(v)
    elif isinstance(doc, list):
        for v in doc:
            out += flags(v)
    return out


def _strict(text: str):
    """The document, parsed as strict JSON (``Infinity`` / ``NaN`` literals refused)."""
    def refuse(word):
        raise AssertionError(f"{word} literal in JSON")
    return json.loads(text, parse_constant=refuse)


def _cli_json(*argv) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return _strict(out.getvalue())


def _check(doc, min_flags: int = 1) -> None:
    assert nonfinite_strings(doc) == []
    found = flags(doc)
    assert len(found) >= min_flags  # the exact case really is in the document
    assert all(v in ("inf", "-inf", "nan") for f in found for v in f.values())


@pytest.fixture(scope="module")
def exact_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exact")
    x = _exact_grid()
    np.save(folder / "exact.npy", x)
    other = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    np.savez(folder / "model.npz", **{"fc.weight": x, "other.weight": other})
    return folder


def test_report_json(exact_files):
    doc = _cli_json("report", str(exact_files / "exact.npy"), "--json")
    _check(doc)
    pane = doc["schemes"]["symmetric/tensor"]
    assert pane["sqnr_db"] is None and pane["nonfinite"] == {"sqnr_db": "inf"}
    assert pane["mse"] == 0.0 and pane["scale"] == 0.5


def test_report_format_json(exact_files):
    doc = _cli_json("report", str(exact_files / "exact.npy"), "--format", "int8",
                    "--json")
    _check(doc)


def test_scan_json_with_and_without_formats(exact_files):
    both = _cli_json("scan", str(exact_files / "model.npz"), str(exact_files / "exact.npy"),
                     "--json")  # several checkpoints: one document per model
    assert len(both["models"]) == 2
    _check(both, min_flags=2)
    for extra in ((), ("--formats",)):
        doc = _cli_json("scan", str(exact_files / "model.npz"), "--json", *extra)
        _check(doc)
        row = next(t for t in doc["tensors"] if t["name"] == "fc.weight")
        assert row["per_tensor_sqnr_db"] is None
        assert row["nonfinite"]["per_tensor_sqnr_db"] == "inf"
        assert isinstance(next(t for t in doc["tensors"]
                               if t["name"] == "other.weight")["per_tensor_sqnr_db"], float)


def test_plan_json(exact_files):
    """A budget of 8.5 bits leaves the exact tensor in int8 (its error is zero)."""
    doc = _cli_json("plan", str(exact_files / "model.npz"), "--budget", "8.5", "--json",
                    "--formats", "int8")
    _check(doc)
    assert doc["schema"].startswith("quantscope.plan/")
    row = next(t for t in doc["tensors"] if t["name"] == "fc.weight")
    assert row["sqnr_db"] is None and row["nonfinite"] == {"sqnr_db": "inf"}
    assert row["error"] == 0.0


def test_scan_reference_json(tmp_path):
    """A stored int4 checkpoint whose weights its grid holds exactly: nothing lost."""
    torch = need("torch")
    need("compressed_tensors")
    save_file = need("safetensors.torch").save_file
    from stored_builders import compress_checkpoint

    grid = np.tile(np.arange(-8, 8, dtype=np.float32) * 0.25, (64, 16))  # 64 x 256
    original = tmp_path / "original.safetensors"
    save_file({"layer.weight": torch.from_numpy(grid).to(torch.bfloat16)}, str(original))
    quantized = compress_checkpoint(original, tmp_path / "w4", bits=4, group_size=128)
    doc = _cli_json("scan", str(quantized), "--reference", str(original), "--json")
    _check(doc)
    assert doc["schema"] == "quantscope.scan-reference/1"
    stored = doc["tensors"][0]["stored"]
    assert stored["sqnr_db"] is None and stored["nonfinite"] == {"sqnr_db": "inf"}
    overview = _cli_json("scan", str(quantized), "--json")  # the stored codes and scales
    assert overview["schema"] == "quantscope.scan-stored/1" and nonfinite_strings(overview) == []


def test_observe_json():
    """Activation rows: a Linear fed the exact grid."""
    torch = need("torch")
    model = torch.nn.Sequential(torch.nn.Linear(255, 4))
    batch = torch.from_numpy(_exact_grid(6))
    table = qs.observe(model, [batch], methods=("minmax",))
    doc = _strict(table.to_json())
    _check(doc)
    figures = doc["activations"][0]["figures"]["int8/tensor/minmax"]
    assert figures["sqnr_db"] is None and figures["nonfinite"] == {"sqnr_db": "inf"}
