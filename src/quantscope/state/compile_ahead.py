"""The engine's other compiled loops, compiled ahead in a process of their own on a first run.

The launcher's warm-up (:func:`quantscope.state.warm_up.warm_up_engine`) loads the loops the
panes use. Number formats, the model scan's one-read figures and the direct passes of the
engine API have loops of their own that Numba compiles on their first call: on a machine's
first run that is 15-20 s inside the window, with the GUI thread short of the interpreter
for a few hundred milliseconds at a time, the first time a person opens the formats. When the
warm-up itself had to compile (the cache is cold: a new machine or a new version),
:func:`start_if_cold` starts ``python -m quantscope.state.compile_ahead`` at the lowest
priority, which calls each of those loops once on small tensors, so Numba writes them to its
cache while the person looks at the panes; the window then loads them from there (about 50 ms)
when it first needs them.

Nothing depends on the process finishing: a loop it has not written yet is compiled by the
window as it would be without it, and Numba writes its cache files atomically, so two
processes compiling the same loop leave one whole file.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from quantscope.core import analyze, choose_qparams, dequantize, quantize
from quantscope.core.kernels import compiled
from quantscope.core.stats.prepared import prepare
from quantscope.io.dtypes import dtype_from_name
from quantscope.state.settings import Settings
from quantscope.state.warm_up import WARM_UP_SHAPE


def cache_was_cold() -> bool:
    """Whether this process compiled the panes' main loop rather than loading it (call after
    the warm-up): then the other loops are not in the cache either."""
    stats = getattr(compiled.evaluate_rows, "stats", None)  # a Numba dispatcher's own counters
    if getattr(getattr(compiled.evaluate_rows, "_cache", None), "cache_path", None) is None:
        return False  # compiled in memory: compiling ahead in another process saves nothing
    return bool(stats is not None and sum(stats.cache_misses.values()))


#: The compile-ahead process this process started (kept: it runs on after the call).
_started: subprocess.Popen | None = None


def start_if_cold() -> subprocess.Popen | None:
    """Start the compile-ahead process when :func:`cache_was_cold`, once per process; return
    it (None when the cache was warm, or the process could not start: then nothing is
    compiled ahead)."""
    global _started
    if _started is not None or not cache_was_cold():
        return None
    try:
        _started = subprocess.Popen(
            [sys.executable, "-m", "quantscope.state.compile_ahead"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C in the terminal stops the window, not this
    except OSError:
        return None
    return _started


def compile_rest() -> None:
    """Call, once each on small tensors, every compiled loop beyond the warm-up's, with the
    argument types the window, the scan and the engine API hand them."""
    # these modules define compiled loops (they load Numba): the launcher imports this module
    # before the window shows and must not pay for them
    from quantscope.core.formats.elements import cast, cast_e8m0
    from quantscope.core.stats.fused import figures_of
    from quantscope.state.formats import format_points

    rng = np.random.default_rng(0)
    x = rng.standard_normal(WARM_UP_SHAPE).astype(np.float32)  # above the direct passes' bound
    for symmetric in (True, False):  # int8 and uint8 codes
        p = choose_qparams(x, symmetric=symmetric)
        dequantize(quantize(x, p.scale, p.zero_point), p.scale, p.zero_point)
        analyze(x, p)
    for symmetric in (True, False):  # the MSE search: a long row (prefix sums), short rows
        choose_qparams(x[:64], symmetric=symmetric, method="mse")
        choose_qparams(x[:4], symmetric=symmetric, method="mse", granularity="channel", axis=0)
    settings = Settings()
    format_points(x, prepare(x), settings)  # every format, prepared (the window's path)
    format_points(x[:64], None, settings)  # and direct
    rows = x.reshape(-1, x.shape[-1])
    frozen = rows.copy()
    frozen.flags.writeable = False  # the window's tensors are read-only: another signature
    for blocks in (rows, frozen):  # block scales of formats along the last axis
        compiled.block_abs_max(blocks, 32)
        # groups too many to sort (an LLM weight's groups of 32): their ranges and report
        analyze(blocks, choose_qparams(blocks, format="int4_g32"))
        # llama.cpp's blocks chosen for a prepared tensor, measured as they are encoded
        choose_qparams(blocks, format="gguf_q4_k", prepared=prepare(blocks))
    tao = choose_qparams(x, format="torchao_int4_g32")  # its codes and values (export)
    tao.dequantize(tao.quantize(x))
    cast(x[:64], "float8_e4m3fn")
    cast_e8m0(x[:64])
    for dtype in (np.float32, np.float16, dtype_from_name("bfloat16")):  # the scan's raw dtypes
        figures_of(x[:64].astype(dtype), 0)


def main() -> None:
    """``python -m quantscope.state.compile_ahead``: :func:`compile_rest` at the lowest
    priority (the window's threads keep the cores they need)."""
    try:
        os.nice(19)
    except OSError:
        pass
    compile_rest()


if __name__ == "__main__":
    main()
