"""A pane's histogram drawn with NumPy into a palette PNG: no Qt, no plotting library.

A notebook widget redraws on every change of a control, on a kernel that may be remote, so a
pane is an image of a few colours: an 8-bit palette PNG of a 560 x 200 pane is a few KB (the
same pixels as RGB take ~10x more), encodes in about a millisecond and travels fast. The
drawing is the window's: bars of log10(count + 1) binned on the pane's own code buckets
(:func:`quantscope.state.histogram.pane_histogram`), clipped values in red, the clip window's
edges, the zero point and, where they are at least a few pixels apart, the bucket boundaries;
around it the value axis and the count axis with their tick labels, and a title saying what is
drawn (:mod:`quantscope.notebook.font` draws the text), so a pane saved on its own still reads.
"""

from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from quantscope.notebook.font import draw_text, fit_text, text_width

#: Palette entries (index -> RGB): what each colour marks.
BACKGROUND, BAR, CLIPPED, GRID, WINDOW, ZERO, AXIS, SHADE, TEXT = range(9)
PALETTE = np.array([
    (255, 255, 255),  # background
    (52, 101, 164),  # bars inside the window
    (204, 0, 0),  # bars beyond it: the clipped values
    (222, 222, 222),  # rounding boundaries between codes
    (46, 52, 54),  # the clip window's edges
    (78, 154, 6),  # the zero point
    (136, 138, 133),  # the value axis
    (252, 233, 233),  # the clipped regions' background
    (32, 32, 32),  # titles and tick labels
], dtype=np.uint8)
#: Closest boundaries still drawn, in pixels: denser ones would grey the whole pane.
MIN_GRID_PX = 4


def encode_png(index: np.ndarray, palette: np.ndarray = PALETTE, level: int = 1) -> bytes:
    """An 8-bit palette PNG of ``index`` (rows x columns of palette indices); ``level`` is
    zlib's (1: fast, for redraws; 9: small, for files kept)."""
    h, w = index.shape
    raw = np.zeros((h, w + 1), np.uint8)  # filter byte 0 (none) before every row
    raw[:, 1:] = index

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"PLTE", palette.astype(np.uint8).tobytes())
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), level)) + chunk(b"IEND", b""))


