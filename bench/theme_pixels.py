"""Does a restyle draw what it drew before? Pixels of the window, old source tree against new.

Each tree's child process builds the window as ``quantscope`` does (views installed), offscreen,
shows a 128x256 outlier tensor and walks light -> presentation -> dark presenting ->
presentation off (dark) -> light, at each size, grabbing the window and every view tab (each
brought forward) at each step. The parent compares the two trees' grabs pixel by pixel and
prints, per grab, the number of pixels that differ (0 everywhere: the change drew nothing
differently).

Run: ``python bench/theme_pixels.py --old-src /tmp/old/src [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: Run in the child: ``argv[1]`` the folder its PNGs go to; ``argv[2:]`` the sizes (WxH).
CHILD = r"""
import sys
from pathlib import Path
from PySide6.QtWidgets import QApplication

app = QApplication.instance() or QApplication(["pixels"])
from quantscope.gui import create_window
from quantscope.state import Source

out = Path(sys.argv[1])
window = create_window()
window.show()
window.load(Source.generator("outliers", (128, 256), 1))

def settle():
    for _ in range(5):
        app.processEvents()
    while not window.all_shown():
        app.processEvents()
    window.views_controller.settle()
    for _ in range(5):
        app.processEvents()

def grab(name):
    settle()
    window.grab().save(str(out / f"{name}_window.png"))
    shown = window.views.currentIndex()
    for i in range(window.views.count()):
        # each tab brought forward first: a tab may be built only when first shown, and
        # what it shows then is what a person sees
        window.views.setCurrentIndex(i)
        settle()
        window.views.widget(i).grab().save(str(out / f"{name}_tab{i}.png"))
    window.views.setCurrentIndex(shown)
    settle()

steps = (("light", lambda: None),
         ("presenting", lambda: window.presentation_action.setChecked(True)),
         ("presenting_dark", lambda: window.dark_action.setChecked(True)),
         ("dark", lambda: window.presentation_action.setChecked(False)),
         ("light_again", lambda: window.dark_action.setChecked(False)))
for size in sys.argv[2:]:
    w, h = map(int, size.split("x"))
    window.resize(w, h)
    for name, step in steps:
        step()
        grab(f"{size}_{name}")
window.shutdown()
window.close()
app.processEvents()
print("DONE", flush=True)
"""


def grab_all(src: Path, out: Path, sizes: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(src), QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", CHILD, str(out), *sizes], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    if "DONE" not in done.stdout:
        raise SystemExit(f"child on {src} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def differing(a: Path, b: Path) -> int | str:
    """Pixels that differ between two PNGs (or why they cannot be compared)."""
    import numpy as np
    from PySide6.QtGui import QImage

    images = [QImage(str(p)).convertToFormat(QImage.Format.Format_ARGB32) for p in (a, b)]
    if images[0].size() != images[1].size():
        return f"size {images[0].width()}x{images[0].height()} vs " \
               f"{images[1].width()}x{images[1].height()}"
    arrays = [np.frombuffer(im.constBits(), np.uint32, im.width() * im.height())
              for im in images]
    return int(np.count_nonzero(arrays[0] != arrays[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old-src", type=Path, required=True, help="the tree to compare with")
    parser.add_argument("--sizes", nargs="+", default=["1280x720", "1920x1080"])
    parser.add_argument("--keep", type=Path, help="keep the grabs here (old/ and new/)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        dirs = {"old": root / "old", "new": root / "new"}
        for name, src in (("old", args.old_src), ("new", SRC)):
            dirs[name].mkdir(parents=True, exist_ok=True)
            grab_all(src, dirs[name], args.sizes)
        names = sorted(p.name for p in dirs["old"].glob("*.png"))
        missing = sorted({p.name for p in dirs["new"].glob("*.png")} ^ set(names))
        worst = 0
        for name in names:
            if name in missing:
                continue
            diff = differing(dirs["old"] / name, dirs["new"] / name)
            print(f"{name:<45} {diff}")
            worst = max(worst, diff if isinstance(diff, int) else 1)
        print(f"{len(names)} grabs compared; missing on one side: {missing or 'none'}; "
              f"most differing pixels: {worst}")


if __name__ == "__main__":
    main()
