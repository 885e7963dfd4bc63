"""A notebook with ``quantscope.widget`` run headless as Jupyter runs it (nbclient, a real
ipykernel), twice: on a fresh Numba cache (an empty ``NUMBA_CACHE_DIR``: the first start after
an install) and again on the cache that run filled. Prints each cell's time, its outputs'
size in bytes, the widget state the notebook stores, and what reached stderr.

    PYTHONPATH=src python bench/notebook_first_start.py
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
CELLS = [
    "import numpy as np, quantscope as qs",
    "w = qs.widget('gelu_activations', bits=8)  # the bundled MiniLM GELU activations\nw",
    "w.controls['bits'].value = 4\nw.controls['method'].value = 'percentile'\n"
    "w.numbers()['schemes']['asymmetric/tensor']['sqnr_db']",
    "w.set(clip=(-0.5, 2.0)).numbers()['schemes']['asymmetric/tensor']['clipped_fraction']",
]


def _seconds(cell) -> float | None:
    t = cell.metadata.get("execution", {})
    a, b = t.get("iopub.execute_input"), t.get("shell.execute_reply")
    if not (a and b):
        return None
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(b) - parse(a)).total_seconds()


def run(cache: str, label: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    os.environ.update(PYTHONPATH=str(ROOT / "src"), NUMBA_CACHE_DIR=cache)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=True,
                            record_timing=True,
                            resources={"metadata": {"path": tempfile.gettempdir()}})
    start = time.perf_counter()
    client.execute()
    total = time.perf_counter() - start
    print(f"{label}: whole notebook {total:.1f} s (kernel start included)")
    for i, cell in enumerate(nb.cells, 1):
        size = len(json.dumps(cell.outputs))
        stderr = "".join(o.text for o in cell.outputs
                         if o.output_type == "stream" and o.name == "stderr").strip()
        shown = next((o["data"].get("text/plain", "") for o in cell.outputs
                      if o.output_type in ("execute_result", "display_data")), "")
        print(f"  cell {i}: {_seconds(cell) or 0:6.2f} s, outputs {size:6,} bytes"
              f"{'; ' + shown[:60] if shown else ''}")
        if stderr:
            print(f"          stderr: {stderr[:300]}")
    state = nb.metadata.get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state", {})
    images = [m for m in state.values() if m["model_name"] == "ImageModel"]
    print(f"  widget state stored with the notebook: {len(json.dumps(state)):,} bytes "
          f"({len(state)} models, {len(images)} images); whole .ipynb "
          f"{len(nbformat.writes(nb)):,} bytes")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="qs-numba-") as cache:
        run(cache, "fresh Numba cache")
        run(cache, "warm Numba cache")


if __name__ == "__main__":
    main()