def decode_png(data: bytes) -> np.ndarray:
    """The palette indices of a PNG :func:`encode_png` wrote (tests read images back)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, width, height, idat = 8, 0, 0, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, width + 1)
    return raw[:, 1:].copy()


def view_range(data_range: tuple[float, float], window: tuple[float, float]
               ) -> tuple[float, float]:
    """The value axis a pane shows: the data and the clip window, with 3 % margins."""
    lo = min(data_range[0], window[0])
    hi = max(data_range[1], window[1])
    if not hi > lo:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.03 * (hi - lo)
    return lo - pad, hi + pad


def draw_plot(edges: np.ndarray, counts: np.ndarray, boundaries: np.ndarray,
              window: tuple[float, float], zero: float, view: tuple[float, float],
              size: tuple[int, int]) -> tuple[np.ndarray, float]:
    """Palette indices of a pane's plot area (``size`` pixels, no axes), and the log10
    height of its tallest column (the count axis's top): the histogram ``(edges, counts)``
    over ``view``.

    Each column shows the tallest bin that touches it (a one-bin spike never falls between
    two columns); heights are log10(count + 1), as the window draws them, the tallest
    :data:`HEADROOM` pixels below the top.
    """
    w, h = size
    lo, hi = view
    img = np.full((h, w), BACKGROUND, np.uint8)
    to_px = w / (hi - lo)
    col_lo = int(np.clip(np.floor((window[0] - lo) * to_px), 0, w))
    col_hi = int(np.clip(np.ceil((window[1] - lo) * to_px), 0, w))
    img[:, :col_lo] = SHADE
    img[:, col_hi:] = SHADE
    b = np.asarray(boundaries, np.float64)
    if b.size > 1:
        px = np.round((b - lo) * to_px).astype(np.int64)
        if float(np.median(np.diff(px))) >= MIN_GRID_PX:
            img[:, px[(px >= 0) & (px < w)]] = GRID
    heights = np.zeros(w, np.float64)
    e = np.asarray(edges, np.float64)
    c = np.log10(np.asarray(counts, np.float64) + 1.0)
    if c.size:
        first = np.clip(np.floor((e[:-1] - lo) * to_px), 0, w - 1).astype(np.int64)
        last = np.clip(np.ceil((e[1:] - lo) * to_px) - 1, 0, w - 1).astype(np.int64)
        last = np.maximum(last, first)
        np.maximum.at(heights, first, c)  # narrow bins: the tallest that starts in a column
        centres = lo + (np.arange(w) + 0.5) / to_px  # wide bins: every column they cover
        k = np.searchsorted(e, centres, side="right") - 1
        inside = (k >= 0) & (k < c.size)
        heights[inside] = np.maximum(heights[inside], c[k[inside]])
    top = float(heights.max()) if heights.size else 0.0
    if top > 0:
        bar_px = np.round(heights / top * (h - HEADROOM)).astype(np.int64)
        rows = np.arange(h)[:, None]
        filled = rows >= (h - 1 - bar_px)[None, :]
        filled &= bar_px[None, :] > 0
        colour = np.full(w, BAR, np.uint8)
        colour[:col_lo] = CLIPPED
        colour[col_hi:] = CLIPPED
        img = np.where(filled, colour[None, :], img)
    z = round((zero - lo) * to_px)
    if 0 <= z < w:
        img[::4, z] = ZERO
        img[1::4, z] = ZERO
    for col in (col_lo, col_hi - 1):
        if 0 <= col < w:
            img[:, col] = WINDOW
    return img, top



#: Pixels kept free above the tallest bar.
HEADROOM = 6
#: Text size (font pixels are this many image pixels): 10 x 16 per character.
TEXT_SIZE = 2
#: Margins of the plot area inside a pane: left (count labels), top (title), right, bottom
#: (value labels).
MARGINS = (58, 26, 14, 30)
#: Tick length in pixels.
TICK = 5
#: Suffixes of the count axis's labels by power of 1000.
_SI = ("", "k", "M", "G", "T")


def nice_step(span: float, most: int) -> float:
    """The smallest step of 1, 2 or 5 times a power of ten that cuts ``span`` into at most
    ``most`` parts."""
    raw = span / max(most, 1)
    if not raw > 0 or not math.isfinite(raw):
        return 1.0
    power = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * power >= raw * (1 - 1e-9):
            return m * power
    return 10.0 * power


def tick_label(value: float, step: float) -> str:
    """``value`` with as many decimals as ``step`` needs (``-0`` read as ``0``), in
    scientific notation when plain digits would run long (below 1e-3 or at 1e6 and
    beyond)."""
    if abs(value) < step * 1e-6:
        value = 0.0
    if step < 1e-3 or max(abs(value), step) >= 1e6:
        mantissa, exponent = f"{value:.1e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{value:.{decimals}f}"


def value_ticks(view: tuple[float, float], width: int, size: int = TEXT_SIZE
                ) -> list[tuple[float, str]]:
    """Ticks of the value axis over ``view`` on ``width`` pixels: nice steps, as many as fit
    with their labels a character apart."""
    lo, hi = view
    most = max(2, width // 60)
    while True:
        step = nice_step(hi - lo, most)
        first = math.ceil(lo / step - 1e-9)
        values = [k * step for k in range(first, math.floor(hi / step + 1e-9) + 1)]
        labels = [tick_label(v, step) for v in values]
        room = width / max((hi - lo) / step, 1e-300)
        widest = max((text_width(s, size) for s in labels), default=0)
        if most <= 2 or room >= widest + 6 * size:
            return list(zip(values, labels, strict=True))
        most -= 1


def count_label(count: int) -> str:
    """``1``, ``10``, ``100``, ``1k`` ... ``10M``: a power of ten with an SI suffix."""
    k = 0
    while count >= 1000 and k < len(_SI) - 1:
        count //= 1000
        k += 1
    return f"{count}{_SI[k]}"


def count_ticks(top: float, height: int, size: int = TEXT_SIZE) -> list[tuple[int, int]]:
    """``(count, pixels above the axis)`` of the count axis's ticks: 0 and the powers of ten
    up to the tallest bar (heights are log10(count + 1), ``top`` the tallest's), those closer
    than a line of text to the one below left out."""
    if not top > 0:
        return [(0, 0)]
    out = [(0, 0)]
    scale = (height - HEADROOM) / top
    p = 0
    while 10 ** p <= 10 ** top:
        c = 10 ** p
        y = round(math.log10(c + 1) * scale)
        if y - out[-1][1] >= 8 * size + 2 and y <= height - 1:
            out.append((c, y))
        p += 1
    return out


def draw_pane(edges: np.ndarray, counts: np.ndarray, boundaries: np.ndarray,
              window: tuple[float, float], zero: float, view: tuple[float, float],
              size: tuple[int, int] = (640, 280), title: str = "") -> np.ndarray:
    """Palette indices of one pane: :func:`draw_plot` framed by its axes and ``title``.

    The value axis (bottom) has nice ticks labelled in the tensor's units; the count axis
    (left) ticks 0 and the powers of ten its log scale passes, labelled ``1``, ``10``,
    ``1k``...; the title is cut with an ellipsis when the pane is too narrow for it.
    """
    w, h = size
    left, top_m, right, bottom = MARGINS
    pw, ph = w - left - right, h - top_m - bottom
    img = np.full((h, w), BACKGROUND, np.uint8)
    plot, top = draw_plot(edges, counts, boundaries, window, zero, view, (pw, ph))
    img[top_m:top_m + ph, left:left + pw] = plot
    base = top_m + ph  # the row below the plot: the value axis
    img[base, left - 1:left + pw] = AXIS
    img[top_m:base + 1, left - 1] = AXIS
    s = TEXT_SIZE
    lo, hi = view
    for value, label in value_ticks(view, pw, s):
        x = left + round((value - lo) / (hi - lo) * pw)
        if not left <= x < left + pw:
            continue
        img[base + 1:base + 1 + TICK, x] = AXIS
        tx = min(max(x - text_width(label, s) // 2, 0), w - text_width(label, s))
        draw_text(img, tx, base + TICK + 3, label, TEXT, s)
    for count, y_up in count_ticks(top, ph, s):
        y = base - y_up
        img[y, left - 1 - TICK:left - 1] = AXIS
        label = count_label(count)
        ty = min(max(y - 4 * s, top_m - 2), base - 4 * s)
        draw_text(img, left - TICK - 4 - text_width(label, s), ty, label, TEXT, s)
    if title:
        draw_text(img, 4, 4, fit_text(title, w - 8, s), TEXT, s)
    return img


def quantize_colours(rgb: np.ndarray, colours: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """``(index, palette)`` of an ``H x W x 3`` uint8 image: its ``colours`` most frequent
    colours kept exactly, every other pixel given the nearest of them. A rendered figure is
    flat fills, lines and text, whose antialiased edges are the only rare colours, so the
    fills and lines stay exact and only a few edge pixels move."""
    flat = rgb.reshape(-1, 3).astype(np.uint32)
    packed = (flat[:, 0] << 16) | (flat[:, 1] << 8) | flat[:, 2]
    values, inverse, counts = np.unique(packed, return_inverse=True, return_counts=True)
    keep = np.sort(np.argsort(counts, kind="stable")[::-1][:colours])
    cols = np.stack([(values >> 16) & 255, (values >> 8) & 255, values & 255], axis=1
                    ).astype(np.int32)
    palette = cols[keep]
    nearest = np.empty(values.size, np.int64)
    for start in range(0, values.size, 4096):  # distances in chunks: colours x 256 each
        d = ((cols[start:start + 4096, None, :] - palette[None, :, :]) ** 2).sum(-1)
        nearest[start:start + 4096] = d.argmin(axis=1)
    index = nearest[inverse.reshape(-1)].astype(np.uint8).reshape(rgb.shape[:2])
    return index, palette.astype(np.uint8)
