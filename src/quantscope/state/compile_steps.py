"""The calls that compile every loop of the engine (the compile-ahead's steps), named, and
grouped by the compiled loops they share.

Each step calls loops on small tensors with the argument types the window, the scan and the
engine API hand them, so that Numba writes those loops to its cache
(:mod:`quantscope.state.compile_ahead` runs them). Processes that share the steps (CI's
two, the test suite's warm-up) take them a group at a time (:func:`step_groups`): a step
that needs a loop another step compiles -- every GGUF step needs ``encode_report_blocks``,
one loop of about 60 s of CPU -- and runs in another process while that one compiles it
compiles the same loop a second time, since neither finds it in the cache yet. Claimed one
step at a time, the two processes did so for most of the large loops (CI: 262 s of CPU in
two processes against 193 s in one).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from quantscope.core import QuantParams, analyze, choose_qparams, dequantize, quantize
from quantscope.core.formats.catalog import element_of, format_kind
from quantscope.core.kernels import compiled
from quantscope.core.stats.prepared import prepare
from quantscope.io.dtypes import dtype_from_name
from quantscope.state.settings import Settings
from quantscope.state.warm_up import WARM_UP_SHAPE, warm_up_engine

Step = tuple[str, Callable[[], object]]

#: The groups, costliest first: CPU seconds of each on an empty cache in one process
#: (``python bench/compile_cost.py``): panes ~84, gguf ~60 (~83 before Numba's inliner
#: copied a scope once per copy: :mod:`quantscope.core.kernels.inline_copy`), integer
#: schemes ~10, float blocks ~9, direct rows ~8, casts and scan ~8, block mse ~5, torchao
#: and int direct ~1. Processes that claim them in this order end at about the same time
#: (each takes the next costliest when it is free; CI's first process, started while pip
#: installs, takes the longest); a group not listed here comes last.
GROUP_ORDER = ("panes", "gguf", "integer schemes", "float blocks", "direct rows",
               "casts and scan", "block mse", "torchao", "int direct")
#: The panes' steps (:func:`panes_mse` and the warm-up) and the steps that need their loops.
PANES = "panes"


def panes_mse() -> None:
    """The MSE search of the trade-off curve's optimum on a prepared tensor."""
    x = np.random.default_rng(0).standard_normal(WARM_UP_SHAPE).astype(np.float32)
    prepared = prepare(x)
    for symmetric in (True, False):
        choose_qparams(x, symmetric=symmetric, method="mse", prepared=prepared)


def all_steps() -> list[Step]:
    """The panes' steps (the warm-up's and :func:`panes_mse`) and :func:`rest_steps`."""
    return [("panes", warm_up_engine), ("panes_mse", panes_mse), *rest_steps()]


def rest_steps() -> list[Step]:
    """Every step beyond the panes', in the window's order (its formats first)."""
    return [(name, step) for _, name, step in _grouped_rest()]


def step_groups() -> list[tuple[str, list[Step]]]:
    """:func:`all_steps` in groups of steps that share their costliest loops, in
    :data:`GROUP_ORDER`; within a group the steps keep their order, so each loop is compiled
    by the first step that needs it and loaded from the cache by the others."""
    groups: dict[str, list[Step]] = {PANES: [("panes", warm_up_engine),
                                             ("panes_mse", panes_mse)]}
    for group, name, step in _grouped_rest():
        groups.setdefault(group, []).append((name, step))
    rank = {g: k for k, g in enumerate(GROUP_ORDER)}
    return sorted(groups.items(), key=lambda g: rank.get(g[0], len(rank)))


def format_group(spec, path: str) -> str:
    """The group of a format's step on ``path`` (``"prepared"``, ``"direct"`` or
    ``"read-only"``), by the loop that measures it: GGUF's encoding pass, the sorted loops of
    the panes (integer and element formats on a prepared tensor), the block pass of small
    float grids (MXFP6, MXFP4, NVFP4), torchao's, the integer direct passes, or the direct
    pass of every other format (``direct_rows``)."""
    # the block pass's own bound: reading it loads no compiled loop
    from quantscope.core.stats.format_stats import FLOAT_BLOCK_LEVELS

    kind = format_kind(spec.name)
    if kind in ("gguf", "torchao"):
        return kind
    if kind in ("int", "element") and path == "prepared":
        return PANES
    if kind == "int":
        return "int direct"
    if kind in ("mx", "nvfp4"):
        element = element_of(spec.name)
        if element.levels <= FLOAT_BLOCK_LEVELS and element.mbits >= 1:
            return "float blocks"
    return "direct rows"


