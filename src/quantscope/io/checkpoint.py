"""Whole checkpoints: every tensor of a file, a sharded Hugging Face folder or a folder of
``.npy`` files, listed from headers alone -- and read back as raw bytes, a chunk at a time.

Listing is lenient per file and strict within it: a shard that is missing, truncated, lying
or named outside its index's folder is reported with its own one-line message, the tensors
the index assigns to it are still listed (marked with that message), and every other shard
lists as usual. Each file still goes through its loader's full validation
(:func:`quantscope.io.list_tensors`), so the hostile-file rules apply unchanged.

:class:`RawTensor` reads a listed tensor's stored bytes into a caller's buffer with
``os.pread`` (safetensors and ``.npy``; no memory map, so a scan's memory stays at its
buffers) or copies them from the loader's array (``.npz``), for the fused scan.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from quantscope.core.tensors.validate import in_memory
from quantscope.io.checks import check_regular_file, fail
from quantscope.io.kinds import file_kind, kinds, supported_text
from quantscope.io.shards import MAX_INDEX_BYTES
from quantscope.io.tensor_info import TensorFileError, TensorInfo, printable

INDEX_SUFFIX = ".index.json"


@dataclass(frozen=True)
class CheckpointTensor:
    """One tensor of a checkpoint: where it lives, its header info, or why it cannot be read.

    ``info`` is None when the file holding it could not be listed (``problem`` says why).
    """

    name: str
    file: Path
    info: TensorInfo | None
    problem: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    """What a path stands for: its tensors in file order and the problems met listing them."""

    path: Path
    files: list[Path]
    tensors: list[CheckpointTensor]
    problems: list[str] = field(default_factory=list)

    @property
    def sharded(self) -> bool:
        return len(self.files) > 1


def is_checkpoint(path: str | os.PathLike) -> bool:
    """True for what opens as a model rather than as one tensor: a folder, an index, or a
    file holding several tensors (a file that cannot be listed is left to the loaders)."""
    p = Path(path)
    if p.is_dir() or p.name.endswith(INDEX_SUFFIX):
        return True
    try:
        return len(_list_file(p)) > 1
    except TensorFileError:
        return False


def list_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """List every tensor ``path`` stands for (see the module docstring).

    A regular file stands for itself; an ``*.index.json`` for the shards its ``weight_map``
    names; a folder for its index if it holds one, else its ``.safetensors`` files (a Hugging
    Face folder often holds the same weights as ``.bin`` files too), else its files of every
    other registered kind (sorted with numbers in names compared as numbers).

    Raises
    ------
    TensorFileError
        When nothing at all can be listed: a missing path, an empty folder, an index that
        is not JSON or has no weight map, or a single file its loader refuses.
    """
    p = Path(path)
    if p.is_dir():
        indexes = sorted(q for q in p.iterdir() if q.name.endswith(INDEX_SUFFIX))
        if indexes:
            return _from_index(indexes[0], p)
        files = _natural([q for q in p.iterdir() if q.suffix == ".safetensors" and q.is_file()])
        if not files:
            suffixes = {s for kind in kinds() for s in kind.suffixes}
            files = _natural([q for q in p.iterdir() if q.suffix.lower() in suffixes
                              and q.is_file()])
        if not files:
            raise fail(p, "is a directory without .safetensors files (nor other tensor files: "
                          f"{supported_text()})")
        return _from_files(p, files)
    if p.name.endswith(INDEX_SUFFIX):
        return _from_index(p, p)
    tensors = [CheckpointTensor(i.name, p, i) for i in _list_file(p)]
    return Checkpoint(p, [p], tensors)


def model_folders(path: str | os.PathLike) -> list[Path]:
    """The checkpoints inside a folder of model folders (a model zoo), in natural order; empty
    when ``path`` is not such a folder (a checkpoint itself, a file, or a folder of neither)."""
    p = Path(path)
    if not p.is_dir() or _lists(p):
        return []
    return _natural([q for q in p.iterdir() if q.is_dir() and _lists(q)])


def _lists(path: Path) -> bool:
    try:
        list_checkpoint(path)
    except TensorFileError:
        return False
    return True


def _list_file(path: str | os.PathLike) -> list[TensorInfo]:
    return file_kind(path).list(path)


def _natural(files: list[Path]) -> list[Path]:
    def key(q: Path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", q.name)]
    return sorted(files, key=key)


def _from_files(root: Path, files: list[Path]) -> Checkpoint:
    tensors: list[CheckpointTensor] = []
    problems: list[str] = []
    seen: set[str] = set()
    for file in files:
        try:
            infos = _list_file(file)
        except TensorFileError as exc:
            problems.append(str(exc))
            tensors.append(CheckpointTensor(file.name, file, None, str(exc)))
            continue
        for info in infos:
            if info.name in seen:
                message = (f"{file}: tensor {printable(info.name)!r} is also in an earlier "
                           "file; this copy is not listed")
                problems.append(message)
                continue
            seen.add(info.name)
            tensors.append(CheckpointTensor(info.name, file, info))
    return Checkpoint(root, files, tensors, problems)


#: Rows listed for tensors an index names but that cannot be read (a missing shard, a shard
#: that does not hold them); the problems count them all. An index naming a million such
#: names is one problem, not a million rows of memory and warnings.
MAX_UNREADABLE_ROWS = 1000
#: Distinct shard files an index may name: each costs a look at the disk before anything is
#: shown, and published checkpoints have at most a few hundred.
MAX_SHARDS = 10_000


def _from_index(index: Path, root: Path) -> Checkpoint:
    weight_map = _weight_map(index)
    by_shard: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        by_shard.setdefault(shard, []).append(name)
    if len(by_shard) > MAX_SHARDS:
        raise fail(index, f"names {len(by_shard):,} shard files; an index of more than "
                   f"{MAX_SHARDS:,} is refused (the largest published checkpoints have a few "
                   "hundred)")
    tensors: list[CheckpointTensor] = []
    problems: list[str] = []
    files: list[Path] = []
    unusable: dict[str, list[str]] = {}  # the shards refused without opening them, by why
    unreadable = 0  # tensors the index names that cannot be read (rows for the first ones)
    folder = str(index.parent)
    for shard in _natural_names(by_shard):
        names = by_shard[shard]
        file = index.parent / shard
        why = _shard_problem(folder, shard)
        problem = None if why is None else (f"{index}: names shard {printable(shard)[:80]!r}, "
                                            f"{why}")
        infos: dict[str, TensorInfo] = {}
        if problem is None:
            try:
                infos = {i.name: i for i in _list_file(file)}
            except TensorFileError as exc:
                problem = str(exc)
        if problem is not None:
            if why is None:
                problems.append(problem)
            else:
                unusable.setdefault(why, []).append(shard)
            room = max(0, MAX_UNREADABLE_ROWS - unreadable)
            tensors.extend(CheckpointTensor(n, file, None, problem) for n in names[:room])
            unreadable += len(names)
            continue
        files.append(file)
        missing = [n for n in names if n not in infos]
        if missing:
            problems.append(f"{index}: names {len(missing)} tensor(s) that shard "
                            f"{printable(shard)!r} does not hold, e.g. "
                            f"{printable(missing[0])!r}")
        for info in infos.values():  # file order; a tensor the index forgot is still shown
            if weight_map.get(info.name, shard) == shard:
                tensors.append(CheckpointTensor(info.name, file, info))
        room = max(0, MAX_UNREADABLE_ROWS - unreadable)
        tensors.extend(CheckpointTensor(n, file, None, f"{file}: holds no tensor "
                                        f"{printable(n)!r} (the index says it does)")
                       for n in missing[:room])
        unreadable += len(missing)
    for why, shards in unusable.items():  # one line however many shards: an index can name
        problems.append(f"{index}: names {len(shards):,} shard(s) "  # a million of them
                        + (f"{printable(shards[0])[:80]!r}, " if len(shards) == 1 else
                           f"(e.g. {printable(shards[0])[:80]!r}), ")
                        + (why if len(shards) == 1 else _plural(why)))
    return Checkpoint(root, files, tensors, problems)


def _plural(why: str) -> str:
    return why.replace("which does", "which do").replace("which is not a plain file name",
                                                          "which are not plain file names")


def _natural_names(names) -> list[str]:
    plain = all(n not in ("", ".", "..") and "/" not in n and "\\" not in n for n in names)
    if not plain:
        return sorted(names)
    return sorted(names, key=lambda n: [int(t) if t.isdigit() else t
                                        for t in re.split(r"(\d+)", n)])


def _weight_map(index: Path) -> dict[str, str]:
    size = check_regular_file(index)
    if size > MAX_INDEX_BYTES:
        raise fail(index, f"index of {size} bytes exceeds the {MAX_INDEX_BYTES}-byte limit")
    try:
        doc = json.loads(index.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise fail(index, "is not a valid JSON checkpoint index") from None
    except OSError as exc:
        raise fail(index, f"cannot read file ({exc.strerror or exc})") from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise fail(index, "has no weight_map of tensor names to shard files")
    return weight_map


def _shard_problem(folder: str, shard: str) -> str | None:
    """Why a shard named by the index is refused, or None: it must be a plain file name in
    the index's own folder (no ``../`` or absolute path reading elsewhere) and exist. Plain
    string tests, no ``Path`` per name: an index may name a million shards."""
    if shard in ("", ".", "..") or "/" in shard or "\\" in shard or "\0" in shard:
        return "which is not a plain file name in the index's directory; refused"
    if not os.path.isfile(os.path.join(folder, shard)):
        return "which does not exist"
    return None


class RawTensor:
    """A listed tensor's stored bytes, read a chunk at a time into a caller's buffer.

    ``layout_ok`` is False when the fused scan cannot use the bytes as they are (Fortran
    order or a byte order other than the machine's); the engine's loaders then convert.
    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, file: Path, info: TensorInfo, headers: dict | None = None) -> None:
        self.file, self.info = file, info
        self._fd: int | None = None
        self._array: np.ndarray | None = None
        self.offset = 0
        fmt = file_kind(file).name
        if fmt == "safetensors" and headers is not None:
            self._open_safetensors(headers)
            return
        array, found = file_kind(file).load(file, info.name)  # validates the header again
        if found.shape != info.shape or found.dtype != info.dtype:
            raise fail(file, f"tensor {printable(info.name)!r} changed since it was listed")
        native = array.dtype.byteorder in ("=", "|") or (
            array.dtype.byteorder == "<" and np.little_endian)
        self.layout_ok = bool(array.flags.c_contiguous) and native
        # a mapping is never kept to be read later (a file rewritten meanwhile would SIGBUS):
        # mapped bytes in the machine's layout are read with pread, others copied now
        if isinstance(array, np.memmap) and self.layout_ok:
            self.offset = int(array.offset)
            del array
            try:
                self._fd = os.open(file, os.O_RDONLY)
            except OSError as exc:
                raise fail(file, f"cannot read file ({exc.strerror or exc})") from None
        else:
            array = in_memory(array)
            self._array = array.reshape(-1) if self.layout_ok else array

    def _open_safetensors(self, headers: dict) -> None:
        """Locate the tensor through its file's header, validated once per file and scan
        (``headers`` maps file -> header): re-reading a header of thousands of entries for
        each of its tensors made a scan quadratic in their number."""
        from quantscope.io.safetensors import read_header

        header = headers.get(self.file)
        if header is None:
            header = headers[self.file] = read_header(self.file)
        found = header.tensors.get(self.info.name)
        if found is None or found[0].shape != self.info.shape or \
                found[0].dtype != self.info.dtype:
            raise fail(self.file, f"tensor {printable(self.info.name)!r} changed since it was "
                                  "listed")
        self.offset, self.layout_ok = found[1], True
        try:
            self._fd = os.open(self.file, os.O_RDONLY)
        except OSError as exc:
            raise fail(self.file, f"cannot read file ({exc.strerror or exc})") from None

    def read_into(self, start: int, out: np.ndarray) -> None:
        """Fill ``out`` (a 1-D array of the raw dtype) with elements from ``start`` on."""
        if self._array is not None:
            flat = self._array
            out[...] = flat[start:start + out.size].view(out.dtype)
            return
        view = memoryview(out).cast("B")
        pos = self.offset + start * self.info.numpy_dtype.itemsize
        done = 0
        while done < len(view):
            try:
                got = os.preadv(self._fd, [view[done:]], pos + done)
            except OSError as exc:
                raise fail(self.file, f"cannot read tensor {printable(self.info.name)!r} "
                                      f"({exc.strerror or exc})") from None
            if got == 0:
                raise fail(self.file, f"tensor {printable(self.info.name)!r} is truncated: "
                                      "the file ended inside its data (it shrank after it "
                                      "was listed)")
            done += got

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._array = None

    def __enter__(self) -> RawTensor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
