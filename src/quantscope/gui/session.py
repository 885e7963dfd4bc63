"""Sessions in the window: applying one, and the last one remembered between runs.

The session format, its validation and reading live in :mod:`quantscope.state.session`
(re-exported here). Between runs the last session is kept in ``QSettings`` (INI format,
organisation and application "quantscope"); tests point ``QSettings.setPath`` at a temporary
directory or pass their own ``QSettings``, so they never touch the user's profile.
"""

from __future__ import annotations

import dataclasses
import json

from PySide6.QtCore import QSettings

from quantscope.errors import QuantscopeError
from quantscope.state import ExplorerState, Source
from quantscope.state.session import (
    MAX_SESSION_BYTES,
    SESSION_FORMAT,
    SESSION_VERSION,
    Session,
    SessionError,
    capture,
    decode_json,
    load_session,
    parse_session,
    save_session,
)

__all__ = ["MAX_SESSION_BYTES", "SESSION_FORMAT", "SESSION_VERSION", "SETTINGS_KEY", "Session",
           "SessionError", "apply_session", "capture", "decode_json", "load_session",
           "parse_session", "recall", "remember", "remember_window", "save_session",
           "startup_session", "user_settings"]

SETTINGS_KEY = "session/last"


def apply_session(window, session: Session, *, fallback: Source | None = None,
                  dark: bool | None = None, presentation: bool | None = None) -> None:
    """Show ``session`` in ``window``: its source is loaded (listed and checked against the
    settings) in the window's worker, and only once it loaded do the settings and the look
    change together -- a source that fails leaves everything as it was (or loads
    ``fallback``, for a remembered session at start-up). ``dark`` and ``presentation``,
    when given (``--theme``, ``--presentation``), win over the session's look: the look is
    applied after a load that finishes once the command line has long been read."""
    state: ExplorerState = window.state

    def show_look() -> None:
        if hasattr(window, "dark_action"):
            window.dark_action.setChecked(session.dark if dark is None else dark)
            window.presentation_action.setChecked(
                session.presentation if presentation is None else presentation)

    if session.source is not None:
        # the settings arrive with the tensor (its axis, its manual window); the axis travels
        # with the source, as the one given for it
        source = dataclasses.replace(session.source, axis=session.settings.axis)
        window.load(source, pick=False, settings=session.settings, on_loaded=show_look,
                    fallback=fallback)
    else:
        state.update_settings(**dataclasses.asdict(session.settings))
        show_look()


# -- remembered between runs --------------------------------------------------------------------
def user_settings() -> QSettings:
    """The user's QSettings for quantscope (INI, so ``QSettings.setPath`` can redirect it)."""
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "quantscope",
                     "quantscope")


def remember(session: Session, store: QSettings | None = None) -> None:
    """Keep ``session`` for the next run."""
    store = store or user_settings()
    store.setValue(SETTINGS_KEY, json.dumps(session.to_dict(), allow_nan=False))
    store.sync()


def recall(store: QSettings | None = None) -> Session | None:
    """The session remembered from the last run, or None when there is none or it no longer
    applies (a deleted file, an older format): starting fresh beats failing to start."""
    store = store or user_settings()
    try:
        text = store.value(SETTINGS_KEY)
        if not isinstance(text, str) or not text or len(text) > MAX_SESSION_BYTES:
            return None
        # the source itself is checked when the window loads it, in its worker
        return parse_session(decode_json(text), check_source=False)
    except (QuantscopeError, ValueError, TypeError, RecursionError, MemoryError):
        return None


def startup_session(path: str | None, *, explicit_source: bool,
                    headless: bool) -> Session | None:
    """The session the launcher opens with: ``--session FILE`` if given (a bad file raises
    SessionError, reported as a one-line error), else the remembered one for an interactive
    start without a source on the command line, else None (the command line decides).
    Headless runs (screenshots, metrics) never read the remembered session: they must be
    reproducible."""
    if path:
        return load_session(path)
    if explicit_source or headless:
        return None
    return recall()


def remember_window(window) -> None:
    """Remember ``window``'s session for the next interactive run."""
    remember(capture(window.state, dark=getattr(window, "dark", False),
                     presentation=getattr(window, "presentation", False)))
