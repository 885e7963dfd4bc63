"""What a load does off the owner's thread: read, check, convert, prepare, summarise.

A load is one job of the live state's scheduler (:meth:`quantscope.state.live.LiveExplorer.load`):
every O(N) step runs here, so the owner's thread (the window's) only installs the result. A
source that holds several tensors and names none is not an error: the job returns a
:class:`PickFirst` and the front end lets the user choose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import quantscope.io as tensor_files
from quantscope.errors import QuantscopeError
from quantscope.io.samples import sample_path
from quantscope.state.axes import choose_axis
from quantscope.state.errors import SettingsError
from quantscope.state.settings import Settings
from quantscope.state.source import (
    Source,
    TensorOverview,
    load_source,
    overview,
    prepare_tensor,
    tensor_problem,
    working_tensor,
)

#: ``read(progress)`` (or ``read()``): the array and the name of the dtype it was stored in.
Read = Callable[..., tuple[np.ndarray, str]]


@dataclass(frozen=True)
class PickFirst:
    """A load's outcome when the source holds several tensors and none was named."""

    source: Source
    path: str
    infos: list


@dataclass(frozen=True)
class Loaded:
    """A load's outcome: the tensor, ready to install (``settings``: the ones it came with,
    checked against it, or None to derive them)."""

    source: Source
    tensor: np.ndarray
    prepared: Any
    overview: TensorOverview
    settings: Settings | None


class _Several(Exception):  # leaves ``read`` early with what the front end must pick from
    def __init__(self, path, infos) -> None:
        super().__init__()
        self.path, self.infos = path, infos


def is_checkpoint(source: Source) -> bool:
    """True for a file source that names a checkpoint folder or a ``*.index.json`` and no
    tensor in it: a model to list and scan, not a tensor to load."""
    if source.kind != "file" or source.tensor is not None:
        return False
    return source.name.endswith(".index.json") or Path(source.name).is_dir()


def source_reader(source: Source, *, pick: bool = True) -> Read:
    """``read(progress)`` for a file, sample or generator. A file, or a sample when ``pick``,
    that holds several tensors and names none makes the load return a :class:`PickFirst`
    (listed first, in the job: a huge header must not freeze the window)."""
    wants_list = source.tensor is None and (
        source.kind == "file" or (pick and source.kind == "sample"))

    def read(report):
        if wants_list:
            report(-1, f"listing {source.label()}")
            path = source.name if source.kind == "file" else sample_path(source.name)
            try:
                infos = tensor_files.list_tensors(path)
            except QuantscopeError:
                if source.kind != "file":
                    raise
                infos = []  # load_source below reports it
            if len(infos) > 1:
                raise _Several(path, infos)
        return load_source(source, report)

    return read


def load_job(source: Source, read: Read, settings: Settings, given: Settings | None,
             progress: Callable[[float, str], None], *, reports: bool = False
             ) -> Loaded | PickFirst:
    """Run a load: ``read`` (with ``progress`` when ``reports``), the checks (a tensor the
    state would refuse, an explicit axis it lacks, ``given`` settings it cannot have raise
    here, so a failed load changes nothing), then the float32 working copy, the preparation
    for ``settings`` and the summary. ``progress`` raises once the job is stale."""
    progress(-1, f"loading {source.label()}")
    try:
        x, dtype = read(progress) if reports else read()
    except _Several as several:
        return PickFirst(source, several.path, several.infos)
    problem = tensor_problem(x)
    if problem is None and source.axis is not None and x.ndim > 0 and not (
            -x.ndim <= source.axis < x.ndim):
        problem = f"channel axis {source.axis} is out of range for shape {x.shape}"
    if problem is not None:
        raise QuantscopeError(f"{source.label()}: {problem}")
    axis = choose_axis(x.shape, source).axis
    if given is not None:
        try:
            dataclasses.replace(given, axis=axis).check(x.ndim)
        except SettingsError as exc:
            raise SettingsError(f"{source.label()}: {exc}") from None
    x = working_tensor(x, progress)
    prepared = prepare_tensor(
        x, settings, axis,
        lambda f, stage: progress(f, f"preparing exact statistics: {stage} {f:.0%}"))
    progress(-1, "summarising")
    return Loaded(source, x, prepared, overview(x, dtype, prepared), given)


__all__ = ["Loaded", "PickFirst", "Read", "is_checkpoint", "load_job", "source_reader"]
