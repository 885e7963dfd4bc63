"""A tensor prepared only when a report needs it, with the prepared tensor's numbers.

Why: ``quantscope report`` and the window prepare a tensor above
:data:`~quantscope.state.pane_rules.DIRECT_MAX` elements and take its per-tensor and
per-channel reports from sorted prefix sums, whose error sums differ from a direct pass's in
the last digits. ``scan --formats`` must print those very numbers, yet preparing (sorting)
every tensor would cost it more than its whole format search: most tensors' winners are block
formats, whose prepared report is the direct pass anyway. So the preparation is made on the
first report that reads sorted rows
(:func:`~quantscope.core.stats.prepared.reads_sorted_rows`), exactly as ``report`` makes it
(:func:`~quantscope.state.source.prepare_tensor` under the same settings), and every other
report is the direct pass, which is what the prepared tensor gives for those parameters.

What it costs when it is made: ``report``'s own preparation, a sort of the tensor and of the
layouts the reports read (measured on a 32768x300 float32 weight whose winners are int8 per
channel and GPTQ INT4 g128: +0.3-0.45 s of processor time and +317 MB peak memory for 39 MB of
values; nothing on the 2048x2048 weights of ``bench/scan_speed.py``, won by llama.cpp's types).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from quantscope.core import Prepared, QuantParams, QuantReport, analyze
from quantscope.core.stats.prepared import reads_sorted_rows

if TYPE_CHECKING:  # for the annotations only: the format table loads Numba
    from quantscope.core.formats.catalog import FormatParams


class PreparedOnDemand:
    """Reports on ``x`` equal to those of ``prepare_tensor(x, settings)``'s preparation, which
    is made on the first report that needs it (see the module docstring)."""

    def __init__(self, x: np.ndarray, settings) -> None:
        self.x, self.settings = x, settings
        self._prepared: Prepared | None = None

    @property
    def made(self) -> bool:
        """Whether the tensor has been prepared (a report needed its sorted rows)."""
        return self._prepared is not None

    def analyze(self, params: QuantParams | FormatParams) -> QuantReport:
        """The report the prepared tensor gives for ``params``."""
        if not reads_sorted_rows(params, self.x.shape):
            return analyze(self.x, params)
        if self._prepared is None:
            from quantscope.state.source import prepare_tensor  # loads the file readers

            self._prepared = prepare_tensor(self.x, self.settings, warm=False)
        return self._prepared.analyze(params)
