"""A pane's caption reads as phrases on a projector: it breaks between its clauses (never
"…share 9 / of 255 codes" or "…half a / step (0.003)"), keeps to the two lines the pane
reserves for it, and a new caption never resizes the plots above it."""

from __future__ import annotations

from itertools import pairwise

import pytest
from gui_measure import project
from PySide6.QtGui import QFont, QFontMetricsF, QTextLayout, QTextOption

from quantscope.core.labs.captions import pane_captions
from quantscope.state import Source

CAPTIONS = [
    "12 values up to 24.8 stretch the window: 99% of values share 9 of 255 codes",
    "rounding only: values use 36 of 255 codes, each error ≤ half a step (0.003)",
    "worst channel 453: 29.8 dB vs median 39.7 dB; its values use 9 of 255 codes",
    "12 values out to -3.2 and 24.8 stretch the window: 99% of values share 9 of 255 codes; "
    "12 values clipped (3% of the error)",
    "clipping dominates: 0.7% of values clipped cause 80% of the error",
]
#: Words a line may not end on: each leads into the next.
LEADING = {"a", "an", "the", "of", "to", "at", "up", "vs", "and", "half", "each", "its", "≤"}


def _is_number(word: str) -> bool:
    return any(c.isdigit() for c in word) and not word.endswith((":", ";", ","))


def drawn_lines(text: str, font: QFont, width: float) -> list[str]:
    """The lines a word-wrapped label draws ``text`` in, ``width`` pixels wide."""
    layout = QTextLayout(text.replace("\n", "\u2028"), font)
    option = QTextOption()
    option.setWrapMode(QTextOption.WrapMode.WordWrap)
    layout.setTextOption(option)
    layout.beginLayout()
    lines = []
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        lines.append(text[line.textStart():line.textStart() + line.textLength()]
                     .replace("\u00a0", " ").strip())
    layout.endLayout()
    return lines


def split_phrases(lines: list[str]) -> list[str]:
    """The line breaks among ``lines`` that split a phrase."""
    bad = []
    for line, after in pairwise(lines):
        last = line.split(" ")[-1]
        first = after.split(" ")[0]
        if last.endswith((":", ";", ",", "…")):
            continue
        if _is_number(last) or last.lower() in LEADING or first.startswith("(") \
                or _is_number(first):
            bad.append(f"{line!r} / {after!r}")
    return bad


def _shown(label) -> str:
    """The text as the label draws it (a plain QLabel draws its ``text()``)."""
    return label.shown_text() if hasattr(label, "shown_text") else label.text()


@pytest.mark.parametrize("caption", CAPTIONS)
@pytest.mark.parametrize("chars", [40, 60, 80, 100])
def test_a_caption_breaks_between_phrases_in_two_lines(qapp, caption, chars):
    from quantscope.gui.caption_label import fit_caption

    font = QFont()
    font.setPixelSize(18)
    font.setItalic(True)
    metrics = QFontMetricsF(font)
    width = chars * metrics.averageCharWidth()
    shown = fit_caption(caption, metrics, width, 2)
    lines = drawn_lines(shown, font, width)
    assert len(lines) <= 2, lines
    assert not split_phrases(lines), lines
    assert all(metrics.horizontalAdvance(line) <= width + 1 for line in lines), lines
    whole = " ".join(lines)
    assert whole == caption or (whole.endswith(" …")
                                and caption.startswith(whole.removesuffix(" …"))), whole


def test_a_caption_broken_after_its_clause(qapp):
    from quantscope.gui.caption_label import fit_caption

    font = QFont()
    font.setPixelSize(18)
    metrics = QFontMetricsF(font)
    text = CAPTIONS[0]
    width = metrics.horizontalAdvance(text) * 0.8
    assert fit_caption(text, metrics, width) == (
        "12 values up to 24.8 stretch the window:\n99% of values share 9 of 255 codes")
    assert fit_caption(text, metrics, metrics.horizontalAdvance(text) + 1) == text


@pytest.fixture(scope="module")
def projected_once(shared_app_window, request):
    """One window showing the demo tensor in presentation mode, for the tests below."""
    from pytestqt.qtbot import QtBot

    win = shared_app_window(1000)
    project(win, QtBot(request), Source("sample", "gelu_activations"))
    yield win
    win.presentation_action.setChecked(False)  # the theme is process-wide


@pytest.fixture
def projected(projected_once, qtbot):
    """The demo tensor in presentation mode at 1280x720, as a speaker projects it: the one
    window back on the first pair, at that size, each pane with its own caption again."""
    from quantscope.gui.stage import DEFAULT_PAIR

    win = projected_once
    win.stage.show_pair(DEFAULT_PAIR)
    project(win, qtbot)
    win.views_controller.update_captions()  # a test may have set one of its own
    st = win.state
    want = pane_captions(st.results, st.overview.min, st.overview.max)
    assert all(win.panes[k].caption.text() == want[k].text for k in want)
    return win


def test_projected_captions_break_between_phrases(projected, qtbot):
    win = projected
    for pair in "12":
        win.stage.show_pair(pair)
        qtbot.wait(50)
        win.grab()
        shown = [win.panes[k] for k in win.stage.visible_panes()]
        assert len(shown) == 2
        for pane in shown:
            label = pane.caption
            assert label.isVisible() and label.text()
            lines = drawn_lines(_shown(label), label.font(), label.contentsRect().width())
            assert 1 <= len(lines) <= 2, (pane.key, lines)
            assert not split_phrases(lines), (pane.key, lines)


