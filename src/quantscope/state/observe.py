"""``quantscope.observe(model, batches)``: run the user's batches, keep what each layer sees.

Forward hooks go on the model's Linear and convolution layers (``Linear``, ``Conv1d/2d/3d``,
Hugging Face's ``Conv1D``) and, through a torch function mode, on the matrix products its code
calls itself (``torch.matmul``, ``bmm``, the ``@`` operator: attention's ``Q·Kᵀ`` and
``P·V``). Each hooked input (and output, with ``outputs=True``) is captured exactly, batch by
batch, into a :class:`~quantscope.state.activation_capture.CaptureStore` (bounded memory: past
its cap a layer spills to a temporary memory-mapped file). The hooks and the function mode are
removed when the run ends, however it ends -- an exception in the model, a cancel, Ctrl-C.

Layouts: a Linear's input ``[..., features]`` and a convolution's ``[N, C, ...]`` become
``[tokens, channels]`` with the channels last; a matmul's left operand ``[..., M, K]`` has its
``K`` reduction channels last, its right operand ``[..., K, N]`` on axis -2.

torch is never imported: the model brings it (``sys.modules``), and a module is recognised by
its class name.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from quantscope.core.tensors.frameworks import as_numpy
from quantscope.errors import Cancelled, QuantscopeError, UserError
from quantscope.state.activation_capture import DEFAULT_CAP_BYTES, CaptureStore
from quantscope.state.activation_figures import METHODS, ActivationRow, activation_figures
from quantscope.state.memory_scan import is_module
from quantscope.state.model_table import ModelTable
from quantscope.state.scan_api import scan

#: Class name -> the axis of its input's channels (a Linear's features are last).
LAYER_TYPES = {"Linear": -1, "Conv1d": 1, "Conv2d": 1, "Conv3d": 1, "Conv1D": -1,
               "LazyLinear": -1, "NonDynamicallyQuantizableLinear": -1}
#: Output channel axis of the same layers.
OUTPUT_AXIS = {"Linear": -1, "Conv1d": 1, "Conv2d": 1, "Conv3d": 1, "Conv1D": -1,
               "LazyLinear": -1, "NonDynamicallyQuantizableLinear": -1}


@dataclasses.dataclass
class Progress:
    """What a progress callback is told after each batch."""

    done: int
    total: int | None
    seconds: float

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the pace so far (None without a known total)."""
        if self.total is None or self.done == 0:
            return None
        return self.seconds / self.done * (self.total - self.done)

    def line(self) -> str:
        of = f"/{self.total}" if self.total is not None else ""
        eta = f", ~{self.eta_s:.0f} s left" if self.eta_s is not None else ""
        return f"observe: batch {self.done}{of} in {self.seconds:.1f} s{eta}"


def _selected(names: list[str], layers: Sequence[str] | None) -> set[str]:
    """The layer names to hook: all, or those equal to or fully matching an entry."""
    if layers is None:
        return set(names)
    chosen: set[str] = set()
    for entry in layers:
        hits = {n for n in names if n == entry}
        if not hits:
            try:
                pattern = re.compile(entry)
            except re.error as exc:
                raise UserError(f"layer {entry!r} is neither a layer name nor a regex: "
                                f"{exc}") from None
            hits = {n for n in names if pattern.fullmatch(n)}
        if not hits:
            raise UserError(f"no Linear, convolution or matmul layer matches {entry!r}; "
                            f"layers: {', '.join(names[:8])}{' ...' if len(names) > 8 else ''}")
        chosen |= hits
    return chosen


