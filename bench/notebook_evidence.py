"""A notebook's first ten minutes, run headless as Jupyter runs it (nbclient, a real ipykernel)
on a fresh install: a copy of the package with no ``__pycache__`` and an empty Numba cache.

Cells: a figure of the demo tensor (MiniLM GELU activations), a per-channel report and a
prepared tensor as the notebook shows them, the trade-off view as a figure (on a first run its
curves are drawn at once by the NumPy twins, its MSE optimum, which a live view takes from the
compiled search, said to be still compiling), then ``qs.widget`` with a change of bits. Prints each
cell's time, the size of each output by MIME type (figures should stay under 150 KB, reprs
short) and whatever reached stderr (only quantscope's own notices should), and writes into
OUT: the executed notebook, the figure, and the widget's four pane images after the change
of bits as its image traits hold them, with the four side by side in one PNG to look at.

    PYTHONPATH=src python bench/notebook_evidence.py OUT
"""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from first_window import _wait_for, fresh_install

CELLS = [
    "import time, numpy as np, quantscope as qs\n"
    "from quantscope.io.samples import sample_path\n"
    "x = np.load(sample_path('gelu_activations'))  # MiniLM layer-0 GELU activations",
    "fig = qs.figure(x, bits=4)\nfig",
    "r = qs.analyze(x, qs.choose_qparams(x, granularity='channel', axis=-1))\nr",
    "qs.prepare(x)",
    "qs.figure(x, panes='Trade-off')",
    "w = qs.widget(x, bits=8)\nw",
    "w.set(bits=3).wait()\nw.numbers()['schemes']['symmetric/tensor']['codes_used']",
    "from quantscope.state import compile_ahead\n"
    "print('AHEAD', compile_ahead._started.pid if compile_ahead._started else 0)\n"
    "import sys; 'PySide6' in sys.modules  # a figure needs Qt; the widget does not",
]


def _seconds(cell) -> float:
    t = cell.metadata.get("execution", {})
    a, b = t.get("iopub.execute_input"), t.get("shell.execute_reply")
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(b) - parse(a)).total_seconds() if a and b else float("nan")


def _sizes(cell) -> str:
    """Each output's size by MIME type (bytes of the data as the notebook stores it)."""
    parts = []
    for o in cell.outputs:
        if o.output_type == "stream":
            parts.append(f"{o.name} {len(o.text):,} chars")
        for mime, data in o.get("data", {}).items():
            size = len(base64.b64decode(data)) if mime.startswith("image/") else len(
                data if isinstance(data, str) else json.dumps(data))
            parts.append(f"{mime} {size:,} B")
    return "; ".join(parts) or "no output"


def _montage(pngs: list[bytes], path: Path) -> None:
    """The pane images two by two in one PNG (Qt's offscreen platform draws it)."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication, QImage, QPainter

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841
    images = [QImage.fromData(p) for p in pngs]
    w, h = max(i.width() for i in images), max(i.height() for i in images)
    out = QImage(2 * w, 2 * h, QImage.Format.Format_RGB32)
    out.fill(0xFFFFFF)
    painter = QPainter(out)
    for k, img in enumerate(images):
        painter.drawImage((k % 2) * w, (k // 2) * h, img)
    painter.end()
    out.save(str(path))


def main() -> None:
    out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"notebook on a fresh install, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    with fresh_install() as (src, cache):
        root = cache.parent
        os.environ.update(PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache),
                          HOME=str(root / "home"))  # the kernel inherits these
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
        client = NotebookClient(nb, timeout=900, kernel_name="python3", record_timing=True,
                                store_widget_state=True,
                                resources={"metadata": {"path": str(root)}})
        start = time.perf_counter()
        client.execute()
        print(f"whole notebook {time.perf_counter() - start:.1f} s (kernel start included)")
        for i, cell in enumerate(nb.cells, 1):
            first = cell.source.splitlines()[0] if cell.source else ""
            print(f"  cell {i}: {_seconds(cell):6.2f} s  {first[:60]}")
            print(f"          outputs: {_sizes(cell)}")
            err = "".join(o.text for o in cell.outputs
                          if o.output_type == "stream" and o.name == "stderr").strip()
            if err:
                print("          stderr: " + err.replace("\n", "\n                  "))
            shown = next((o["data"]["text/plain"] for o in cell.outputs
                          if o.output_type in ("execute_result", "display_data")
                          and "text/plain" in o.get("data", {})), "")
            if shown:
                print(f"          text/plain: {shown[:300]!r}")
        figure = next(o for o in nb.cells[1].outputs if "image/png" in o.get("data", {}))
        (out_dir / "figure_first.png").write_bytes(base64.b64decode(figure["data"]["image/png"]))
        state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
        images = [m for m in state.values() if m["model_name"] == "ImageModel"]
        pngs = []
        for k, model in enumerate(images):
            value = model["state"].get("value") or next(
                b["data"] for b in model.get("buffers", []) if b["path"] == ["value"])
            png = base64.b64decode(value if isinstance(value, str) else value["data"])
            (out_dir / f"widget_pane_{k}.png").write_bytes(png)
            pngs.append(png)
        print(f"  widget: {len(images)} pane images, "
              f"{', '.join(f'{len(p):,}' for p in pngs)} bytes")
        if pngs:
            _montage(pngs, out_dir / "widget_after_bits_change.png")
        (out_dir / "notebook_run.ipynb").write_text(nbformat.writes(nb), encoding="utf-8")
        print(f"  whole .ipynb {len(nbformat.writes(nb)):,} bytes")
        pid = next((int(ln.split()[1]) for o in nb.cells[-1].outputs
                    if o.output_type == "stream" for ln in o.text.splitlines()
                    if ln.startswith("AHEAD ")), 0)
        if pid:  # its cache goes with the temporary folder: let it end first
            print(f"  compile-ahead ran {_wait_for(pid):.0f} s after the notebook")


if __name__ == "__main__":
    main()
