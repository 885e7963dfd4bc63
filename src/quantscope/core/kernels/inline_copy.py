"""Numba's inlining of ``inline="always"`` functions without copying a function's scope once
per block.

To inline a function, ``numba.core.inline_closurecall.InlineWorker.inline_ir`` copies the
callee's IR twice, one ``copy.deepcopy`` per block. Every variable of every block points at
the function's one scope, and a copied variable copies its scope, so each block's copy
copies the whole scope again: every variable of the function, with its location. A callee
that has inlined others holds hundreds of blocks and thousands of variables, and the
engine's loops inline such callees at several sites: those copies were most of Numba's
``inline_inlinables`` pass, about 40 s of the 209 s of CPU that compiling the engine's loops
took (``python bench/compile_cost.py --passes``).

:func:`install` gives the blocks of one scope one memo per copy, so the scope and its
variables are copied once per copy of the function, as a deep copy of all the blocks at
once would. The copy is used only to be renamed into the caller's variables (every local
variable is replaced by one of the caller's scope, the arguments by the call's), so the
inlined IR, and the compiled loop, are the same: ``tests/core/test_inline_copy.py`` compares
the LLVM IR of loops compiled with and without it. With a Numba whose inliner is built
otherwise it changes nothing.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from numba.core import inline_closurecall, ir

_installed = False
_lock = threading.Lock()


class _ScopeMemos(threading.local):
    """Per thread: the memos of the copies an ``inline_ir`` call is making, one per scope
    (None outside such a call)."""

    memos: dict[int, dict] | None = None


_memos = _ScopeMemos()


class _CopyModule:
    """Stands in for the ``copy`` module inside ``numba.core.inline_closurecall``: a block's
    deep copy inside ``inline_ir`` takes its scope's memo; everything else is the module's."""

    def __init__(self, block_type: type) -> None:
        self._block_type = block_type

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, obj: Any, memo: dict | None = None) -> Any:
        memos = _memos.memos
        if memo is None and memos is not None and isinstance(obj, self._block_type):
            # the blocks of one IR share its scope: one memo copies it, and its variables,
            # once. The copy of a copy has a scope of its own, and so a memo of its own.
            memo = memos.setdefault(id(getattr(obj, "scope", None)), {})
        return copy.deepcopy(obj, memo)


def install() -> bool:
    """Make Numba's inliner copy a callee's scope once per copy (once per process); whether
    it is in place (False with a Numba whose inliner does not copy as expected)."""
    global _installed
    with _lock:
        if _installed:
            return True
        worker = getattr(inline_closurecall, "InlineWorker", None)
        inline_ir = getattr(worker, "inline_ir", None)
        if getattr(inline_closurecall, "copy", None) is not copy or inline_ir is None:
            return False

        def inline_ir_one_scope_copy(self, *args: Any, **kwargs: Any) -> Any:
            outer = _memos.memos
            _memos.memos = {}
            try:
                return inline_ir(self, *args, **kwargs)
            finally:
                _memos.memos = outer

        inline_ir_one_scope_copy.__doc__ = inline_ir.__doc__
        setattr(inline_closurecall, "copy", _CopyModule(ir.Block))  # noqa: B010 - a module's
        setattr(worker, "inline_ir", inline_ir_one_scope_copy)  # noqa: B010 - names, not ours
        _installed = True
        return True
