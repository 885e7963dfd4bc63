"""Sharded checkpoints: a directory of ``.safetensors`` files, or the ``*.index.json`` that
maps each tensor to its shard (the layout large models are published in).

Only the command line's ``scan`` walks shards; the index is untrusted input like any other
file, so its size is bounded and every shard name must be a plain file name in the index's
own directory (no ``../`` or absolute paths that would make quantscope read elsewhere).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from quantscope.io.checks import check_regular_file, fail

#: An index lists one line per tensor; even the largest models stay far below this.
MAX_INDEX_BYTES = 50_000_000


def checkpoint_files(path: str | os.PathLike) -> list[Path]:
    """The tensor files ``path`` stands for, in a stable order.

    A regular file stands for itself; a directory for its ``*.safetensors`` files (sorted);
    a ``*.index.json`` for the shards its ``weight_map`` names (sorted, each once).

    Raises
    ------
    TensorFileError
        Missing path, a directory without safetensors files, or an index that is not valid
        JSON, names no shard, names a shard outside its directory or a missing shard.
    """
    p = Path(path)
    if p.is_dir():
        shards = sorted(q for q in p.iterdir() if q.suffix == ".safetensors" and q.is_file())
        if not shards:
            raise fail(p, "is a directory without .safetensors files")
        return shards
    if p.name.endswith(".index.json"):
        return _index_shards(p)
    check_regular_file(p)
    return [p]


def _index_shards(index: Path) -> list[Path]:
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
    shards = []
    for name in sorted(set(weight_map.values())):
        if name in ("", ".", "..") or Path(name).name != name or "\\" in name:
            raise fail(index, f"names shard {name[:80]!r}, which is not a plain file name in "
                              "the index's directory; refused")
        shard = index.parent / name
        if not shard.is_file():
            raise fail(index, f"names shard {name[:80]!r}, which does not exist")
        shards.append(shard)
    return shards
