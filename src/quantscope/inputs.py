"""What a Python caller hands to ``view`` / ``figure``: the tensor (or where it comes from) and
the settings by name. Qt-free; shared by :mod:`quantscope.viewer` and :mod:`quantscope.figure`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from quantscope.core.tensors.frameworks import as_numpy, framework_of, quantized_scheme
from quantscope.core.tensors.validate import EngineTypeError, check_narrowed
from quantscope.errors import QuantscopeError, UserError, one_line
from quantscope.io.checks import list_for_message
from quantscope.state import Source
from quantscope.state.live import LiveExplorer
from quantscope.state.load_job import PickFirst, source_reader
from quantscope.state.setting_names import settings_changes
from quantscope.state.source import DEMO_SAMPLE

Read = Callable[[], tuple[np.ndarray, str]]

__all__ = ["Read", "live_state", "resolve_source", "settings_changes"]


def resolve_source(data, *, tensor: str | None = None, name: str | None = None
                   ) -> tuple[Source, Read | None, dict]:
    """Where ``data`` comes from: ``(source, read, settings)``.

    ``read`` is None for what the window loads itself (a file, a sample, a generator, a
    :class:`Source`); for an in-memory tensor it returns ``(float32 array, stored dtype)``
    from a snapshot taken now, so the caller's tensor may change as soon as this returns.
    ``settings`` are changes the tensor asks for: a quantized torch tensor's own clip window.
    """
    if data is None:
        # its name says activations: the axis rule gives -1 and says why
        return Source("sample", DEMO_SAMPLE, tensor=tensor), None, {}
    if isinstance(data, Source):
        return data, None, {}
    if isinstance(data, str | os.PathLike):
        return _named_source(os.fspath(data), tensor), None, {}
    if tensor is not None:
        raise UserError("tensor= names a tensor inside a file; an in-memory tensor needs none")
    return _array_source(data, name)


def _named_source(text: str, tensor: str | None) -> Source:
    from quantscope.core.tensors.generators import GENERATORS
    from quantscope.io.samples import list_samples

    if not text:
        raise UserError("an empty path names no file, sample or generator")
    try:
        exists = Path(text).exists()
    except (OSError, ValueError) as exc:  # a name too long for the system, a NUL byte
        raise UserError(f"{_short(text)}: not a usable path "
                        f"({getattr(exc, 'strerror', None) or exc})") from None
    if exists:
        return Source("file", text, tensor=tensor)
    samples = [n for n, _, _ in list_samples()]
    if text in samples:
        return Source("sample", text, tensor=tensor)
    if text in GENERATORS:
        return Source.generator(text, GENERATORS[text].default_shape, 0)
    raise UserError(f"{_short(text)} is no file, bundled sample ({', '.join(samples)}) or "
                    f"generator ({', '.join(GENERATORS)})")


def _short(text: str) -> str:
    """A path for a one-line message: escaped, and cut in the middle past 120 characters
    (with its length), since a path may be a megabyte of text."""
    shown = one_line(repr(text))
    if len(shown) <= 120:
        return shown
    return f"{shown[:60]}...{shown[-40:]} ({len(text):,} characters)"


def _array_source(data, name: str | None) -> tuple[Source, Read, dict]:
    framework = framework_of(data)
    hint: dict = {}
    label = name
    if framework == "torch" and data.is_quantized:
        label = label or f"quantized torch {str(data.dtype).removeprefix('torch.')} tensor " \
                         f"({quantized_scheme(data)})"
        hint = _own_window(data)
        data = data.dequantize()
    arr = as_numpy(data)
    dtype = arr.dtype
    if dtype.kind not in "fiu" and dtype.name != "bfloat16" and not dtype.name.startswith(
            "float8"):
        raise EngineTypeError(f"dtype {dtype} is not a real number type; nothing to quantize")
    if label is None:
        label = f"{framework or type(data).__name__} {dtype.name} tensor"
        if isinstance(data, np.ndarray):
            label = f"{dtype.name} array"
    if dtype.kind == "f" and dtype.itemsize > 4:  # narrowed now: values beyond float32 are
        with np.errstate(over="ignore"):  # refused before any number (a float32 copy is
            snapshot = arr.astype(np.float32)  # also half of a float64 one)
        check_narrowed(arr, snapshot, label or "the tensor")
    else:
        snapshot = np.array(arr, copy=True)  # in its own dtype: a bf16 copy is half a float32

    def read() -> tuple[np.ndarray, str]:
        x = snapshot if snapshot.dtype == np.float32 else snapshot.astype(np.float32)
        return x, dtype.name

    return Source("array", label), read, hint


def _own_window(t) -> dict:
    """The manual clip window whose asymmetric per-tensor quantization is the tensor's own:
    a per-tensor affine qint8/quint8 tensor's ``[(qmin - z) s, (qmax - z) s]`` gives the same
    float32 scale and the same codes (a quint8 zero point shows as ``z - 128`` on the engine's
    int8 codes). Per-channel schemes have no single window: none is set."""
    import torch

    if t.qscheme() != torch.per_tensor_affine or t.dtype not in (torch.qint8, torch.quint8):
        return {}
    s, z = t.q_scale(), t.q_zero_point()
    qmin, qmax = (-128, 127) if t.dtype == torch.qint8 else (0, 255)
    return {"method": "manual", "manual_clip": ((qmin - z) * s, (qmax - z) * s)}


def live_state(data=None, *, tensor: str | None = None, name: str | None = None,
               settings: dict | None = None, timeout: float = 120.0,
               threads_name: str | None = None) -> LiveExplorer:
    """A live state (:class:`~quantscope.state.live.LiveExplorer`) with ``data`` loaded under
    ``settings`` (by name, as :func:`settings_changes` takes them) and every pane's report in.

    The one way a front end without a window gets its tensor: the load, the preparation and
    the reports run in the state's scheduler, and this thread delivers their outcomes while
    it waits (no event loop). ``qs.figure`` draws from it, ``qs.widget`` keeps it live.
    Raises what the window would show as an error: a refused setting or file, a source of
    several tensors with none named (listing their names), ``TimeoutError`` after
    ``timeout`` seconds. The caller owns the state and shuts it down. ``threads_name``
    prefixes its scheduler's threads' names (default: the window's).
    """
    from quantscope.core.kernels.compile_notice import announce_compiles
    from quantscope.state.compile_ahead import stand_in_if_cold

    # a first run: NumPy twins compute the panes at once while another process compiles the
    # loops (a minute on a busy machine); a loop without a twin waits for it, and any compile
    # here says so with its progress on a notebook cell's stderr, as the window's do
    stand_in_if_cold()
    announce_compiles()
    live = LiveExplorer() if threads_name is None else LiveExplorer(name=threads_name)
    st = live.state
    refused: list[str] = []
    st.error.connect(refused.append)
    outcome: dict = {}
    live.loaded.connect(lambda ticket, result: outcome.setdefault("loaded", result))
    live.failed.connect(lambda kind, message: outcome.setdefault("failed", message))
    try:
        if settings:
            st.update_settings(**settings_changes(st.settings, settings, None))
        if refused:
            raise UserError(refused[0])
        source, read, hint = resolve_source(data, tensor=tensor, name=name)
        given = dataclasses.replace(st.settings, **hint) if hint else None
        if read is None:
            live.load(source, source_reader(source, pick=False), settings=given, reports=True)
        else:
            live.load(source, read, settings=given)

        def done() -> bool:
            if "failed" in outcome or refused:
                return True
            return "loaded" in outcome and live.idle() and not live.preparing() and (
                st.tensor is None or live.has_results())

        if not live.wait(done, timeout):
            raise TimeoutError(f"the panes' numbers were not ready within {timeout} s")
        if "failed" in outcome:
            raise QuantscopeError(outcome["failed"])
        if refused:
            raise QuantscopeError(refused[0])
        loaded = outcome["loaded"]
        if isinstance(loaded, PickFirst):
            names = [info.name for info in loaded.infos]
            raise UserError(f"{source.label()} holds {len(names)} tensors; choose one with "
                            f"tensor=NAME: {list_for_message(names)}")
        if st.tensor is None:
            raise UserError(f"{source.label()}: no single tensor to draw")
    except BaseException:
        live.shutdown()
        raise
    return live
