"""Bit-width view: each curve is the engine's SQNR for the pane's rules at 2..8 bits, the marker
follows the bit width and sets it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from quantscope.core import analyze
from quantscope.gui.views.bitwidth import BitwidthView
from quantscope.state import PANES, ExplorerState, Source, pane_params


@pytest.fixture
def state() -> ExplorerState:
    x = np.random.default_rng(8).uniform(-1, 1, size=(16, 512)).astype(np.float32)
    st = ExplorerState()
    st.set_tensor(x, Source("array", "uniform", axis=0))
    return st


@pytest.fixture
def view(qtbot, state) -> BitwidthView:
    v = BitwidthView(state)
    qtbot.addWidget(v)
    v.resize(800, 500)
    v.show()
    qtbot.waitUntil(lambda: bool(v.data), timeout=20_000)
    yield v
    v.job.shutdown()


def test_curves_are_the_engine_numbers(view, state):
    for pane in PANES:
        bits, sq = view.curves[pane].getData()
        assert bits.tolist() == [2, 3, 4, 5, 6, 7, 8]
        for b, s in zip(bits, sq, strict=True):
            params = pane_params(state.tensor, pane, dataclasses.replace(state.settings,
                                                                         bits=int(b)))
            assert s == analyze(state.tensor, params).sqnr_db
    # a uniform tensor: about 6 dB per bit in every scheme
    assert all(abs(c.db_per_bit() - 6.02) < 1.5 for c in view.data.values())
    assert "dB gained per bit" in view.summary.text()


def test_marker_follows_and_sets_the_bit_width(view, state, qtbot):
    assert view.current.value() == 8
    state.update_settings(bits=5)
    assert view.current.value() == 5
    qtbot.wait(50)
    assert not view.job.busy  # the width is marked, the curves need no recomputation
    view.current.setValue(3.4)  # a drag ends between two widths: it snaps
    view._on_marker_released()
    assert state.settings.bits == 3
    assert view.current.value() == 3


def test_other_settings_recompute_the_curves(view, state, qtbot):
    before = view.data["symmetric/tensor"]
    state.update_settings(method="manual", manual_clip=(-0.5, 0.5))
    qtbot.wait(50)
    assert view.data["symmetric/tensor"] is before  # waits for the panes' numbers first
    state.compute()
    qtbot.waitUntil(lambda: view.data["symmetric/tensor"] is not before, timeout=20_000)
    after = view.data["symmetric/tensor"]
    assert after.clipping_mse[-1] > 0 and before.clipping_mse[-1] == 0


def test_legend_says_per_group_when_groups_are_on(view, state, qtbot):
    state.update_settings(group_size=128, axis=1)
    state.compute()
    qtbot.waitUntil(lambda: view.shown_key is not None and view.shown_key.group_size == 128,
                    timeout=20_000)
    names = [label.text for _, label in view.legend.items]
    assert "Symmetric · per-group (128)" in names and "Asymmetric · per-tensor" in names
