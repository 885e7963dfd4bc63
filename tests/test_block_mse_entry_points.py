"""``method="mse"`` on a block format gives one number whichever entry point prints it.

The window's comparison pane (the state's reports), ``quantscope report --format --json``,
``quantscope export --format``, ``qs.figure`` and the engine called directly
(``qs.analyze(x, qs.choose_qparams(x, format=..., method="mse"))``) all map the MSE method to
the same block scales, so they print the same SQNR to the last digit; and it is not the
min/max rule's SQNR (else the method could have been dropped on the way unnoticed).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import quantscope as qs
from quantscope.cli import main
from quantscope.state import PANES, ComputeRequest, Settings, compute_reports, pane_title
from quantscope.state.pane_rules import DIRECT_MAX

#: Block formats whose method="mse" searches each block's stored scale: four panes' worth.
NAMES = ("mxfp4", "nvfp4", "nvfp4_modelopt", "nf4")


@pytest.fixture(scope="module")
def weights(tmp_path_factory, query_weight, gelu_activations) -> dict[str, tuple[str, np.ndarray]]:
    """Real activations above ``DIRECT_MAX`` (prepared by ``report``) and a real weight below
    it, each saved as a file the commands read."""
    folder = tmp_path_factory.mktemp("block_mse")
    out = {}
    for label, x in (("query.weight", query_weight), ("gelu.activations", gelu_activations)):
        path = folder / f"{label}.npy"
        np.save(path, x)
        out[label] = (str(path), x)
    assert gelu_activations.size > DIRECT_MAX > query_weight.size
    return out


def _json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("label", ["query.weight", "gelu.activations"])
def test_every_entry_point_prints_the_block_mse_number(weights, capsys, tmp_path, label):
    path, x = weights[label]
    report = _json(capsys, ["report", path, "--json", "--method", "mse",
                            *[a for n in NAMES for a in ("--format", n)]])
    minmax = _json(capsys, ["report", path, "--json",
                            *[a for n in NAMES for a in ("--format", n)]])
    formats = NAMES
    state = compute_reports(ComputeRequest(1, x, Settings(formats=formats, method="mse"),
                                           qs.prepare(x) if x.size > DIRECT_MAX else None))
    assert not state.errors
    for name in NAMES:
        engine = qs.analyze(x, qs.choose_qparams(x, format=name, method="mse"))
        printed = report["formats"][name]
        assert printed["sqnr_db"] == engine.sqnr_db, name
        assert printed["mse"] == engine.mse, name
        assert printed["sqnr_db"] > minmax["formats"][name]["sqnr_db"], name
        assert state.reports[PANES[NAMES.index(name)]].sqnr_db == engine.sqnr_db, name
        out = tmp_path / f"{name}.npz"
        assert main(["export", path, "-o", str(out), "--format", name, "--method", "mse"]) == 0
        capsys.readouterr()
        with np.load(out, allow_pickle=False) as archive:
            meta = json.loads(str(archive["metadata"]))
            assert meta["report"]["sqnr_db"] == engine.sqnr_db, name
            assert meta["scheme"]["method"] == "mse"
            assert np.array_equal(archive["scale"], qs.choose_qparams(
                x, format=name, method="mse").scale)
            if name == "nf4":  # the searched scale is what the absmax slot stores
                assert np.array_equal(archive["block_scales"], archive["scale"])


def test_the_pane_title_says_the_scales_are_searched():
    s = Settings(formats=("mxfp4", "nvfp4", "nf4", "int8/channel"), method="mse")
    titles = [pane_title(p, s) for p in PANES]
    assert titles[0] == "MXFP4 · blocks of 32 · MSE-optimal E8M0 scales"
    assert titles[1] == "NVFP4 (torchao) · blocks of 16 · MSE-optimal E4M3 scales, FP32 from amax"
    assert titles[2] == "NF4 · blocks of 64 · MSE-optimal float32 scales"
    plain = Settings(formats=s.formats)
    assert pane_title("symmetric/tensor", plain) == "MXFP4 · blocks of 32 · E8M0 scales"
    assert pane_title(PANES[2], plain) == "NF4 · blocks of 64 · absmax scales"


def test_figure_shows_the_block_mse_number(query_weight):
    fig = qs.figure(query_weight, formats=("mxfp4", "int8/channel", "fp8_e4m3/tensor",
                                           "nf4"), method="mse", size=(640, 480))
    for name in ("mxfp4", "nf4"):
        engine = qs.analyze(query_weight, qs.choose_qparams(query_weight, format=name,
                                                            method="mse"))
        assert fig.numbers["formats"][name]["sqnr_db"] == engine.sqnr_db, name
