"""The window's own style sheet: white, calm, readable from the back of a room.

Kept minimal so the views engineer's theme (:mod:`quantscope.gui.theme`) can override it. No
rule targets every ``QWidget``: a blanket background rule breaks widgets that paint themselves
from the style (superqt's range slider loses its groove); the white background comes from the
palette (:func:`light_palette`) instead.
"""

from PySide6.QtGui import QColor, QFont, QPalette


def light_palette(base: QPalette) -> QPalette:
    """White windows and bases, near-black text: the projector-friendly default."""
    pal = QPalette(base)
    for role, color in ((QPalette.ColorRole.Window, "#ffffff"),
                        (QPalette.ColorRole.Base, "#ffffff"),
                        (QPalette.ColorRole.AlternateBase, "#f4f6f9"),
                        (QPalette.ColorRole.WindowText, "#1a1a1a"),
                        (QPalette.ColorRole.Text, "#1a1a1a"),
                        (QPalette.ColorRole.Button, "#f4f6f9"),
                        (QPalette.ColorRole.ButtonText, "#1a1a1a")):
        pal.setColor(role, QColor(color))
    return pal


def base_font(base: QFont) -> QFont:
    """The window's font at 11 pt (readable from the back of a room)."""
    font = QFont(base)
    font.setPointSize(11)
    return font

STYLE = """
QMainWindow { background: #ffffff; }
QFrame#pane { border: 1px solid #d5d9e0; border-radius: 6px; background: #ffffff; }
QLabel#paneTitle { font-size: 14pt; font-weight: 600; color: #14213d; padding: 2px 2px; }
QLabel#paneCaption { color: #3d4a5c; font-style: italic; }
QLabel#paneError { color: #b00020; }
QLabel#fieldName { color: #555b66; }
QLabel#hint { color: #555b66; font-size: 10pt; }
QLabel#banner { background: #fde8e8; color: #8a1010; border: 1px solid #f5b5b5;
                border-radius: 4px; padding: 6px 10px; font-weight: 600; }
QGroupBox { font-weight: 600; border: 1px solid #d5d9e0; border-radius: 6px;
            margin-top: 10px; padding-top: 6px; }
QGroupBox::title { subcontrol-origin: margin; left: 8px; padding: 0 4px; }
QTableWidget { border: none; }
QTabBar::tab { padding: 6px 14px; }
QStatusBar { border-top: 1px solid #d5d9e0; }
QLabel#computing { color: #8a5a00; font-style: italic; }
"""
