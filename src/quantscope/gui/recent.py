"""File ▸ Open Recent: the tensor files and sessions opened last, kept in the user's QSettings.

An entry is a tensor file (with the tensor chosen in it, so a checkpoint reopens on the same
tensor) or a session file. The list is capped at :data:`MAX_RECENT`, newest first, one entry
per file and tensor. Files disappear between runs (a scratch folder emptied, a mount gone):
whenever the list is read for the menu, entries whose file is missing are removed and the
caller is told which, so the person learns why an item vanished instead of meeting an error
when they pick it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from PySide6.QtCore import QSettings

KEY = "recent/entries"
#: Entries kept (what desktop applications commonly show).
MAX_RECENT = 10
KINDS = ("file", "session")


@dataclass(frozen=True)
class Recent:
    """One entry: a ``"file"`` (with ``tensor``, None for a one-tensor file) or a
    ``"session"``."""

    kind: str
    path: str
    tensor: str | None = None

    def label(self) -> str:
        """The menu text: the file name, its tensor, and its folder to tell twins apart."""
        name = os.path.basename(self.path) or self.path
        what = f"{name} : {self.tensor}" if self.tensor else name
        if self.kind == "session":
            what = f"{what} (session)"
        return f"{what} — {os.path.dirname(self.path)}"


def _decode(text: object) -> list[Recent]:
    if not isinstance(text, str):
        return []
    try:
        doc = json.loads(text)
    except ValueError:
        return []
    out = []
    for item in doc if isinstance(doc, list) else []:
        if not isinstance(item, dict):
            continue
        kind, path, tensor = item.get("kind"), item.get("path"), item.get("tensor")
        if kind in KINDS and isinstance(path, str) and path and (
                tensor is None or isinstance(tensor, str)):
            out.append(Recent(kind, path, tensor))
    return out[:MAX_RECENT]


class RecentFiles:
    """The recent list in ``store`` (the user's QSettings by default)."""

    def __init__(self, store: QSettings) -> None:
        self.store = store

    def entries(self) -> list[Recent]:
        """The list as stored, newest first (nothing is checked on disk)."""
        return _decode(self.store.value(KEY))

    def _write(self, entries: list[Recent]) -> None:
        self.store.setValue(KEY, json.dumps([{"kind": e.kind, "path": e.path,
                                              "tensor": e.tensor} for e in entries]))
        self.store.sync()

    def add(self, kind: str, path: str | os.PathLike, tensor: str | None = None) -> Recent:
        """Put a file first (moved up if already listed), dropping the oldest past the cap."""
        if kind not in KINDS:
            raise ValueError(f"recent entry kind {kind!r}; kinds are {KINDS}")
        entry = Recent(kind, os.path.abspath(os.fspath(path)), tensor)
        rest = [e for e in self.entries() if e != entry]
        self._write([entry, *rest][:MAX_RECENT])
        return entry

    def prune(self) -> tuple[list[Recent], list[Recent]]:
        """Remove entries whose file no longer exists; return (kept, removed)."""
        entries = self.entries()
        kept = [e for e in entries if os.path.exists(e.path)]
        removed = [e for e in entries if e not in kept]
        if removed:
            self._write(kept)
        return kept, removed

    def clear(self) -> None:
        self._write([])


def removed_message(removed: list[Recent]) -> str:
    """What the status bar says after :meth:`RecentFiles.prune` removed entries."""
    names = ", ".join(os.path.basename(e.path) or e.path for e in removed[:3])
    more = f" and {len(removed) - 3} more" if len(removed) > 3 else ""
    files = "file" if len(removed) == 1 else "files"
    return f"Open Recent: removed {len(removed)} {files} that no longer exist ({names}{more})"
