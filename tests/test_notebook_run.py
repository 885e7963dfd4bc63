"""A notebook run headless, as Jupyter runs it: ``qs.widget`` displays, a control moved from a
later cell redraws, and nothing but the widget and the numbers reaches the outputs (no Qt, no
stderr noise)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import nbformat

pytestmark = pytest.mark.slow  # fresh interpreters: the last tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
CELLS = [
    "import numpy as np, quantscope as qs\n"
    "x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)\n"
    "w = qs.widget(x)\nw",
    "w.controls['bits'].value = 4\n"
    "w.numbers()['schemes']['symmetric/tensor']['codes_used']",
    "import sys\n'PySide6' in sys.modules",
]


def run_notebook(tmp_path: Path) -> nbformat.NotebookNode:
    # imported here, not at the top: every xdist worker collects this file, one runs it
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    os.environ.update(PYTHONPATH=env["PYTHONPATH"])  # the kernel inherits this environment
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}},
                            store_widget_state=True)
    client.execute()
    return nb


def test_widget_notebook_runs_headless(tmp_path):
    nb = run_notebook(tmp_path)
    first, second, third = (c.outputs for c in nb.cells)
    views = [o for o in first if o.output_type == "display_data" or
             o.output_type == "execute_result"]
    assert views and "application/vnd.jupyter.widget-view+json" in views[0]["data"]
    assert second[0]["data"]["text/plain"] == "15"  # 4 bits, narrow range: 15 codes at most
    assert third[0]["data"]["text/plain"] == "False"  # no Qt in the kernel
    streams = [o for c in nb.cells for o in c.outputs if o.output_type == "stream"]
    noise = [o.text for o in streams if o.name == "stderr"
             and not o.text.startswith("quantscope: ")]  # the compile notice may come
    assert noise == []
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    images = [m for m in state.values() if m["model_name"] == "ImageModel"]
    assert len(images) == 4  # the four panes, their PNGs stored with the notebook
    import nbformat

    size = len(json.dumps(nbformat.from_dict(nb)))
    assert size < 400_000, size
