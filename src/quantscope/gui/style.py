"""The window's own style sheet: white, calm, readable from the back of a room.

Kept minimal so the views engineer's theme (:mod:`quantscope.gui.theme`) can override it.
"""

STYLE = """
QMainWindow, QWidget { background: #ffffff; color: #1a1a1a; font-size: 11pt; }
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
"""
