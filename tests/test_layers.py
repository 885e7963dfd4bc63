"""The engine is a library: ``import quantscope`` must not pull in Qt, and the code base keeps
its one direction of imports, its lint rules and its types (checked here so the README's single
test command covers them)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_quantscope_does_not_import_qt():
    code = ("import sys, quantscope, quantscope.io, quantscope.state; "
            "quantscope.view, quantscope.run, quantscope.figure, quantscope.Viewer; "
            "print(','.join(m for m in ('PySide6', 'pyqtgraph', 'superqt') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


SAMPLE = ROOT / "src" / "quantscope" / "resources" / "samples" / "layer0_query_weight.npy"


@pytest.mark.parametrize("sample", [False, True], ids=["16x256", "query-weight-384x384"])
def test_start_up_loads_neither_numba_nor_ml_dtypes(tmp_path, sample):
    """Both take 0.5-2 s to import: they load when a compiled loop or a bf16/fp8 file needs
    them, not for ``import quantscope`` or a min/max report on a float32 file of up to
    ``COMPILED_MIN`` elements (the bundled 147,456-element query weight among them)."""
    import numpy as np

    path = SAMPLE if sample else tmp_path / "small.npy"
    if not sample:
        np.save(path, np.linspace(-1, 1, 4096, dtype=np.float32).reshape(16, 256))
    code = ("import sys, quantscope, quantscope.io, quantscope.state; "
            "from quantscope.cli import main; main(['report', sys.argv[1]]); "
            "print('loaded:' + ','.join(m for m in ('numba', 'ml_dtypes') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, check=True)
    assert "symmetric/tensor" in out.stdout
    assert out.stdout.strip().splitlines()[-1] == "loaded:"


def test_engine_api_is_exposed():
    import quantscope

    for name in ("quantize", "dequantize", "quantize_fp32_to_int8", "QuantParams",
                 "params_from_range", "choose_qparams", "analyze", "QuantReport"):
        assert hasattr(quantscope, name), name


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return path


def test_ruff_is_clean():
    out = subprocess.run([_tool("ruff"), "check", "src", "tests", "bench"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_import_layers_contract():
    out = subprocess.run([_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_core_and_state_type_check():
    """mypy over the engine and the explorer's state ([tool.mypy] in pyproject.toml)."""
    out = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
