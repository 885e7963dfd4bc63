"""``njit``: Numba's compile with an on-disk cache that never stops the program from starting.

``numba.njit(cache=True)`` raises at import when no folder is writable ("cannot cache
function ...: no locator available": a read-only install under an unwritable HOME, as in
containers and locked-down clusters), and every later load raises ``UnpicklingError`` or
``EOFError`` once an index file (``*.nbi``, a pickle) is truncated or overwritten. Both stopped
every start. Here the cache is a convenience, never a condition:

- the folders Numba tries (``NUMBA_CACHE_DIR``, ``__pycache__`` beside the source, the
  per-user cache) come first, then a private per-user folder in the system's temporary
  directory (created mode 0700 and used only while it belongs to this user and nobody else may
  write to it: a folder another user prepared could hold pickles of their choosing);
- with none of them writable the loops compile in memory, every start;
- an entry that cannot be read is deleted and compiled again.

Each fallback is said in one line on stderr, once per process, since the next start will be
slower (or the same) and a person may want to fix the folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import numba
from numba.core import caching

from quantscope.core.kernels import inline_copy

_said: set[str] = set()
_said_lock = threading.Lock()


def say_once(key: str, line: str) -> None:
    """Write ``line`` to stderr the first time ``key`` is said in this process."""
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed or full: the notice is not worth a failure
        pass


def private_temp_cache_dir() -> str | None:
    """``<tmp>/quantscope-numba-<uid>``, created 0700, or ``None`` when it cannot be trusted.

    The folder is shared namespace: another user may have created it first (with pickles that
    Numba would load), so it is used only when it is a real directory owned by this user and
    writable by nobody else."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = os.path.join(tempfile.gettempdir(), f"quantscope-numba-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o022:
        return None
    return path


class _PrivateTempLocator(caching.UserProvidedCacheLocator):
    """Numba's user-provided locator, pointed at :func:`private_temp_cache_dir`."""

    def __init__(self, py_func: Any, py_file: str) -> None:
        super().__init__(py_func, py_file)
        root = private_temp_cache_dir() or ""
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if private_temp_cache_dir() is None:
            return None
        return super(caching.UserProvidedCacheLocator, cls).from_function(py_func, py_file)


class _ReadOnlyInTreeLocator(caching.InTreeCacheLocator):
    """``__pycache__`` beside the source when it already holds this function's index but
    cannot be written: a read-only install whose loops were compiled when it was built (an
    image prepared with one run) loads them instead of compiling every start."""

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> Any:
        if not os.path.exists(py_file):
            return None
        self = cls(py_func, py_file)
        modname = os.path.splitext(os.path.basename(py_file))[0]
        qualname = getattr(py_func, "__qualname__", py_func.__name__)
        qualname = qualname.replace("<", "").replace(">", "")
        version = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
        index = os.path.join(self.get_cache_path(),
                             f"{modname}.{qualname}-{self.get_disambiguator()}.{version}.nbi")
        return self if os.access(index, os.R_OK) else None

    def ensure_cache_path(self) -> None:
        """Nothing to create: saving into this folder fails, and is reported as unsaved."""
        raise OSError(f"{self.get_cache_path()} is read-only")


class _Impl(caching.CompileResultCacheImpl):
    _locator_classes = [  # noqa: RUF012 - Numba's own attribute, read as a list
        *caching.CompileResultCacheImpl._locator_classes, _ReadOnlyInTreeLocator,
        _PrivateTempLocator]


class _RepairingCache(caching.FunctionCache):
    """Numba's function cache, with an unreadable entry treated as absent (and deleted) and a
    failed save (disk full, folder gone) treated as nothing saved."""

    _impl_class = _Impl

    def __init__(self, py_func: Any) -> None:
        super().__init__(py_func)
        if isinstance(self._impl.locator, _PrivateTempLocator):
            say_once("temp-cache", "quantscope: the install folder and the user cache are not "
                     f"writable; compiled loops are cached in {self._cache_path}")

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return super().load_overload(sig, target_context)
        except MemoryError:  # the process is short of memory, the cache may be sound: keep it
            raise
        except Exception as exc:  # whatever unreadable bytes raise while being unpickled
            index = self._cache_file._index_path
            try:
                os.unlink(index)
            except OSError:
                pass
            say_once("corrupt-cache", "quantscope: the compiled-loop cache in "
                     f"{self._cache_path} could not be read ({type(exc).__name__}); "
                     "compiling those loops again")
            return None

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            super().save_overload(sig, data)
        except Exception as exc:
            say_once("unsaved-cache", "quantscope: compiled loops could not be saved in "
                     f"{self._cache_path} ({type(exc).__name__}: {exc}); they will be "
                     "compiled again next time")


def _attach_cache(dispatcher: Any) -> None:
    try:
        dispatcher._cache = _RepairingCache(dispatcher.py_func)
    except RuntimeError:  # no writable folder at all: the loops compile in memory
        say_once("no-cache", "quantscope: no writable folder for compiled loops (install, "
                 "user cache and temporary folder are read-only); compiling them in memory")


def njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    """``numba.njit(**options)`` with the cache of this module (``cache=True`` is implied)."""
    options.pop("cache", None)
    inline_copy.install()  # before the first compile of a loop that inlines

    def decorate(func: Callable[..., Any]) -> Any:
        dispatcher = numba.njit(**options)(func)
        _attach_cache(dispatcher)
        return dispatcher

    return decorate
