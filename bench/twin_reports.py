"""How fast do the NumPy twins (a first run's stand-ins for the compiled loops) report? 64
asymmetric reports of the demo tensor (MiniLM GELU activations, prepared) at 64 clip windows,
as the trade-off curve asks for them, with ``loop_twins`` installed; CPU and wall seconds.

``--old-src PATH`` runs another build's ``src`` too (``git archive main src | tar -x -C
/tmp/old``), each build in its own interpreter, in interleaved pairs, with the ratio.

    PYTHONPATH=src python bench/twin_reports.py [--old-src /tmp/old/src] [--pairs 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import time
import numpy as np
from quantscope.core.stats import loop_twins
loop_twins.install()
from quantscope.core import params_from_range
from quantscope.core.stats.prepared import prepare
from quantscope.io.samples import sample_path
from quantscope.state.compute import analyze_with
x = np.load(sample_path("gelu_activations"))
prep = prepare(x)
lo, hi = float(x.min()), float(x.max())
ps = [params_from_range(lo * f, hi * f, symmetric=False) for f in np.linspace(0.05, 1, 64)]
analyze_with(x, prep, ps[0])
c, w = time.process_time(), time.perf_counter()
for p in ps:
    analyze_with(x, prep, p)
print(time.process_time() - c, time.perf_counter() - w)
"""


def one(src: Path) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(src)})
    cpu, wall = (float(v) for v in out.stdout.split())
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-src", type=Path, help="another build's src, run interleaved")
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    print(f"64 twin reports of the demo tensor, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")
    for i in range(args.pairs):
        cpu, wall = one(SRC)
        line = f"pair {i + 1}: this build {cpu:.2f} CPU s, {wall:.2f} s wall"
        if args.old_src is not None:
            old_cpu, old_wall = one(args.old_src)
            line += (f"; old {old_cpu:.2f} CPU s, {old_wall:.2f} s wall; CPU ratio old/new "
                     f"{old_cpu / cpu:.1f}")
        print(line)


if __name__ == "__main__":
    main()
