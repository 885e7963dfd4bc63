"""Missing X11 libraries are named, with the apt command, before anything compiles."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from quantscope.cli import main
from quantscope.gui import system_libs
from quantscope.gui.system_libs import XCB_LIBRARIES, missing_xcb_packages, xcb_problem


def _plugin() -> Path:
    import PySide6

    return Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xcb is Linux's platform")
def test_the_check_agrees_with_the_dynamic_loader():
    """What ``ldd`` reports missing for Qt's xcb plugin is exactly what the check names."""
    ldd = shutil.which("ldd")
    assert ldd is not None
    out = subprocess.run([ldd, str(_plugin())], capture_output=True, text=True).stdout
    not_found = {line.split()[0] for line in out.splitlines() if "not found" in line}
    assert not_found <= set(XCB_LIBRARIES)  # every library the loader misses is known
    assert set(missing_xcb_packages()) == {XCB_LIBRARIES[s] for s in not_found}


def test_missing_libraries_are_named_with_the_install_command():
    def loads(soname: str) -> bool:
        return soname not in ("libxcb-cursor.so.0", "libxcb-keysyms.so.1")

    problem = xcb_problem({"DISPLAY": ":0"}, loads)
    assert problem is not None
    assert "sudo apt-get install libxcb-cursor0 libxcb-keysyms1" in problem
    assert xcb_problem({"DISPLAY": ":0"}, lambda s: True) is None
    assert xcb_problem({"DISPLAY": ":0", "QT_QPA_PLATFORM": "offscreen"}, loads) is None
    assert xcb_problem({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, loads) is None


def test_the_window_refuses_before_any_compile(monkeypatch, capsys):
    """``quantscope`` stops with the sentence before the engine's warm-up starts."""
    from quantscope.gui import launch

    monkeypatch.setenv("DISPLAY", ":0")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(system_libs, "_loads", lambda s: s != "libxcb-cursor.so.0")
    monkeypatch.setattr(launch, "warm_up_engine", lambda: pytest.fail("warm-up started"))
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "sudo apt-get install libxcb-cursor0" in err and "Traceback" not in err
