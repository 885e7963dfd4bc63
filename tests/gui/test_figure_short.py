"""A short figure (1000x640) gives its histograms the height: the captions, strips and the
headline's explanation go first, and each histogram keeps a readable share of the picture.
Laid out with them, a histogram's plot area was under one of 640 rows."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage

import quantscope as qs
from quantscope import figures

#: Each histogram's plot area, as a share of the figure's height, at least (about 0.15 is
#: what the short layout gives; the full layout left under 0.002).
MIN_SHARE = 0.12


@pytest.fixture
def measured(monkeypatch):
    """The laid-out board's histogram heights and its height, taken as it is rendered."""
    seen: dict = {}
    render = figures._render

    def measuring(target, svg, pixels):
        seen["height"] = target.height()
        seen["plots"] = {key: pane.plot.getViewBox().height()
                         for key, pane in target.panes.items()}
        seen["strips"] = [pane.strip.isVisible() for pane in target.panes.values()]
        seen["captions"] = [pane.caption.isVisible() for pane in target.panes.values()]
        seen["headline"] = target.headline.text()
        return render(target, svg, pixels)

    monkeypatch.setattr(figures, "_render", measuring)
    return seen


def test_a_short_figure_gives_each_histogram_its_share(qapp, measured):
    x = np.random.default_rng(30).standard_normal((128, 256)).astype(np.float32)
    x[3, 7] = 40.0  # an outlier: the captions would have two lines to say about it
    fig = qs.figure(x, bits=4, size=(1000, 640))
    image = QImage.fromData(fig.png)
    assert (image.width(), image.height()) == (2000, 1280)
    assert fig.size == (1000, 640)
    assert set(measured["plots"]) == set(qs.state.PANES)
    for key, h in measured["plots"].items():
        assert h >= MIN_SHARE * measured["height"], (key, h, measured["height"])
    assert not any(measured["strips"]) and not any(measured["captions"])
    assert measured["headline"].endswith("quantized to int4 four ways")


def test_a_tall_figure_keeps_captions_strips_and_the_full_headline(qapp, measured):
    x = np.random.default_rng(30).standard_normal((128, 256)).astype(np.float32)
    qs.figure(x, bits=4, size=(1280, 960))
    assert all(measured["strips"]) and all(measured["captions"])
    assert "each pane shows" in measured["headline"]
