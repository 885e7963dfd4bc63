"""The window's size and place, remembered per screen, restored only where it fits.

A laptop used at a desk and on a projector sees two screens of different sizes: one place for
both would open a 2560-wide window off a 1366-wide projector, or a small one on the desk. So
the geometry is kept per screen (its name and available size) in the user's QSettings, and at
the next start on that screen it is restored only if the whole rectangle still lies inside the
screen's available area (a panel moved, the resolution changed): otherwise the launcher's
default fitting stands. Maximized is remembered as such, with the normal rectangle under it.
"""

from __future__ import annotations

import json
import re

from PySide6.QtCore import QRect, QSettings, Qt
from PySide6.QtGui import QScreen
from PySide6.QtWidgets import QWidget

GROUP = "window/geometry"


def screen_key(screen: QScreen) -> str:
    """``<name>_<width>x<height>`` of the screen's available area, safe as a QSettings key."""
    area = screen.availableGeometry()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", screen.name() or "screen").strip("-") or "screen"
    return f"{name}_{area.width()}x{area.height()}"


def _screen_of(window: QWidget) -> QScreen | None:
    from PySide6.QtGui import QGuiApplication

    return window.screen() or QGuiApplication.primaryScreen()


def remember_geometry(window: QWidget, store: QSettings) -> str | None:
    """Store ``window``'s normal rectangle and maximized state under its screen's key; return
    the key (None when there is no screen)."""
    screen = _screen_of(window)
    if screen is None:
        return None
    rect = window.normalGeometry() if window.isMaximized() or window.isFullScreen() else (
        window.geometry())
    if not rect.isValid():
        rect = window.geometry()
    doc = {"x": rect.x(), "y": rect.y(), "w": rect.width(), "h": rect.height(),
           "maximized": bool(window.isMaximized())}
    key = screen_key(screen)
    store.setValue(f"{GROUP}/{key}", json.dumps(doc))
    store.sync()
    return key


def saved_geometry(screen: QScreen, store: QSettings) -> tuple[QRect, bool] | None:
    """The rectangle and maximized flag remembered for ``screen``, or None when there is none
    or it is unreadable."""
    text = store.value(f"{GROUP}/{screen_key(screen)}")
    if not isinstance(text, str):
        return None
    try:
        doc = json.loads(text)
        rect = QRect(int(doc["x"]), int(doc["y"]), int(doc["w"]), int(doc["h"]))
        maximized = bool(doc.get("maximized", False))
    except (ValueError, TypeError, KeyError):
        return None
    return (rect, maximized) if rect.isValid() else None


def restore_geometry(window: QWidget, store: QSettings) -> bool:
    """Give ``window`` the geometry remembered for its screen when that rectangle fits the
    screen's available area; return whether it did (False: the caller's sizing stands)."""
    screen = _screen_of(window)
    if screen is None:
        return False
    saved = saved_geometry(screen, store)
    if saved is None:
        return False
    rect, maximized = saved
    if not screen.availableGeometry().contains(rect):
        return False
    state = window.windowState() & ~Qt.WindowState.WindowMaximized  # the fitting's guess
    window.setWindowState(state)
    window.setGeometry(rect)
    if maximized:
        window.setWindowState(state | Qt.WindowState.WindowMaximized)
    return True
