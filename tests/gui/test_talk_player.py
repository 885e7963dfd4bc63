"""Playing a talk: PageDown / PageUp step through the scenes (as a presentation clicker sends
them, whatever has the focus), each scene puts its tensor, settings, tab, pane pair and zoom on
screen, and its caption is written from the numbers shown; ``--talk`` and ``--scene``."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from quantscope.cli import main
from quantscope.gui.stage import PAIRS
from quantscope.state import Settings, Source
from quantscope.state.talk import (
    Scene,
    Talk,
    TalkError,
    builtin_talk,
    load_talk,
    save_talk,
    scene_caption,
)


def _scene_shown(qtbot, window, wait_results, number: int) -> None:
    player = window.talk_player
    scene = player.talk.scene(number)
    qtbot.waitUntil(lambda: window.state.source is not None
                    and window.state.source.name == scene.source.name, timeout=60_000)
    wait_results(window, 60_000)
    assert player.number == number
    assert window.state.settings == scene.settings


def _whole_histogram_shown(win) -> None:
    """Every shown pane's plot spans the tensor's values and counts from zero (the stage's
    pairs without the first pane used to show a range lined up with a hidden pane)."""
    ov = win.state.overview
    for key in win.stage.visible_panes():
        (x0, x1), (y0, y1) = win.panes[key].plot.getViewBox().viewRange()
        assert x0 <= ov.min and x1 >= ov.max, key
        assert y0 == pytest.approx(0.0, abs=1e-9) and y1 > 0, key


def test_clicker_keys_step_through_the_builtin_talk(qtbot, make_window, wait_results):
    win = make_window(install_views=True)
    win.presentation_action.setChecked(True)
    talk = builtin_talk()
    win.talk_player.open(talk)
    assert "PgDn/PgUp scenes" in win.stage.keys.text()
    _scene_shown(qtbot, win, wait_results, 1)
    caption = win.talk_player.caption.text()
    want = scene_caption(talk.scene(1), win.state.results)
    assert want and caption == f"Scene 1 of 5 · Adding a zero point: {want}"
    assert win.stage.visible_panes() == PAIRS["1"][0]
    _whole_histogram_shown(win)

    # the clicker works while a control that knows PageDown itself has the keyboard focus
    win.stage.toggle_controls()
    spin = win.controls.bits_label
    spin.setFocus()
    qtbot.keyClick(spin, Qt.Key.Key_PageDown)
    _scene_shown(qtbot, win, wait_results, 2)
    win.stage.toggle_controls()
    assert win.stage.visible_panes() == PAIRS["2"][0]
    _whole_histogram_shown(win)
    assert win.talk_player.caption.text().startswith("Scene 2 of 5 · When symmetric")
    assert scene_caption(talk.scene(2), win.state.results) in win.talk_player.caption.text()

    qtbot.keyClick(win, Qt.Key.Key_PageDown)
    _scene_shown(qtbot, win, wait_results, 3)
    assert win.stage.showing_views and win.views.isVisible()
    assert win.views.currentWidget() is win.views_controller.views["Mapping"]
    assert "s = 3/127 = 0.0236" in win.talk_player.caption.text()

    qtbot.keyClick(win, Qt.Key.Key_PageUp)
    _scene_shown(qtbot, win, wait_results, 2)
    assert not win.stage.showing_views
    for _ in range(5):  # past the last scene: stays on it
        win.talk_player.step(1)
    assert win.talk_player.number == 5
    _scene_shown(qtbot, win, wait_results, 5)
    assert win.stage.visible_panes() == PAIRS["3"][0]
    assert win.state.source.name == "gelu_activations"


def test_a_scene_zooms_the_histograms_and_the_next_one_unzooms(qtbot, make_window,
                                                               wait_results):
    src = Source.generator("normal", (64, 32), 1)
    talk = Talk("zoom", (Scene("zoomed", src, Settings(bits=6), zoom=(-0.5, 1.5)),
                         Scene("whole", src, Settings(bits=8))))
    win = make_window()
    win.talk_player.open(talk)
    _scene_shown(qtbot, win, wait_results, 1)
    for pane in win.panes.values():  # every pane shows the scene's range
        lo, hi = pane.plot.getViewBox().viewRange()[0]
        assert (lo, hi) == pytest.approx((-0.5, 1.5))
    win.talk_player.step(1)
    _scene_shown(qtbot, win, wait_results, 2)
    qtbot.waitUntil(lambda: win.panes["symmetric/tensor"].plot.getViewBox()
                    .viewRange()[0][0] < -1.0)
    assert win.state.settings.bits == 8


def test_talk_options_are_checked_before_a_window_opens(qapp, tmp_path, capsys):
    js = tmp_path / "m.json"
    assert main(["--scene", "2", "--metrics", str(js)]) == 2
    assert "--scene N needs --talk" in capsys.readouterr().err
    assert main(["--talk", "--scene", "9", "--metrics", str(js)]) == 2
    assert "scene 9 does not exist: the talk has scenes 1 to 5" in capsys.readouterr().err
    assert main(["--sample", "query_weight", "--talk", "--metrics", str(js)]) == 2
    assert "--talk brings its own tensors" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "quantscope-talk", "version": 1, "scenes": [{"tab": "x"}]}')
    assert main(["--talk", str(bad), "--metrics", str(js)]) == 2
    assert "scene 1: 'source' is missing" in capsys.readouterr().err
    assert not js.exists()


def test_talk_file_and_scene_from_the_command_line(qapp, tmp_path):
    talk = Talk("mine", (Scene("a", Source("sample", "query_weight"), Settings()),
                         Scene("b", Source.generator("relu", (32, 16), 4), Settings(bits=5,
                                                                                axis=1))))
    path = tmp_path / "talk.json"
    save_talk(talk, path)
    js = tmp_path / "m.json"
    assert main(["--talk", str(path), "--scene", "2", "--metrics", str(js)]) == 0
    doc = json.loads(js.read_text())
    assert doc["source_spec"]["kind"] == "generator" and doc["source_spec"]["seed"] == 4
    assert doc["settings"] == Settings(bits=5, axis=1).to_dict()


def test_the_screen_saved_as_scenes_plays_back(qtbot, app_window, wait_results, tmp_path):
    """File > Add this screen to a talk: each screen appended as a scene (tensor, settings,
    tab, pair, zoom); the talk file opens again and puts each screen back."""
    win = app_window(1000)
    vc = win.views_controller
    path = tmp_path / "mine.json"
    win.state.update_settings(bits=6)
    wait_results(win)
    win.panes["symmetric/tensor"].plot.setXRange(-1.0, 2.0, padding=0)
    vc.add_scene(path)
    win.presentation_action.setChecked(True)
    win.stage.show_pair("4")
    win.stage.show_views(True)
    win.views.setCurrentIndex([win.views.tabText(i) for i in range(win.views.count())]
                              .index("Bit width"))
    vc.add_scene(path)
    talk = load_talk(path)
    first, second = talk.scenes
    assert first.source == win.state.source and first.settings.bits == 6
    assert (first.tab, first.zoom) == ("panes", pytest.approx((-1.0, 2.0)))
    assert (second.tab, second.pair) == ("Bit width", "4")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TalkError, match="not valid JSON"):
        vc.add_scene(bad)
    assert bad.read_text() == "{not json"  # left as it was

    win.presentation_action.setChecked(False)
    vc.open_talk(path)
    _scene_shown(qtbot, win, wait_results, 1)
    lo, hi = win.panes["asymmetric/channel"].plot.getViewBox().viewRange()[0]
    assert (lo, hi) == pytest.approx((-1.0, 2.0))
    win.talk_player.step(1)
    assert win.views.tabText(win.views.currentIndex()) == "Bit width"
