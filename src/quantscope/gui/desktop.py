"""The desktop conventions of the window: Ctrl+S, File ▸ Open Recent, Help ▸ About, and
accessible names on every control.

People carry habits from every other desktop application: Ctrl+S saves what they have (the
session: source, settings and look), and asks where only the first time; Ctrl+Shift+S saves
it elsewhere; the files opened last are one click away; Help ▸ About names the version for a
bug report. :class:`Desktop` adds these to a window's menus. What it keeps between runs lives
in the user's QSettings (:func:`quantscope.gui.session.user_settings`; tests redirect it with
``QSettings.setPath`` or hand their own store).
"""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, QTimer
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMenu

from quantscope.errors import QuantscopeError
from quantscope.gui.accessible import label_controls
from quantscope.gui.recent import Recent, RecentFiles, removed_message


class Desktop(QObject):
    """Installs the conventions on ``window`` (a :class:`~quantscope.gui.window.MainWindow`).

    Attributes
    ----------
    session_path : str | None
        The session file Ctrl+S writes to (the last one saved or opened), None before.
    recent : RecentFiles
    remember_files : bool
        Whether tensor files the window opens join Open Recent (False until the launcher
        sets it for an interactive window: renders and tests leave the person's list alone;
        sessions saved or opened by hand always join it).
    """

    def __init__(self, window: QMainWindow, store: QSettings | None = None) -> None:
        super().__init__(window)
        from quantscope.gui.session import user_settings

        self.window = window
        self.store = store or user_settings()
        self.recent = RecentFiles(self.store)
        self.session_path: str | None = None
        self.remember_files = False
        self.dialog: QFileDialog | None = None
        self.about_box = None
        self._build_file_menu()
        self._build_help_menu()
        window.state.tensor_changed.connect(self._tensor_changed)
        # controls built later (views, the model view) are named when the window shows and
        # when another view is brought forward, a turn of the event loop later
        self._label_timer = QTimer(self)
        self._label_timer.setSingleShot(True)
        self._label_timer.setInterval(0)
        self._label_timer.timeout.connect(self.label_controls)
        window.installEventFilter(self)
        views = getattr(window, "views", None)
        if views is not None:
            views.currentChanged.connect(self._label_timer.start)
        model_action = getattr(window, "model_action", None)  # the model view, built on demand
        if model_action is not None:
            model_action.toggled.connect(self._label_timer.start)
        self.label_controls()

    # -- menus ------------------------------------------------------------------------------
    def _file_menu(self) -> QMenu:
        bar = self.window.menuBar()
        for act in bar.actions():
            if act.menu() is not None and act.text().replace("&", "") == "File":
                return act.menu()
        return bar.addMenu("&File")

    def _build_file_menu(self) -> None:
        menu = self._file_menu()
        actions = menu.actions()
        opener = next((a for a in actions if a.text().replace("&", "").startswith("Open…")),
                      None)
        after = actions[actions.index(opener) + 1] if opener in actions[:-1] else (
            actions[0] if actions else None)
        self.recent_menu = QMenu("Open &Recent", menu)
        self.recent_menu.aboutToShow.connect(self.fill_recent_menu)
        menu.insertMenu(after, self.recent_menu)
        self.save_action = QAction("&Save session", self.window,
                                   shortcut=QKeySequence.StandardKey.Save,
                                   triggered=self.save)
        self.save_as_action = QAction("Save session &as…", self.window,
                                      shortcut=QKeySequence.StandardKey.SaveAs,
                                      triggered=self.save_as)
        menu.insertAction(after, self.save_action)
        menu.insertAction(after, self.save_as_action)
        menu.insertSeparator(after)
        self.fill_recent_menu()

    def _build_help_menu(self) -> None:
        help_menu = self.window.menuBar().addMenu("&Help")
        self.about_action = QAction("&About quantscope", self.window, triggered=self.about)
        self.about_action.setMenuRole(QAction.MenuRole.AboutRole)
        help_menu.addAction(self.about_action)
        self.help_menu = help_menu

    def about(self):
        from quantscope.gui.about import show_about

        self.about_box = show_about(self.window)
        return self.about_box

    # -- saving ----------------------------------------------------------------------------
    def save(self) -> None:
        """Ctrl+S: write the session to the file it was last saved to or opened from; the
        first time, ask where (Save As)."""
        if self.session_path is None:
            self.save_as()
        else:
            self.save_to(self.session_path)

    def save_as(self) -> None:
        """Ask for a file (a non-blocking dialog) and save the session there."""
        start = self.session_path or str(Path.cwd() / "session.json")
        dialog = QFileDialog(self.window, "Save the session", start, "Session (*.json)")
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setDefaultSuffix("json")
        dialog.fileSelected.connect(self.save_to)
        dialog.open()
        self.dialog = dialog

    def save_to(self, path: str | os.PathLike) -> bool:
        """Save the window's session to ``path``; it becomes Ctrl+S's file and the first
        recent entry. A failure is shown in the window's banner; returns whether it saved."""
        from quantscope.gui.session import capture, save_session

        w = self.window
        try:
            save_session(capture(w.state, dark=getattr(w, "dark", False),
                                 presentation=getattr(w, "presentation", False)), path)
        except (QuantscopeError, OSError) as exc:
            w.show_error(f"the session was not saved: {exc}")
            return False
        self.session_opened(path)
        w.statusBar().showMessage(f"session saved to {path}", 5000)
        return True

    def session_opened(self, path: str | os.PathLike) -> None:
        """A session file was saved or opened: Ctrl+S now writes there, and it is recent."""
        self.session_path = os.path.abspath(os.fspath(path))
        self.recent.add("session", self.session_path)

    # -- recent files ------------------------------------------------------------------------
    def _tensor_changed(self, *_args) -> None:
        source = self.window.state.source
        if self.remember_files and source is not None and source.kind == "file":
            self.recent.add("file", source.name, source.tensor)

    def fill_recent_menu(self) -> None:
        """Rebuild Open Recent from the stored list, pruning files that no longer exist (the
        status bar says which went)."""
        kept, removed = self.recent.prune()
        if removed:
            self.window.statusBar().showMessage(removed_message(removed), 10000)
        menu = self.recent_menu
        menu.clear()
        for i, entry in enumerate(kept):
            text = entry.label().replace("&", "&&")
            prefix = f"&{i + 1} " if i < 9 else ""
            act = menu.addAction(prefix + text)
            act.setToolTip(entry.path)
            act.triggered.connect(lambda _=False, e=entry: self.open_recent(e))
        if not kept:
            none = menu.addAction("(no recent files)")
            none.setEnabled(False)
        menu.addSeparator()
        clear = menu.addAction("Clear the list")
        clear.setEnabled(bool(kept))
        clear.triggered.connect(self._clear_recent)

    def _clear_recent(self) -> None:
        self.recent.clear()
        self.fill_recent_menu()

    def open_recent(self, entry: Recent) -> None:
        """Open a recent entry; one whose file went away since the menu was filled is
        removed, with a message."""
        if not os.path.exists(entry.path):
            _, removed = self.recent.prune()
            self.window.statusBar().showMessage(removed_message(removed or [entry]), 10000)
            self.fill_recent_menu()
            return
        if entry.kind == "session":
            from quantscope.gui.session import apply_session, load_session

            try:
                apply_session(self.window, load_session(entry.path, check_source=False))
            except QuantscopeError as exc:
                self.window.show_error(str(exc))
                return
            self.session_opened(entry.path)
        else:
            self.window.open_path(entry.path, tensor=entry.tensor)

    # -- accessibility -----------------------------------------------------------------------
    def label_soon(self) -> None:
        """Name the controls built since (a view tab built on first read) a turn later."""
        self._label_timer.start()

    def label_controls(self) -> int:
        """Name and describe every control of the window that lacks it (see
        :mod:`quantscope.gui.accessible`)."""
        return label_controls(self.window)

    def eventFilter(self, obj, event) -> bool:
        if obj is self.window and event.type() == QEvent.Type.Show:
            self._label_timer.start()
        return False

    def shutdown(self) -> None:
        self._label_timer.stop()
        self.window.removeEventFilter(self)
