"""The state's modules import each other at the top. An import inside a function is kept only
where it defers something heavy (Numba's loops, the format table) until it is needed, and it
says so in a comment, on its line or right above its group of imports: an unexplained one is
how import circles were hidden before (``state/compute ↔ state/formats ↔ state/settings``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

STATE = Path(__file__).resolve().parents[1] / "src" / "quantscope" / "state"


def _lazy_imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every quantscope import inside a function of ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if (isinstance(inner, ast.ImportFrom) and inner.module
                        and inner.module.startswith("quantscope")):
                    out.append((inner.lineno, inner.module))
    return sorted(set(out))


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or above the imports grouped with it."""
    if "#" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0 and (lines[i].strip().startswith(("from ", "import ", ")"))
                      or lines[i].strip().endswith(",")):  # a parenthesised import's names
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


@pytest.mark.parametrize("path", sorted(STATE.glob("*.py")), ids=lambda p: p.name)
def test_every_import_inside_a_function_says_why(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    silent = [f"{path.name}:{n} {module}" for n, module in _lazy_imports(path)
              if not _explained(lines, n)]
    assert not silent, "imports inside functions without a reason: " + ", ".join(silent)


def test_the_check_sees_a_silent_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    x = 1\n    from quantscope.state.formats import CHOICES\n"
                   "    return CHOICES\n\n\ndef g():\n    # Numba: only here\n"
                   "    from quantscope.state.formats import CHOICES\n    return CHOICES\n")
    lines = bad.read_text().splitlines()
    assert [(n, _explained(lines, n)) for n, _ in _lazy_imports(bad)] == [(3, False), (9, True)]
