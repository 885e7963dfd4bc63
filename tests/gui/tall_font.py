"""A font with tall lines, made on the spot from a font the machine has (no font file in the
repository, no font library): the window-size tests draw the window with it.

Fonts differ in how much height a line takes, not only in how wide their letters are: DejaVu
Sans gives a line 1.16 em, Noto Sans Mono 1.36 em, Droid Sans Fallback 1.31 em. A desktop that
picks such a font for its default or fixed-width face makes every label, number row, combo box
and tab taller (the window once could not be made shorter than 751 rows with Noto Sans Mono as
the fixed-width face). :func:`tall_font` copies a TrueType or OpenType file with its vertical
metrics raised (``hhea`` and the ``OS/2`` typographic and Windows ascent and descent, the
ones a text engine reads) and its family renamed, so it can be loaded beside the original
with ``QFontDatabase.addApplicationFontFromData`` and chosen by name. The glyphs are
untouched: the letters keep their size and width, each line is simply taller.
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
import subprocess

#: Where a machine keeps the fonts a tall copy is made from, DejaVu Sans first (any Debian or
#: Ubuntu desktop has it; fontconfig is asked only if it is elsewhere).
SOURCE_PATTERNS = ("/usr/share/fonts/**/DejaVuSans.ttf",
                   "/usr/local/share/fonts/**/DejaVuSans.ttf",
                   os.path.expanduser("~/.local/share/fonts/**/DejaVuSans.ttf"))
#: Name records that carry the family's name (family, full name, PostScript name, typographic
#: family): renamed, so the copy is a family of its own.
_FAMILY_NAME_IDS = (1, 3, 4, 6, 16)


def source_font() -> str:
    """The file of a sans face to raise: DejaVu Sans where it is, else fontconfig's sans-serif.
    A machine with neither cannot run these tests (a clear error, not a silent default)."""
    for pattern in SOURCE_PATTERNS:
        found = sorted(glob.glob(pattern, recursive=True))
        if found:
            return found[0]
    if shutil.which("fc-match"):
        path = subprocess.run(["fc-match", "-f", "%{file}", "sans-serif"], capture_output=True,
                              text=True, check=False).stdout.strip()
        if path.lower().endswith((".ttf", ".otf")) and os.path.isfile(path):
            return path
    raise FileNotFoundError("no DejaVu Sans (or other TrueType sans-serif font) on this machine "
                            "to make the tall test font from")


def _tables(data: bytes) -> dict[bytes, bytes]:
    count = struct.unpack_from(">H", data, 4)[0]
    tables = {}
    for i in range(count):
        tag, _checksum, offset, length = struct.unpack_from(">4sIII", data, 12 + 16 * i)
        tables[tag] = data[offset:offset + length]
    return tables


def _checksum(table: bytes) -> int:
    padded = table + b"\0" * (-len(table) % 4)
    return sum(struct.unpack(f">{len(padded) // 4}I", padded)) & 0xFFFFFFFF


def _pack(version: bytes, tables: dict[bytes, bytes]) -> bytes:
    """The sfnt file of ``tables``: directory sorted by tag, tables 4-byte aligned, each table's
    checksum and the head table's whole-file adjustment recomputed."""
    tags = sorted(tables)
    count = len(tags)
    power = 1 << (count.bit_length() - 1)
    header = version + struct.pack(">HHHH", count, power * 16, power.bit_length() - 1,
                                   count * 16 - power * 16)
    offset = len(header) + 16 * count
    directory, body = b"", b""
    head = bytearray(tables[b"head"])
    head[8:12] = b"\0\0\0\0"  # checkSumAdjustment is computed with itself zero
    tables = {**tables, b"head": bytes(head)}
    for tag in tags:
        table = tables[tag]
        directory += struct.pack(">4sIII", tag, _checksum(table), offset + len(body), len(table))
        body += table + b"\0" * (-len(table) % 4)
    data = bytearray(header + directory + body)
    head_at = struct.unpack_from(">I", directory, 16 * tags.index(b"head") + 8)[0]
    adjustment = (0xB1B0AFBA - _checksum(bytes(data))) & 0xFFFFFFFF
    struct.pack_into(">I", data, head_at + 8, adjustment)
    return bytes(data)


def _renamed(name: bytes, family: str) -> bytes:
    """The ``name`` table with every family-naming record saying ``family`` (Windows records
    in UTF-16, Macintosh ones in ASCII); other records kept as they are."""
    _format, count, storage = struct.unpack_from(">HHH", name, 0)
    records, strings = [], b""
    for i in range(count):
        platform, encoding, language, name_id, length, offset = struct.unpack_from(
            ">HHHHHH", name, 6 + 12 * i)
        text = name[storage + offset:storage + offset + length]
        if name_id in _FAMILY_NAME_IDS:
            plain = family.replace(" ", "") if name_id == 6 else family
            text = plain.encode("utf-16-be" if platform in (0, 3) else "ascii")
        records.append(struct.pack(">HHHHHH", platform, encoding, language, name_id,
                                   len(text), len(strings)))
        strings += text
    return struct.pack(">HHH", 0, count, 6 + 12 * count) + b"".join(records) + strings


def tall_font(family: str, line_em: float, source: str | None = None) -> bytes:
    """A copy of the font file ``source`` (default :func:`source_font`), named ``family``,
    whose lines are ``line_em`` em tall (ascent plus descent, no extra gap; the ascent and
    descent in the source's proportion): the bytes of a TrueType or OpenType file, for
    ``QFontDatabase.addApplicationFontFromData``."""
    with open(source or source_font(), "rb") as f:
        data = f.read()
    tables = _tables(data)
    units = struct.unpack_from(">H", tables[b"head"], 18)[0]
    hhea = bytearray(tables[b"hhea"])
    ascent, descent = struct.unpack_from(">hh", hhea, 4)  # descent is negative
    total = round(line_em * units)
    up = round(total * ascent / (ascent - descent))
    struct.pack_into(">hhh", hhea, 4, up, up - total, 0)
    os2 = bytearray(tables[b"OS/2"])
    struct.pack_into(">hhhHH", os2, 68, up, up - total, 0, up, total - up)
    tables.update({b"hhea": bytes(hhea), b"OS/2": bytes(os2),
                   b"name": _renamed(tables[b"name"], family)})
    return _pack(data[:4], tables)
