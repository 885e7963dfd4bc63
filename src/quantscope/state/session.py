"""Sessions: the open source, the settings and the look, saved to JSON (Qt-free, so that
``quantscope report --session`` reads them as the window does).

A talk's demo must reopen exactly as prepared, so a session file names the source (generator
with shape, seed and parameters; a file and tensor name; or a bundled sample), every setting
and the theme. It is versioned and validated as a whole *before* anything changes: a malformed
or stale session (unknown generator, missing file, axis the tensor lacks, a typo in a setting)
raises :class:`SessionError` with the reason, and the window keeps what it had. A session file
is read only if it is a regular file of bounded size (a FIFO or ``/dev/zero`` is refused at
once), and every way the JSON decoder refuses a hostile document is a SessionError.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from quantscope.core.tensors.generators import GENERATORS, check_shape
from quantscope.errors import QuantscopeError, one_line
from quantscope.io import list_tensors
from quantscope.io.samples import sample_path
from quantscope.state.errors import short_repr
from quantscope.state.explorer import ExplorerState
from quantscope.state.settings import Settings
from quantscope.state.source import Source

SESSION_FORMAT = "quantscope-session"
SESSION_VERSION = 1
#: Sessions are small; anything bigger is not one of ours (and is not read into memory).
MAX_SESSION_BYTES = 1 << 20


class SessionError(QuantscopeError, ValueError):
    """A session file that cannot be used; the message says which part and why."""


@dataclass(frozen=True)
class Session:
    """A validated session: what to load, with which settings, in which look."""

    source: Source | None
    settings: Settings
    dark: bool = False
    presentation: bool = False

    def to_dict(self) -> dict:
        return {"format": SESSION_FORMAT, "version": SESSION_VERSION,
                "source": self.source.to_dict() if self.source else None,
                "settings": self.settings.to_dict(),
                "view": {"dark": self.dark, "presentation": self.presentation}}


def capture(state: ExplorerState, *, dark: bool = False, presentation: bool = False) -> Session:
    """The session describing ``state`` now (an in-memory array has no source to save)."""
    source = state.source if state.source is not None and state.source.kind != "array" else None
    if source is not None and source.kind == "file":
        # an absolute path: the session reopens the same file from any working directory
        source = dataclasses.replace(source, name=str(Path(source.name).resolve()))
    return Session(source, state.settings, bool(dark), bool(presentation))


def _source_ndim(source: Source) -> int:
    """Check that ``source`` can be rebuilt (without loading its data); return its ndim."""
    if source.kind == "generator":
        gen = GENERATORS.get(source.name)
        if gen is None:
            raise SessionError(f"unknown generator {source.name!r}; available: "
                               f"{', '.join(GENERATORS)}")
        dims = check_shape(gen.default_shape if source.shape is None else source.shape,
                           needs_2d=gen.needs_2d)
        known = {p.name: p for p in gen.params}
        for name, value in source.params:
            if name not in known:
                raise SessionError(f"generator {source.name!r} has no parameter {name!r}")
            known[name].check(value)
        return len(dims)
    if source.kind in ("file", "sample"):
        path = source.name if source.kind == "file" else sample_path(source.name)
        infos = list_tensors(path)
        if source.tensor is None:
            if len(infos) != 1:
                raise SessionError(f"{source.label()}: the file holds {len(infos)} tensors and "
                                   "the session names none")
            return len(infos[0].shape)
        for info in infos:
            if info.name == source.tensor:
                return len(info.shape)
        raise SessionError(f"{source.label()}: no tensor named {source.tensor!r}")
    raise SessionError(f"a {source.kind!r} source cannot be reopened")


def parse_session(data: object, *, check_source: bool = True) -> Session:
    """Validate a decoded session document; raise :class:`SessionError` naming the problem.

    ``check_source`` also lists the source's file (or builds nothing but checks a generator)
    and checks the settings against its dimensions; the window leaves that to its worker,
    where the load itself checks it (a file may be slow to list)."""
    if not isinstance(data, dict):
        raise SessionError("a session is a JSON object")
    if data.get("format") != SESSION_FORMAT:
        raise SessionError(f"not a quantscope session (format {data.get('format')!r})")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SessionError(f"session version must be an integer, got {short_repr(version)}")
    if version > SESSION_VERSION:
        raise SessionError(f"session version {short_repr(version)} is newer than this quantscope "
                           f"understands ({SESSION_VERSION}); update quantscope")
    if version < 1:
        raise SessionError(f"session version must be at least 1, got {version}")
    unknown = set(data) - {"format", "version", "source", "settings", "view"}
    if unknown:
        raise SessionError(f"unknown session field(s) {short_repr(sorted(unknown))}")
    try:
        source = None if data.get("source") is None else Source.from_dict(_obj(data, "source"))
        settings = Settings.from_dict(_obj(data, "settings"))
    except SessionError:
        raise
    except (QuantscopeError, TypeError, ValueError, KeyError, OverflowError) as exc:
        raise SessionError(f"invalid session: {one_line(str(exc))[:300]}") from None
    view = data.get("view") or {}
    if not isinstance(view, dict) or set(view) - {"dark", "presentation"} or not all(
            isinstance(v, bool) for v in view.values()):
        raise SessionError("session 'view' must hold the booleans 'dark' and 'presentation'")
    if source is not None and check_source:
        try:
            ndim = _source_ndim(source)
        except SessionError:
            raise
        except QuantscopeError as exc:
            raise SessionError(f"the session's source cannot be opened: {exc}") from None
        try:
            settings.check(ndim)
        except QuantscopeError as exc:
            raise SessionError(f"invalid session settings for {source.label()}: {exc}") from None
    return Session(source, settings, view.get("dark", False), view.get("presentation", False))


def _obj(data: dict, key: str) -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        raise SessionError(f"session {key!r} must be a JSON object")
    return value


def save_session(session: Session, path: str | Path) -> None:
    """Write ``session`` as indented JSON."""
    path = Path(path)
    try:
        path.write_text(json.dumps(session.to_dict(), indent=2, allow_nan=False) + "\n",
                        encoding="utf-8")
    except OSError as exc:
        raise SessionError(f"cannot write {path}: {exc.strerror or exc}") from None


def _read_session_text(path: Path) -> str:
    """The file's text, read only if it is a regular file of at most MAX_SESSION_BYTES.

    Opened without blocking and checked on the open descriptor: a FIFO would block forever,
    ``/dev/zero`` (or a symlink to it) would never end, and a check by name alone could be
    raced by a rename."""
    shown = one_line(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise SessionError(f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}"
                           ) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise SessionError(f"{shown}: not a regular file (a directory, device, FIFO or "
                           "socket), so not a session")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > MAX_SESSION_BYTES:
            raise SessionError(f"{shown}: {info.st_size:,} bytes is too big for a session")
        try:
            raw = fh.read(MAX_SESSION_BYTES + 1)
        except OSError as exc:
            raise SessionError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SESSION_BYTES:  # it grew while we looked
        raise SessionError(f"{shown}: more than {MAX_SESSION_BYTES:,} bytes, too big for a "
                           "session")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SessionError(f"{shown}: not a text (UTF-8) file") from None


def decode_json(text: str) -> object:
    """``json.loads`` with every way it refuses a hostile document as a SessionError: bad
    syntax, nesting deeper than the interpreter's stack, numbers beyond 4300 digits."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SessionError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise SessionError("not a session: nested too deeply") from None
    except (ValueError, MemoryError) as exc:  # e.g. an integer of 5000 digits
        raise SessionError(f"not valid JSON ({one_line(str(exc))[:120]})") from None


def load_session(path: str | Path, *, check_source: bool = True) -> Session:
    """Read and validate a session file (see :func:`parse_session`)."""
    path = Path(path)
    text = _read_session_text(path)
    try:
        return parse_session(decode_json(text), check_source=check_source)
    except SessionError as exc:
        raise SessionError(f"{one_line(str(path))}: {exc}") from None
    except RecursionError:
        raise SessionError(f"{one_line(str(path))}: nested too deeply") from None


