"""Writing the files a command or the window produces: only to a regular file or a new path,
atomically, with the user's umask, and every failure as a one-line error.

``-o /dev/null`` run as root must not replace the device with a regular file, and ``-o`` a
FIFO must not swap the pipe for a file its reader never sees; a missing directory, a
directory, a full disk or a read-only one is the user's to fix, so it is said in one line.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from quantscope.errors import UserError
from quantscope.io.checks import show_path


def check_output(path: str | os.PathLike, option: str) -> Path:
    """The path a command may write to, resolved through symlinks; refuse anything else.

    Raises
    ------
    UserError
        The directory is missing, the path is a directory, or it exists and is not a regular
        file (a device, FIFO or socket).
    """
    out = Path(path)
    if out.is_symlink():  # write through the link: it keeps pointing at the new file
        out = Path(os.path.realpath(out))
    directory = out.parent if str(out.parent) else Path(".")
    shown = show_path(path)
    if not directory.is_dir():
        raise UserError(f"{option} {shown}: directory {show_path(directory)} does not exist")
    try:
        info = os.stat(out)
    except FileNotFoundError:
        return out
    except OSError as exc:
        raise UserError(f"{option} {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{option} {shown}: it is a directory")
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{option} {shown}: is not a regular file (a device, FIFO or socket); "
                        "refusing to replace it")
    return out


def write_atomically(path: str | os.PathLike, write: Callable[[BinaryIO], None],
                     option: str = "-o") -> Path:
    """Write through ``write(fh)`` to a temporary file beside ``path``, then rename it over
    ``path``: a crash or a full disk never leaves half a file, and the new file gets the mode
    a plain ``open`` would give it (the user's umask; an existing file keeps its own mode)."""
    out = check_output(path, option)
    shown = show_path(path)
    try:
        mode = stat.S_IMODE(os.stat(out).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as exc:
        raise UserError(f"{option} {shown}: cannot write there ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, out)
    except OSError as exc:
        raise UserError(f"{option} {shown}: cannot write ({exc.strerror or exc})") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def write_text(path: str | os.PathLike, text: str, option: str) -> Path:
    """:func:`write_atomically` for a UTF-8 text file."""
    return write_atomically(path, lambda fh: fh.write(text.encode("utf-8")), option)


def _umask() -> int:
    """The process umask (read by setting and restoring it: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
