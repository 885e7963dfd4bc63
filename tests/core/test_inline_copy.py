"""Numba's inliner with one copy of a callee's scope per copy
(:mod:`quantscope.core.kernels.inline_copy`): in place with the installed Numba, and the loops
it compiles are the ones Numba compiles without it, to the byte of their LLVM IR."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quantscope.core.kernels import inline_copy

#: Run in a fresh interpreter (the inliner is patched per process): a loop that inlines a
#: function that inlines another at several sites, compiled with or without the patch; its
#: LLVM IR, its result, and how many blocks the inliner copied through the patched copy.
_COMPILE = """
import json, sys
import numba
import numpy as np
from numba.core import inline_closurecall
from quantscope.core.kernels import inline_copy

installed = inline_copy.install() if sys.argv[1] == "on" else False
copied = [0]
if installed:
    shared = inline_closurecall.copy.deepcopy

    def counting(obj, memo=None):
        copied[0] += isinstance(obj, numba.core.ir.Block)
        return shared(obj, memo)

    inline_closurecall.copy.deepcopy = counting


@numba.njit(inline="always")
def inner(a, k):
    s = 0.0
    for i in range(a.size):
        if a[i] > k:
            s += a[i] * k
        else:
            s -= a[i]
    return s


@numba.njit(inline="always")
def middle(a, k):
    t = inner(a, k)
    if t > 0:
        t += inner(a[1:], k * 0.5)
    return t - inner(a[:-1], 0.25)


@numba.njit
def outer(a):
    total = 0.0
    for j in range(3):
        total += middle(a, 0.1 * j)
    return total + middle(a[2:], 0.75)


a = np.linspace(-1.0, 1.0, 101)
value = outer(a)
print(json.dumps({"installed": installed, "copied": copied[0], "value": value,
                  "llvm": outer.inspect_llvm(outer.signatures[0])}))
"""


def _compiled(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _COMPILE, mode], capture_output=True,
                         text=True, check=True, timeout=300)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_installed_numba_takes_the_one_scope_copy():
    assert inline_copy.install()
    assert inline_copy.install()  # once per process; a second call changes nothing
    from numba.core import inline_closurecall

    assert isinstance(inline_closurecall.copy, inline_copy._CopyModule)
    assert inline_closurecall.InlineWorker.inline_ir.__name__ == "inline_ir_one_scope_copy"


@pytest.mark.slow
def test_inlined_loops_compile_to_the_same_llvm_ir_with_and_without_it():
    with_it, without = _compiled("on"), _compiled("off")
    assert with_it["installed"] and not without["installed"]
    assert with_it["copied"] > 0  # the inliner's block copies went through the patch
    assert with_it["value"] == without["value"]
    assert with_it["llvm"] == without["llvm"]
