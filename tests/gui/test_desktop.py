"""Desktop conventions: Ctrl+S saves the session (Save As the first time), File ▸ Open Recent
(capped, missing files pruned with a message), the geometry remembered per screen and restored
only where it fits, Help ▸ About, and an accessible name and description on every control.
QSettings point at a temporary directory in every test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PySide6.QtCore import QRect, QSettings, Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

from quantscope.gui.recent import MAX_RECENT, RecentFiles
from quantscope.state import Source


@pytest.fixture(autouse=True)
def temporary_user_settings(tmp_path):
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(tmp_path / "cfg"))
    yield
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                      str(tmp_path / "cfg-after"))


def _store(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "store.ini"), QSettings.Format.IniFormat)


# -- Ctrl+S -----------------------------------------------------------------------------------
def test_ctrl_s_asks_where_the_first_time_then_saves_there(make_window, wait_results, qtbot,
                                                           tmp_path):
    win = make_window()
    win.load(Source.generator("outliers", (64, 128), 3, count=4))
    wait_results(win)
    desk = win.desktop
    assert desk.save_action.shortcut().matches(Qt.Modifier.CTRL | Qt.Key.Key_S).name == (
        "ExactMatch")
    win.activateWindow()
    qtbot.keyClick(win, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)
    assert desk.dialog is not None and desk.dialog.isVisible()  # Save As, no file yet
    path = tmp_path / "talk.json"
    desk.dialog.fileSelected.emit(str(path))
    desk.dialog.close()
    doc = json.loads(path.read_text())
    assert doc["settings"]["bits"] == 8 and doc["source"]["name"] == "outliers"
    assert desk.session_path == str(path)
    win.state.update_settings(bits=5)
    desk.dialog = None
    qtbot.keyClick(win, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier)  # no dialog now
    assert desk.dialog is None
    assert json.loads(path.read_text())["settings"]["bits"] == 5
    assert desk.recent.entries()[0].kind == "session"
    assert desk.recent.entries()[0].path == str(path)


def test_save_failure_is_shown_and_keeps_no_path(make_window, tmp_path):
    win = make_window()
    messages = []
    win.error_shown.connect(messages.append)
    assert not win.desktop.save_to(tmp_path / "no-such-folder" / "s.json")
    assert win.desktop.session_path is None
    assert messages and "not saved" in messages[0]


# -- Open Recent ------------------------------------------------------------------------------
def test_recent_list_is_capped_newest_first_and_deduplicated(tmp_path):
    recent = RecentFiles(_store(tmp_path))
    for i in range(MAX_RECENT + 3):
        recent.add("file", tmp_path / f"t{i}.npy")
    recent.add("file", tmp_path / "t5.npy")
    names = [e.path.rsplit("/", 1)[-1] for e in recent.entries()]
    assert len(names) == MAX_RECENT
    assert names[:3] == ["t5.npy", "t12.npy", "t11.npy"]
    assert names.count("t5.npy") == 1
    with pytest.raises(ValueError, match="kind"):
        recent.add("folder", tmp_path)


def test_recent_menu_prunes_missing_files_with_a_message(make_window, wait_results, qtbot,
                                                         tmp_path):
    a, b, gone = (tmp_path / n for n in ("a.npy", "b.npy", "gone.npy"))
    for p in (a, b, gone):
        np.save(p, np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32))
    win = make_window()
    desk = win.desktop
    desk.remember_files = True
    for p in (a, gone, b):
        win.open_path(str(p))
        qtbot.waitUntil(lambda p=p: win.state.source is not None
                        and win.state.source.name == str(p), timeout=30_000)
        wait_results(win)
    assert [e.path for e in desk.recent.entries()] == [str(b), str(gone), str(a)]
    gone.unlink()
    desk.recent_menu.aboutToShow.emit()
    texts = [act.text() for act in desk.recent_menu.actions()]
    assert any("b.npy" in t for t in texts) and any("a.npy" in t for t in texts)
    assert not any("gone.npy" in t for t in texts)
    assert "removed 1 file that no longer exist" in win.statusBar().currentMessage()
    assert "gone.npy" in win.statusBar().currentMessage()
    assert [e.path for e in RecentFiles(desk.store).entries()] == [str(b), str(a)]
    # picking one opens it
    desk.recent_menu.actions()[1].trigger()  # a.npy
    qtbot.waitUntil(lambda: win.state.source.name == str(a), timeout=30_000)
    # a file removed after the menu was filled: removed on the click, with the message
    b.unlink()
    entry = next(e for e in desk.recent.entries() if e.path == str(b))
    desk.open_recent(entry)
    assert "b.npy" in win.statusBar().currentMessage()
    assert [e.path for e in desk.recent.entries()] == [str(a)]


def test_windows_not_started_by_hand_keep_no_recent_files(make_window, wait_results, qtbot,
                                                          tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.ones((8, 8), np.float32))
    win = make_window()
    win.open_path(str(p))
    qtbot.waitUntil(lambda: win.state.source is not None and win.state.source.name == str(p),
                    timeout=30_000)
    assert win.desktop.recent.entries() == []


def test_recent_session_reopens_and_becomes_ctrl_s_target(make_window, wait_results, qtbot,
                                                          tmp_path):
    win = make_window()
    win.load(Source.generator("normal", (32, 64), 2))
    wait_results(win)
    win.state.update_settings(bits=6)
    path = tmp_path / "s.json"
    assert win.desktop.save_to(path)
    other = make_window()
    entry = other.desktop.recent.entries()[0]
    other.desktop.open_recent(entry)
    qtbot.waitUntil(lambda: other.state.settings.bits == 6, timeout=30_000)
    assert other.desktop.session_path == str(path)


# -- geometry ---------------------------------------------------------------------------------
def test_geometry_is_restored_on_the_same_screen_only_where_it_fits(qtbot, tmp_path):
    from quantscope.gui.geometry import remember_geometry, restore_geometry, screen_key

    store = _store(tmp_path)
    area = QGuiApplication.primaryScreen().availableGeometry()
    w = QWidget()
    qtbot.addWidget(w)
    fits = QRect(area.x() + 10, area.y() + 20, area.width() // 2, area.height() // 2)
    w.setGeometry(fits)
    key = remember_geometry(w, store)
    assert key == screen_key(QGuiApplication.primaryScreen())
    other = QWidget()
    qtbot.addWidget(other)
    assert restore_geometry(other, store)
    assert other.geometry() == fits
    # a rectangle the screen no longer holds (the resolution changed): left to the launcher
    doc = json.loads(store.value(f"window/geometry/{key}"))
    store.setValue(f"window/geometry/{key}", json.dumps(
        {**doc, "w": area.width() + 100}))
    third = QWidget()
    qtbot.addWidget(third)
    third.resize(300, 200)
    assert not restore_geometry(third, store)
    assert third.size().width() == 300
    # another screen's entry is not this screen's
    store.remove(f"window/geometry/{key}")
    store.setValue("window/geometry/HDMI-1_3840x2160", json.dumps(
        {"x": 0, "y": 0, "w": 100, "h": 100, "maximized": False}))
    assert not restore_geometry(QWidget(), store)
    store.setValue(f"window/geometry/{key}", "not json")
    assert not restore_geometry(QWidget(), store)


def test_maximized_is_remembered_with_the_normal_rectangle(qtbot, tmp_path):
    from quantscope.gui.geometry import remember_geometry, restore_geometry

    store = _store(tmp_path)
    area = QGuiApplication.primaryScreen().availableGeometry()
    w = QWidget()
    qtbot.addWidget(w)
    w.setGeometry(QRect(area.x() + 5, area.y() + 5, 200, 150))
    w.showMaximized()
    qtbot.waitUntil(w.isMaximized)
    remember_geometry(w, store)
    doc = json.loads(store.value(store.allKeys()[0]))
    assert doc["maximized"] and (doc["w"], doc["h"]) == (200, 150)
    again = QWidget()
    qtbot.addWidget(again)
    assert restore_geometry(again, store)
    assert again.windowState() & Qt.WindowState.WindowMaximized


# -- Help ▸ About ------------------------------------------------------------------------------
def test_about_names_versions_engine_and_licences(make_window):
    from importlib.metadata import version

    from PySide6.QtCore import qVersion

    import quantscope

    win = make_window()
    titles = [a.text() for a in win.menuBar().actions()]
    assert titles[-1] == "&Help"
    box = win.desktop.about()
    text = box.text()
    assert f"quantscope {quantscope.__version__}" in text
    for dist in ("numpy", "numba", "pyqtgraph"):
        assert version(dist) in text
    assert f"Qt {qVersion()}" in text and "Apache-2.0" in text
    assert "all-MiniLM-L6-v2 (Apache License 2.0)" in text
    assert "layer0_ffn_gelu_activations.npy" in box.detailedText()
    box.close()


# -- accessibility ----------------------------------------------------------------------------
def test_every_control_has_an_accessible_name_and_description(app_window, qtbot):
    from quantscope.gui.accessible import controls, describe, unlabelled

    win = app_window(1000)
    for i in range(win.views.count()):  # each view built and shown once
        win.views.setCurrentIndex(i)
        qtbot.wait(20)
    win.desktop.label_controls()
    found = controls(win)
    assert len(found) > 50  # the walk reaches the side panel, the panes and the views
    missing = unlabelled(win)
    assert not missing, "\n".join(describe(w) for w in missing)
    names = {w.accessibleName() for w in found}
    assert {"bit width", "rounding", "runtime preset", "Open file"} <= names


def test_the_model_view_is_labelled_when_it_opens(make_window, qtbot):
    from quantscope.gui.accessible import describe, unlabelled
    from quantscope.io.samples import sample_path

    win = make_window()
    win.open_path(str(sample_path("bf16_checkpoint")))  # 16 tensors: the model view
    qtbot.waitUntil(win.model_active, timeout=30_000)
    qtbot.waitUntil(win.model_view.is_complete, timeout=120_000)
    qtbot.waitUntil(lambda: not unlabelled(win), timeout=5_000)
    assert win.model_view.table.accessibleName()
    assert not unlabelled(win), [describe(w) for w in unlabelled(win)]


def test_names_come_from_labels_and_never_replace_a_given_one(qtbot):
    from PySide6.QtWidgets import QFormLayout, QSpinBox

    from quantscope.gui.accessible import label_controls, unlabelled

    root = QWidget()
    qtbot.addWidget(root)
    form = QFormLayout(root)
    a, b = QSpinBox(), QSpinBox()
    b.setAccessibleName("given")
    b.setToolTip("How many bits each code has.")
    form.addRow("bit &width:", a)
    form.addRow("other", b)
    assert len(unlabelled(root)) == 2
    label_controls(root)
    assert a.accessibleName() == "bit width"
    assert b.accessibleName() == "given"
    assert b.accessibleDescription() == "How many bits each code has."
    assert unlabelled(root) == []


def _layout_items_outside_every_layout() -> list[str]:
    """Python wrappers of layout items that no live layout holds: PySide cannot learn that Qt
    deleted such an item, and hands its wrapper out for whatever object the allocator puts at
    its address next (pyqtgraph once met a QWidgetItem among a widget's children)."""
    import gc

    import shiboken6
    from PySide6.QtWidgets import QApplication, QLayout, QLayoutItem

    from quantscope.gui.descendants import descendants

    # the widgets' wrappers are held until the check is done: a layout's wrapper is a child
    # of the wrapper of the widget it was asked from, and PySide invalidates it when that one
    # is let go (most of these widgets are Qt's own, wrapped here for the first time), so a
    # walk that drops them raised "already deleted" on the first item it had to look for
    widgets = QApplication.allWidgets()
    live = []
    for w in widgets:
        top = w.layout()
        if top is not None:
            live += [top, *descendants(top, QLayout)]
    return [type(o).__name__ for o in gc.get_objects()
            if isinstance(o, QLayoutItem) and not isinstance(o, QLayout)
            and shiboken6.isValid(o) and not any(lay.indexOf(o) >= 0 for lay in live)]


def test_labelling_and_restyling_leave_no_wrapper_of_a_deleted_layout_item(app_window, qtbot):
    from PySide6.QtWidgets import QLabel

    from quantscope.gui.theme import apply_theme

    win = app_window(1000)
    for i in range(win.views.count()):
        win.views.setCurrentIndex(i)
        qtbot.wait(20)
    for dark in (True, False):
        win.desktop.label_controls()
        apply_theme(win, dark=dark)
        win.statusBar().addPermanentWidget(QLabel("x"))  # a status bar rebuilds its layout
        qtbot.wait(20)
    assert _layout_items_outside_every_layout() == []
