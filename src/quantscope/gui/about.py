"""Help ▸ About: what this quantscope is, what it runs on, and the licences of what it ships.

A bug report is only useful with the versions that computed the numbers, and a talk's slides
carry bundled tensors whose licence a speaker must be able to name: the dialog shows both,
and its text can be copied. Versions come from the installed distributions' metadata, so
opening the dialog imports nothing heavy (Numba, above all, is not imported for its number).
"""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from PySide6 import __version__ as pyside_version
from PySide6.QtCore import qVersion
from PySide6.QtWidgets import QMessageBox, QWidget

import quantscope

#: quantscope's own licence (pyproject.toml's ``license``).
LICENCE = "Apache-2.0"
#: The libraries whose versions decide the numbers or the drawing, in that order.
LIBRARIES = ("numpy", "numba", "llvmlite", "pyqtgraph")


def _notice_path() -> Path:
    return Path(quantscope.__file__).parent / "resources" / "samples" / "NOTICE.md"


def bundled_data_licences() -> str:
    """The bundled samples' notice (their source model and its licence), as shipped beside
    them; a line saying it is missing when an install dropped it."""
    try:
        return _notice_path().read_text(encoding="utf-8").strip()
    except OSError:
        return "(the bundled samples' NOTICE.md is missing from this install)"


def versions() -> dict[str, str]:
    """quantscope, the engine's libraries, Qt and Python, by name."""
    out = {"quantscope": quantscope.__version__}
    for dist in LIBRARIES:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    out["PySide6"] = pyside_version
    out["Qt"] = qVersion()
    out["Python"] = platform.python_version()
    return out


def about_text() -> str:
    """The dialog's plain text, a fact per line: versions, engine, licences."""
    v = versions()
    return "\n".join([
        f"quantscope {v['quantscope']} — see exactly what quantization does to a tensor",
        f"Licence: {LICENCE}",
        f"Engine: NumPy {v['numpy']}, Numba {v['numba']} (llvmlite {v['llvmlite']}); "
        "every number exact, none sampled",
        f"Window: PySide6 {v['PySide6']} on Qt {v['Qt']}, pyqtgraph {v['pyqtgraph']}",
        f"Python {v['Python']} on {platform.system()} {platform.machine()}",
        f"Bundled tensors: {notice_summary()}",
    ])


def notice_summary() -> str:
    """The bundled samples' source and its licence, from their notice's "Source model:"
    sentence up to the licence's closing parenthesis."""
    text = " ".join(bundled_data_licences().split())
    start = text.find("Source model:")
    if start < 0:
        return text[:120]
    rest = text[start + len("Source model:"):].strip()
    end = rest.find(")")
    return rest[:end + 1] if end >= 0 else rest[:120]


def show_about(parent: QWidget) -> QMessageBox:
    """Open the About box (window-modal, not blocking the caller); return it."""
    box = QMessageBox(parent)
    box.setObjectName("aboutBox")
    box.setWindowTitle("About quantscope")
    box.setIcon(QMessageBox.Icon.Information)
    box.setText(about_text())
    box.setStyleSheet("QLabel#qt_msgbox_label { min-width: 38em; }")  # a fact per line, not wrapped
    box.setDetailedText(bundled_data_licences())
    box.setStandardButtons(QMessageBox.StandardButton.Close)
    box.setAccessibleName("About quantscope")
    box.setAccessibleDescription("Version, engine and licences of quantscope and its data")
    box.open()
    return box
