"""The four panes keep equal shares of the window whatever they show: a preset that refuses
the asymmetric panes (TensorRT) or a method that changes the captions (entropy) moves no
pane, and undoing it gives every plot back its exact height."""

from __future__ import annotations

import pytest
from gui_measure import settle


def _heights(win) -> dict:
    return {k: (p.height(), round(p.plot.getViewBox().height())) for k, p in win.panes.items()}


@pytest.mark.parametrize("change,undo", [({"runtime": "tensorrt"}, {"runtime": None}),
                                         ({"method": "entropy"}, {"method": "minmax"})])
def test_rows_stay_equal_and_an_undo_restores_every_plot(app_window, qtbot, change, undo):
    win = app_window(1000)
    settle(win, qtbot)
    before = _heights(win)
    win.state.update_settings(**change)
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    settle(win, qtbot)
    during = {k: h for k, (h, _) in _heights(win).items()}
    assert max(during.values()) - min(during.values()) <= 1, during
    win.state.update_settings(**undo)
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    settle(win, qtbot)
    assert _heights(win) == before
