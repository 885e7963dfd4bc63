"""The font sets the window-size tests draw with, standing for the fonts of other machines.

- "default": whatever this machine's default face is (DejaVu Sans here, lines 1.16 em).
- "wide serif": DejaVu Serif drawn 12 % wider (letter spacing), wider than any common sans
  face: the widths of the controls, keys and tables.
- "tall lines": DejaVu Sans with its lines raised to :data:`TALL_LINE_EM` em, the line of
  Noto Sans CJK (the default face of Chinese and Japanese desktops; Noto Sans Mono's is 1.36
  em): the heights of every label, combo box and row of numbers. Made on the spot from the
  machine's DejaVu Sans (:mod:`tall_font`) and loaded as an application font.
"""

from __future__ import annotations

import functools

from PySide6.QtGui import QFont, QFontDatabase
from tall_font import tall_font

FONT_SETS = ("default", "wide serif", "tall lines")
#: Ascent plus descent of the "tall lines" face, in ems.
TALL_LINE_EM = 1.45
TALL_FAMILY = "Tall Lines Sans"


@functools.cache
def tall_family() -> str:
    """Load the "tall lines" face into the application's font database (once); its family."""
    font_id = QFontDatabase.addApplicationFontFromData(tall_font(TALL_FAMILY, TALL_LINE_EM))
    families = QFontDatabase.applicationFontFamilies(font_id)
    assert families == [TALL_FAMILY], f"the tall test font did not load: {families}"
    return TALL_FAMILY


def font_set(name: str, base: QFont) -> QFont:
    """``base`` as the font set ``name`` draws it."""
    font = QFont(base)
    if name == "wide serif":
        font.setFamily("DejaVu Serif")
        font.setLetterSpacing(QFont.SpacingType.PercentageSpacing, 112.0)
    elif name == "tall lines":
        font.setFamily(tall_family())
    elif name != "default":
        raise ValueError(f"no font set {name!r}")
    return font
