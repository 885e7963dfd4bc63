"""``quantscope.scan(obj)``: a model's tensors as a :class:`~.model_table.ModelTable`.

``obj`` is what a user holds: a path the loaders open (a ``.safetensors`` file, a sharded folder
or its index, an ``.npz``, a folder of ``.npy`` files), a state dict, or a torch ``nn.Module``.
A path goes through :class:`~quantscope.state.model_scan.ModelScan`, exactly as
``quantscope scan`` does; in-memory tensors through
:mod:`quantscope.state.memory_scan`, whose figures take the same route tensor by tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from quantscope.errors import QuantscopeError, UserError
from quantscope.io import load_for_analysis
from quantscope.io.checkpoint import list_checkpoint
from quantscope.io.stored import source_checkpoint
from quantscope.state.cluster_scan import ClusterScan, connect
from quantscope.state.memory_scan import is_module, path_like, scan_entries, tensor_entries
from quantscope.state.model_scan import ModelRow, ModelScan, model_rows, scan_settings
from quantscope.state.model_table import ModelTable
from quantscope.state.settings import Settings


def scan(obj, *, formats: bool = False, axis: int | None = None, label: str | None = None,
         on_row=None, client=None, axes: dict[str, int] | None = None,
         **settings) -> ModelTable:
    """Scan every tensor of ``obj`` (see the module docstring) under ``settings``.

    Parameters
    ----------
    obj : path, mapping of names to tensors, or nn.Module
        The model. A module's ``state_dict()`` (parameters and buffers) is read, one tensor
        converted at a time.
    formats : bool
        Also name each tensor's best 8-bit and best 4-bit format (``scan --formats``).
    axis : int, optional
        The per-channel axis of every tensor (``scan --axis``); default each tensor's own.
    axes : dict, optional
        In-memory tensors only: the per-channel axis of the tensors named (an ONNX MatMul's
        weight ``[in, out]`` has its output channels on axis 1), others as ``axis``.
    label : str, optional
        What the table calls the model (default: the path, or the object's kind).
    client : distributed.Client or str, optional
        Scan on a Dask cluster (``scan --dask``): a client, or an address
        (``"tcp://host:8786"``, ``"local:2"``; see :func:`.cluster_scan.connect`). Paths only:
        the workers read the files themselves. The rows equal the local scan's.
    **settings
        :class:`~quantscope.state.settings.Settings` fields (``bits=4``, ``method="mse"``,
        ``runtime="onnxruntime"``...), as ``quantscope scan`` takes them.

    Raises
    ------
    UserError
        For an unknown setting or an object that is not a model.
    QuantscopeError
        When nothing at all could be read.
    """
    try:
        chosen = scan_settings(Settings(**settings).check())
    except TypeError as exc:
        raise UserError(f"unknown setting: {exc}") from None
    if path_like(obj):
        # a quantized checkpoint's stored weights decoded, under their own names (a cluster's
        # workers read raw bytes: there the stored parts are listed as they are)
        checkpoint = list_checkpoint(obj) if client is not None else source_checkpoint(obj)
        rows = model_rows(checkpoint)
        if rows and all(r.status == "error" for r in rows):
            raise QuantscopeError(rows[0].reason)
        rows = _scan_rows(rows, chosen, axis, formats, on_row, client)

        def read_file(row: ModelRow) -> np.ndarray:
            return load_for_analysis(Path(row.path), row.name)[0]

        return ModelTable(rows, chosen, label or str(obj), read_file, checkpoint.sharded, axis)
    if client is not None:
        raise UserError("a Dask cluster scans files its workers can read: save the model "
                        "(safetensors) and scan its path with client=")
    entries = tensor_entries(obj)
    kind = type(obj).__name__ if is_module(obj) else "state dict"
    rows = scan_entries(entries, chosen, axis=axis, formats=formats, label=kind, on_row=on_row,
                        axes=axes)
    by_name = {e.name: e for e in entries}

    def read_memory(row: ModelRow) -> np.ndarray:
        return by_name[row.name].read()

    return ModelTable(rows, chosen, label or kind, read_memory, False, axis)


def _scan_rows(rows: list[ModelRow], settings: Settings, axis: int | None, formats: bool,
               on_row, client) -> list[ModelRow]:
    """The rows scanned here, or on the cluster ``client`` stands for."""
    if client is None:
        return ModelScan(rows, settings, axis=axis, formats=formats).run(on_row=on_row)

    if isinstance(client, str):
        with connect(client) as own:
            return ClusterScan(rows, settings, own, axis=axis, formats=formats).run(
                on_row=on_row)
    return ClusterScan(rows, settings, client, axis=axis, formats=formats).run(on_row=on_row)
