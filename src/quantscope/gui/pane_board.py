"""Panes on a live state without a window: the headline and the panes a figure draws.

``quantscope.figure`` needs the panes as the window draws them, not the window: no controls,
menus, views, status bar or scheduler of its own. :class:`PaneBoard` builds only the panes it
is asked for (the window's 2x2 grid for all four, one row for fewer) and the headline above
them, styled as the window is, and draws what the live state holds once its results are in.
It subscribes to nothing and computes nothing: the caller waits for the state
(:meth:`quantscope.state.live.LiveExplorer.wait`) and then calls :meth:`show`.

A short board (a figure under :data:`~quantscope.gui.compact.SHORT_ROWS` rows, e.g. 1000x640)
gives the histograms the height first, as the short window does: the captions and the
code-occupancy strips are left out ("codes used" stays in the table) and the headline keeps
only what it is about. Laid out with all of them, a 640-row figure left each histogram about
no plot area at all between its title, key, caption and numbers.
"""

from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from quantscope.gui.caption_label import pair_captions
from quantscope.gui.pane import Pane, link_plots
from quantscope.gui.style import base_font, light_palette, reserve_lines
from quantscope.gui.window_layout import follow_user_zoom
from quantscope.state import PANES, ExplorerState, pane_title


class PaneBoard(QWidget):
    """The headline over the panes ``keys`` of ``state`` (see the module docstring).

    Attributes
    ----------
    panes : dict[str, Pane]
        The panes drawn, by key, in the window's order.
    headline : QLabel
    """

    def __init__(self, state: ExplorerState, keys: list[str] | None = None, *,
                 log_counts: bool = True, short: bool = False) -> None:
        super().__init__()
        self.state = state
        self.log_counts = log_counts
        self.short = short
        keys = [k for k in PANES if keys is None or k in keys]
        self.setPalette(light_palette(self.palette()))
        self.setFont(base_font(self.font()))
        outer = QVBoxLayout(self)
        outer.setContentsMargins(6, 6, 6, 0)  # the window's central margins
        self.headline = QLabel("")
        self.headline.setObjectName("headline")
        self.headline.setWordWrap(not short)  # short: one line, its text shortened to fit
        reserve_lines(self.headline, 1, slack=0)
        outer.addWidget(self.headline)
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setSpacing(6)
        self.panes: dict[str, Pane] = {}
        for i, key in enumerate(keys):
            pane = Pane(key, pane_title(key, state.settings))
            pane.histogram_source = state.histogram
            pane.display_source = state.display
            pane.clipped_source = state.clipped_histogram
            pane.set_short(short)
            # all four: the window's 2x2 grid; fewer: one row, in the window's order
            grid.addWidget(pane, *(divmod(i, 2) if len(keys) == len(PANES) else (0, i)))
            self.panes[key] = pane
        rows = 2 if len(keys) == len(PANES) else 1
        for i in range(min(2, len(keys))):
            grid.setColumnStretch(i, 1)
        for i in range(rows):
            grid.setRowStretch(i, 1)
        outer.addLayout(grid, 1)
        link_plots(list(self.panes.values()))
        pair_captions([pane.caption for pane in self.panes.values()])  # a row reads alike
        follow_user_zoom([pane.strip for pane in self.panes.values()])
        self._apply_theme()

    def _apply_theme(self) -> None:
        from quantscope.gui.theme import apply_theme, stylesheet

        theme = apply_theme(self)
        self.setStyleSheet(stylesheet(theme))  # the window's look (it sets it on itself)

    def show_state(self, captions: bool = True) -> None:
        """Draw the state's tensor and results: titles, histogram, each pane's report (or
        the engine's refusal), the captions and the headline."""
        st = self.state
        shape = tuple(st.tensor.shape) if st.tensor is not None else None
        for key, pane in self.panes.items():
            pane.set_title(pane_title(key, st.settings, shape))
            if st.overview is not None:
                pane.show_range(st.overview)
                pane.set_overview(st.overview, self.log_counts)
            if key in st.results:
                pane.set_report(st.results[key])
            else:
                pane.set_error(st.errors.get(key, ""))
        if captions and not self.short and st.results and st.overview is not None:
            from quantscope.core.labs.captions import pane_captions

            for key, caption in pane_captions(st.results, st.overview.min,
                                              st.overview.max).items():
                if key in self.panes:
                    self.panes[key].set_caption(caption.text)
        self.headline.setText(headline(st, list(self.panes), short=self.short))


def headline(st: ExplorerState, keys: list[str], *, short: bool = False) -> str:
    """What the picture shows, in one line: the window's headline for all four panes; the
    panes' names for fewer (the window's "four ways" would not be true of them). ``short``
    leaves out what each pane shows (the key under each title says it), so the line fits a
    1000-pixel figure without taking a second row from the histograms."""
    what = st.source.label() if st.source is not None else "tensor"
    if st.tensor is not None and (st.source is None or st.source.kind != "generator"):
        what += f" ({'×'.join(map(str, st.tensor.shape))})"  # a generator's label has it
    if len(keys) == len(PANES):
        if short:
            return (f"{what} in four number formats" if st.settings.formats is not None
                    else f"{what} quantized to int{st.settings.bits} four ways")
        if st.settings.formats is not None:
            return (f"{what} in four number formats: each pane shows the values' histogram, "
                    "the format's representable values over it, and the error")
        return (f"{what} quantized to int{st.settings.bits} four ways: each pane shows the "
                f"values' histogram, the code grid over it, and the error")
    shape = tuple(st.tensor.shape) if st.tensor is not None else None
    titles = [pane_title(k, st.settings, shape) for k in keys]
    how = "" if st.settings.formats is not None else f" quantized to int{st.settings.bits}"
    return f"{what}{how}: {' and '.join(titles)}"


__all__ = ["PaneBoard", "headline"]
