"""What a compiled loop and its NumPy twin leave in the arrays the engine hands them, call by
call: the twins' tests compare the two byte for byte on the engine's own calls (the same
argument layouts the compile-ahead warms, so nothing compiles in a test)."""

from __future__ import annotations

import numpy as np

from quantscope.core.kernels import compiled


def recorded(name: str, loop, run) -> list[tuple[bytes, ...]]:
    """``run()`` with ``loop`` serving ``compiled.<name>``: the bytes of every array each call
    was handed (its outputs as the call left them), calls in the order of their inputs (the
    engine's threads make them in either order)."""
    seen: list[tuple[bytes, ...]] = []

    def record(*args):
        result = loop(*args)
        seen.append(tuple(np.ascontiguousarray(a).tobytes() for a in args
                          if isinstance(a, np.ndarray)))
        return result

    compiled.stand_in({name: record})
    try:
        run()
    finally:
        compiled.stand_in({})
    return sorted(seen)


def the_loop(name: str):
    """The compiled loop ``name`` itself (as the engine calls it when no twin stands in)."""
    return lambda *args: compiled.loop(name)(*args)


def assert_same_report(got, want) -> None:
    """Two reports equal to the bit: the text, every error figure, the codes' counts."""
    assert str(got) == str(want)
    for field in ("mse", "rounding_mse", "clipping_mse", "sqnr_db", "max_abs_error"):
        assert float(getattr(got, field)).hex() == float(getattr(want, field)).hex(), field
    assert got.code_histogram.tolist() == want.code_histogram.tolist()