def _grouped_rest() -> list[tuple[str, str, Callable[[], object]]]:
    """``(group, name, call)`` of every step beyond the panes', in the window's order."""
    # these modules define compiled loops (they load Numba): the launcher imports this module
    # before the window shows and must not pay for them
    from quantscope.core.formats.elements import cast, cast_e8m0
    from quantscope.core.stats.analyze import compiled_group_totals
    from quantscope.core.stats.fused import figures_of
    from quantscope.state.formats import CHOICES, format_points

    rng = np.random.default_rng(0)
    x = rng.standard_normal(WARM_UP_SHAPE).astype(np.float32)  # above the direct passes' bound
    settings = Settings()
    # a tensor the window opened is read-only: it reaches the writable tensor's loops
    # (quantscope.core.kernels.read_only), which the read-only steps load to show it
    frozen_direct = x[:256].copy()
    frozen_direct.flags.writeable = False
    rows = x.reshape(-1, x.shape[-1])

    def integer_schemes() -> None:
        for symmetric in (True, False):
            p = choose_qparams(x, symmetric=symmetric)
            dequantize(quantize(x, p.scale, p.zero_point), p.scale, p.zero_point)
            analyze(x, p)
        # uint8 codes (PyTorch's quint8, ONNX Runtime's activations): loops of their own
        u = choose_qparams(x, symmetric=False, signed=False)
        dequantize(quantize(x, u.scale, u.zero_point, qmin=u.qmin, qmax=u.qmax), u.scale,
                   u.zero_point)

    def mse_search() -> None:
        for symmetric in (True, False):  # the MSE search: a long row (prefix sums), short rows
            choose_qparams(x[:64], symmetric=symmetric, method="mse")
            choose_qparams(x[:4], symmetric=symmetric, method="mse", granularity="channel",
                           axis=0)
        # a number format's search (the same loops for every element format and either cast):
        # a long row in parts, on its prefix sums, as a pane's per-tensor MSE takes it
        choose_qparams(x, format="fp8_e4m3", method="mse", prepared=prepare(x))
        choose_qparams(x[:4], format="fp4_e2m1", method="mse", granularity="channel", axis=0)

    def block_mse() -> None:
        # each block's stored scale of least error (MX's E8M0, NVFP4's E4M3, NF4's float32):
        # one loop each for a writable tensor and the window's read-only ones
        # (quantscope.core.kernels.read_only)
        for name in ("mxfp4", "nvfp4", "nf4"):
            choose_qparams(x[:4], format=name, method="mse")

    prepared: list = []  # made by the first prepared format step that runs in this process

    def formats(path: str, specs: tuple, curve: bool = False) -> Callable[[], None]:
        def run() -> None:
            if path == "prepared" and not prepared:
                prepared.append(prepare(x))
            tensor, prep = {"prepared": (x, prepared[0] if prepared else None),
                            "direct": (x[:64], None), "read-only": (frozen_direct, None)}[path]
            format_points(tensor, prep, settings, specs=specs, curve=curve)
        return run

    def blocks(tensor: np.ndarray) -> Callable[[], None]:
        def run() -> None:  # block scales of formats along the last axis
            compiled.block_abs_max(tensor, 32)
            # groups too many to sort (an LLM weight's groups of 32): their ranges and report,
            # which take these loops from sizes above this tensor's
            compiled.block_min_max(tensor, 32)
            groups = choose_qparams(tensor, format="int4_g32")
            assert isinstance(groups, QuantParams)  # integer parameters, not a format's
            compiled_group_totals(tensor, groups)
            # llama.cpp's blocks chosen for a prepared tensor, measured as they are encoded
            choose_qparams(tensor, format="gguf_q4_k", prepared=prepare(tensor))
        return run

    def torchao() -> None:
        tao = choose_qparams(x, format="torchao_int4_g32")  # its codes and values (export)
        tao.dequantize(tao.quantize(x))

    def gguf_span() -> None:
        # the span a GGUF pane's grid shows (state.display): one loop for every type; its
        # module defines compiled loops (see above)
        from quantscope.core.formats.gguf import GgufParams, representable_span

        params = choose_qparams(x[:64], format="gguf_q8_0")
        assert isinstance(params, GgufParams)  # stored blocks
        representable_span(params)

    def screen() -> None:
        # the screen's module defines compiled loops (see above)
        from quantscope.core.stats.format_sweep import error_sum, signal_sum

        screened = [choose_qparams(x, format=name)
                    for name in ("fp8_e4m3", "int8", "gguf_q8_0", "torchao_int4_g32")]
        # the scan's screen of a large tensor's formats (one loop each for a writable tensor
        # and a read-only one)
        signal_sum(x)
        for params in screened:  # a cast, integer codes, decoded blocks and codes
            error_sum(x, params)

    def casts_and_scan() -> None:
        cast(x[:64], "float8_e4m3fn")
        cast_e8m0(x[:64])
        # the scan's dtypes (the two float8 kinds share one loop: their raw bits are bytes)
        for dtype in (np.float32, np.float16, dtype_from_name("bfloat16"),
                      dtype_from_name("float8_e4m3fn")):
            for axis in (0, 1):  # channels as rows, and as columns (their own loops)
                figures_of(x[:64].astype(dtype), axis)

    def on(path: str) -> list[tuple[str, str, Callable[[], object]]]:
        return [(format_group(spec, path), f"{spec} {path}", formats(path, (spec,)))
                for spec in CHOICES]

    # each format on each path a step of its own, grouped by the loop it measures with (see
    # format_group). A writable and a read-only tensor reach the same loops
    # (quantscope.core.kernels.read_only): the read-only steps come after the writable ones
    # of their group, which have written those loops, and load them.
    return [*on("prepared"), *on("direct"),
            (PANES, "int curve prepared", formats("prepared", (), curve=True)),
            *(("int direct", f"int curve {path}", formats(path, (), curve=True))
              for path in ("direct", "read-only")),
            # the panes' MSE search on rows (evaluate_rows, rows_optimum) and the formats'
            # (their sorted loop)
            (PANES, "mse search", mse_search), ("block mse", "block mse", block_mse),
            # GGUF's Q4_K blocks and the screen's Q8_0: encode_report_blocks
            ("gguf", "blocks", blocks(rows)), ("gguf", "screen", screen),
            ("integer schemes", "integer schemes", integer_schemes),
            ("torchao", "torchao", torchao),
            # GGUF's blocks (encode_report_blocks) and the span of their grid
            ("gguf", "gguf span", gguf_span),
            ("casts and scan", "casts and scan", casts_and_scan), *on("read-only")]
