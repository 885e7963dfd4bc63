"""A comparison of number formats in presentation mode at 1280x720: the headline names the
formats on show (not the int schemes the pane keys name otherwise), and each pane's detail
line is shown whole or left out, never cut."""

from __future__ import annotations

import pytest
from gui_measure import cut_labels, project

from quantscope.state.formats import DEFAULT_COMPARISON


@pytest.fixture(scope="module")
def comparing(shared_app_window, request):
    """One window comparing the default formats in a talk, for both tests: each shows every
    pair in turn and changes nothing else."""
    from pytestqt.qtbot import QtBot

    win = shared_app_window(1000)
    win.state.update_settings(formats=DEFAULT_COMPARISON)
    project(win, QtBot(request))
    win.grab()
    yield win
    win.presentation_action.setChecked(False)  # the theme is process-wide


def test_pane_details_are_whole_or_left_out(comparing, qtbot):
    win = comparing
    for pair in "1234":
        win.stage.show_pair(pair)
        qtbot.wait(50)
        win.grab()
        for key in win.stage.visible_panes():
            detail = win.panes[key].detail
            room = detail.contentsRect().width()
            assert detail.fontMetrics().horizontalAdvance(detail.text()) <= room, (
                key, detail.text(), room)
        assert not cut_labels(win), cut_labels(win)


def test_the_headline_names_the_formats_on_show(comparing, qtbot):
    win = comparing
    for pair in "1234":
        win.stage.show_pair(pair)
        qtbot.wait(20)
        text = win.headline.text()
        for key in win.stage.visible_panes():
            title = win.panes[key].title.text()  # "MXFP4 · blocks of 32"
            assert text.count(title.replace(" · ", " ")) == 1, (pair, title, text)
        assert "symmetric" not in text, text
        assert not text.endswith("· int8") and "E8M0" not in text, text