def test_a_caption_too_long_for_two_lines_leaves_the_plots_their_size(projected, qtbot):
    win = projected
    pane = win.panes["symmetric/tensor"]
    qtbot.wait(20)
    size = pane.graphics.size()
    long = " ".join([CAPTIONS[3]] * 3)
    pane.set_caption(long)
    qtbot.wait(50)
    win.grab()
    assert pane.graphics.size() == size
    assert pane.caption.text() == long and pane.caption.toolTip() == long
    lines = drawn_lines(_shown(pane.caption), pane.caption.font(),
                        pane.caption.contentsRect().width())
    assert len(lines) == 2 and lines[-1].endswith("…"), lines


def test_the_channel_axis_rule_reads_whole_in_a_laptop_window(make_window, qtbot):
    """At 1280x720 outside a talk the controls' "tensor is" box shows the rule that picked
    the channel axis in full (it read 'name "gelu_activat'), in at most two lines, broken
    between words."""
    from PySide6.QtWidgets import QStyle, QStyleOptionComboBox

    win = make_window()
    win.load(Source("sample", "gelu_activations"), pick=False)
    qtbot.waitUntil(win.all_shown, timeout=60_000)
    win.resize(1280, 720)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == (1280, 720), timeout=5000)
    qtbot.wait(50)
    win.grab()
    box = win.controls.role
    assert box.currentText() == 'name "gelu_activations" says activation'
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    field = box.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                       QStyle.SubControl.SC_ComboBoxEditField, box)
    shown = box.shown_text() if hasattr(box, "shown_text") else box.currentText()
    lines = drawn_lines(shown, box.font(), field.width())
    metrics = QFontMetricsF(box.font())
    assert " ".join(lines) == box.currentText(), lines
    assert all(metrics.horizontalAdvance(line) <= field.width() for line in lines), (
        lines, field.width())
    assert len(lines) * metrics.lineSpacing() <= field.height() + 1, (lines, field.height())


def _row_of_captions(qtbot, width: int):
    """``(host, captions)``: two paired captions side by side, each ``width`` pixels wide
    (the caller keeps ``host``: the labels live as long as it does)."""
    from PySide6.QtWidgets import QHBoxLayout, QWidget

    from quantscope.gui.caption_label import CaptionLabel, pair_captions

    host = QWidget()
    row = QHBoxLayout(host)
    labels = [CaptionLabel(2), CaptionLabel(2)]
    for label in labels:
        label.setFixedWidth(width)
        row.addWidget(label)
    pair_captions(labels)
    qtbot.addWidget(host)
    host.show()
    qtbot.waitExposed(host)
    return host, labels


def test_captions_side_by_side_take_equal_lines(qtbot):
    """Two captions a character apart, at the width where one just fits a line and its twin
    does not: both are broken after the same clause (each was drawn alone before: one on a
    line, the other on two), and their words are all there. Captions of equal length take
    equal lines whatever the width."""
    from quantscope.gui.caption_label import fit_caption

    short = CAPTIONS[0]
    longer = short.replace("share 9 of 255", "share 17 of 256")
    _probe_host, (probe, _) = _row_of_captions(qtbot, 100)  # the host keeps the labels
    metrics = QFontMetricsF(probe.font())
    width = int(metrics.horizontalAdvance(short)) + 2
    assert metrics.horizontalAdvance(longer) > width  # the twin needs a second line alone
    _host, (left, right) = _row_of_captions(qtbot, width)  # the host keeps the labels
    left.setText(short)
    right.setText(longer)
    room = left.contentsRect().width()
    assert fit_caption(short, metrics, room) == short  # alone: one line...
    assert "\n" in fit_caption(longer, metrics, room)  # ...and two
    shown = [drawn_lines(label.shown_text(), label.font(), room) for label in (left, right)]
    assert [len(lines) for lines in shown] == [2, 2], shown
    assert shown[0][0] == shown[1][0] == "12 values up to 24.8 stretch the window:"
    assert [" ".join(lines) for lines in shown] == [short, longer]
    right.setText(short.replace("9 of 255", "7 of 255"))  # equal length: one line each
    assert [len(drawn_lines(label.shown_text(), label.font(), room))
            for label in (left, right)] == [1, 1]
    for chars in (40, 60, 80, 100):  # equal lengths at any width
        narrow = int(chars * metrics.averageCharWidth())
        left.setFixedWidth(narrow)
        right.setFixedWidth(narrow)
        for label in (left, right):
            label.adjustSize()
        qtbot.wait(10)
        counts = {len(drawn_lines(label.shown_text(), label.font(),
                                  label.contentsRect().width())) for label in (left, right)}
        assert len(counts) == 1, (chars, counts)


def test_a_projected_pair_of_captions_takes_equal_lines(projected, qtbot):
    """In a talk at each screen size, the two captions of the pair shown take the same
    number of lines (at 1920x1080 the asymmetric caption, a character longer, took two
    while the symmetric one took one)."""
    win = projected
    for size in [(1280, 720), (1366, 768), (1920, 1080)]:
        win.resize(*size)
        qtbot.waitUntil(lambda size=size: (win.width(), win.height()) == size, timeout=5000)
        for pair in "12":
            win.stage.show_pair(pair)
            qtbot.wait(50)
            win.grab()
            labels = [win.panes[k].caption for k in win.stage.visible_panes()]
            counts = [len(drawn_lines(label.shown_text(), label.font(),
                                      label.contentsRect().width())) for label in labels]
            assert len(labels) == 2 and counts[0] == counts[1], (
                size, pair, counts, [lb.text() for lb in labels])