class _Capture:
    """The hooks of one run and their stores (see the module docstring)."""

    def __init__(self, model, layers, outputs: bool, matmuls: bool, cap_bytes: int) -> None:
        self.torch = sys.modules["torch"]
        self.model, self.outputs, self.cap_bytes = model, outputs, cap_bytes
        self.stores: dict[str, CaptureStore] = {}
        self.meta: dict[str, tuple[str, str, str]] = {}  # store -> (module, type, port)
        self.handles: list = []
        self.stack: list[str] = []
        self.calls: dict[str, int] = {}
        modules = [(n, m) for n, m in model.named_modules() if type(m).__name__ in LAYER_TYPES]
        self.layer_names = [n for n, _ in modules]
        self.matmuls = matmuls
        self.chosen = _selected(self.layer_names + (["<matmul>"] if matmuls else []),
                                layers) if layers is not None else None
        self.modules = [(n, m) for n, m in modules
                        if self.chosen is None or n in self.chosen]
        self.mode: Any = None

    def _store(self, key: str, module: str, kind: str, port: str) -> CaptureStore:
        store = self.stores.get(key)
        if store is None:
            store = self.stores[key] = CaptureStore(key, self.cap_bytes)
            self.meta[key] = (module, kind, port)
        return store

    def _take(self, key: str, module: str, kind: str, port: str, t, axis: int) -> None:
        x = as_numpy(t.detach(), key)
        self._store(key, module, kind, port).add(x, axis, str(t.dtype).removeprefix("torch."))

    def attach(self) -> None:
        for name, mod in self.modules:
            kind = type(mod).__name__

            def pre(m, args, name=name, kind=kind):
                if args and hasattr(args[0], "detach"):
                    self._take(f"{name}:input", name, kind, "input", args[0], LAYER_TYPES[kind])

            self.handles.append(mod.register_forward_pre_hook(pre))
            if self.outputs:
                def post(m, args, out, name=name, kind=kind):
                    if hasattr(out, "detach"):
                        self._take(f"{name}:output", name, kind, "output", out,
                                   OUTPUT_AXIS[kind])

                self.handles.append(mod.register_forward_hook(post))
        if self.matmuls and (self.chosen is None or "<matmul>" in self.chosen):
            self._attach_matmul()

    def _attach_matmul(self) -> None:
        """Track the running module (a stack of names) and capture matmul operands."""
        torch = self.torch
        for name, mod in self.model.named_modules():
            def enter(m, args, name=name):
                self.stack.append(name)

            def leave(m, args, out):
                if self.stack:
                    self.stack.pop()

            self.handles.append(mod.register_forward_pre_hook(enter))
            self.handles.append(mod.register_forward_hook(leave))
        funcs = {torch.matmul, torch.bmm, torch.Tensor.matmul, torch.Tensor.__matmul__}
        capture = self

        class MatmulMode(torch.overrides.TorchFunctionMode):  # type: ignore[name-defined]
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func in funcs and len(args) >= 2 and capture.stack:
                    a, b = args[0], args[1]
                    if getattr(a, "ndim", 0) >= 2 and getattr(b, "ndim", 0) >= 2:
                        capture._matmul(a, b)
                return func(*args, **(kwargs or {}))

        self.mode = MatmulMode()
        self.mode.__enter__()

    def _matmul(self, a, b) -> None:
        owner = self.stack[-1] or "model"
        k = self.calls.get(owner, 0)
        self.calls[owner] = k + 1
        key = f"{owner}:matmul{k}"
        self._take(f"{key}.a", key, "matmul", "input_a", a, -1)
        self._take(f"{key}.b", key, "matmul", "input_b", b, -2)

    def new_batch(self) -> None:
        """Matmul numbering restarts with each batch, so the same call site keeps its name."""
        self.calls.clear()
        self.stack.clear()

    def detach(self) -> None:
        if self.mode is not None:
            self.mode.__exit__(None, None, None)
            self.mode = None
        for h in self.handles:
            h.remove()
        self.handles.clear()


def _run(model, batch) -> None:
    if isinstance(batch, dict):
        model(**batch)
    elif isinstance(batch, tuple | list):
        model(*batch)
    else:
        model(batch)


def observe(model, batches: Iterable, layers: Sequence[str] | None = None, *,
            outputs: bool = False, matmuls: bool = True, table: ModelTable | None = None,
            cap_bytes: int = DEFAULT_CAP_BYTES, methods: Sequence[str] = METHODS,
            on_progress: Callable[[Progress], None] | None = None,
            should_stop: Callable[[], bool] | None = None, **settings) -> ModelTable:
    """Run ``batches`` through ``model`` and return its table with activation rows.

    Parameters
    ----------
    model : torch nn.Module
        Run as it is (call ``model.eval()`` first for inference behaviour), without gradients.
    batches : iterable
        Each a tensor (``model(t)``), a tuple or list (``model(*b)``) or a dict
        (``model(**b)``).
    layers : sequence of str, optional
        Layer names or regexes (full match) to observe; ``"<matmul>"`` selects the matrix
        products. Default every Linear, convolution and matmul.
    outputs : bool
        Also capture the layers' outputs.
    table : ModelTable, optional
        A table of the model's weights to add the rows to (default: ``scan(model)``).
    cap_bytes : int
        Bytes of one layer's values held in memory before it spills to a temporary file.
    methods : sequence of str
        The calibration methods of the figures (min/max, percentile, MSE, entropy).
    on_progress : callable, optional
        ``on_progress(Progress)`` after each batch (done, total, seconds, ETA).
    should_stop : callable, optional
        Asked before each batch; when true the run stops and
        :class:`~quantscope.errors.Cancelled` is raised (hooks removed).
    **settings
        The weights' scan settings when ``table`` is not given.
    """
    if not is_module(model) or "torch" not in sys.modules:
        raise UserError(f"observe needs a torch nn.Module, got {type(model).__name__}")
    if cap_bytes < 0:
        raise UserError(f"cap_bytes must be >= 0, got {cap_bytes}")
    torch = sys.modules["torch"]
    capture = _Capture(model, layers, outputs, matmuls, cap_bytes)
    total = len(batches) if hasattr(batches, "__len__") else None  # type: ignore[arg-type]
    start = time.perf_counter()
    try:
        capture.attach()
        with torch.no_grad():
            for i, batch in enumerate(batches):
                if should_stop is not None and should_stop():
                    raise Cancelled(f"observe cancelled after {i} batches")
                capture.new_batch()
                _run(model, batch)
                if on_progress is not None:
                    on_progress(Progress(i + 1, total, time.perf_counter() - start))
    except BaseException:
        for store in capture.stores.values():
            store.close()
        raise
    finally:
        capture.detach()
    if table is None:
        table = scan(model, **settings)
    rows = []
    for key, store in capture.stores.items():
        module, kind, port = capture.meta[key]
        values = store.values()
        try:
            figures = activation_figures(values, methods) if values.size else {}
        except QuantscopeError as exc:
            figures = {"error": {"error": str(exc)}}
        rows.append(ActivationRow(key, module, kind, port, store.dtype or "",
                                  store.batch_shapes, values, store.spilled, figures))
    return dataclasses.replace(table, activations=rows)
