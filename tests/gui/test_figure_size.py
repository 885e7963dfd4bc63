"""``quantscope.figure(size=...)`` returns a picture of exactly twice that many pixels, with
every font and at sizes below what the panes' numbers need (they are laid out larger and
drawn scaled down, not refused), and an SVG displayed at that size."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QImage

import quantscope as qs


@pytest.mark.parametrize("size", [(1000, 640), (800, 500)])
def test_the_picture_is_twice_the_size_asked(fonts, size):
    x = np.random.default_rng(4).standard_normal((128, 256)).astype(np.float32)
    fig = qs.figure(x, bits=4, size=size, svg=size == (800, 500))
    image = QImage.fromData(fig.png)
    assert (image.width(), image.height()) == (2 * size[0], 2 * size[1])
    assert fig.size == size
    # drawn, not blank: many colours, and the panes' frames reach both far edges
    colors = {image.pixel(i, j) for i in range(0, image.width(), 7)
              for j in range(0, image.height(), 7)}
    assert len(colors) > 50
    right = {image.pixel(image.width() - 1 - i, image.height() // 2) for i in range(40)}
    assert len(right) > 1
    if fig.svg is not None:
        assert f'width="{size[0]}"' in fig.svg and f'height="{size[1]}"' in fig.svg
    expect = qs.analyze(x, qs.choose_qparams(x, bits=4)).sqnr_db
    assert fig.numbers["schemes"]["symmetric/tensor"]["sqnr_db"] == pytest.approx(expect,
                                                                                  rel=1e-12)
