"""A pane's histogram drawn with NumPy into a palette PNG: no Qt, no plotting library.

A notebook widget redraws on every change of a control, on a kernel that may be remote, so a
pane is an image of a few colours: an 8-bit palette PNG of a 560 x 200 pane is a few KB (the
same pixels as RGB take ~10x more), encodes in about a millisecond and travels fast. The
drawing is the window's: bars of log10(count + 1) binned on the pane's own code buckets
(:func:`quantscope.state.histogram.pane_histogram`), clipped values in red, the clip window's
edges, the zero point and, where they are at least a few pixels apart, the bucket boundaries.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

#: Palette entries (index -> RGB): what each colour marks.
BACKGROUND, BAR, CLIPPED, GRID, WINDOW, ZERO, AXIS, SHADE = range(8)
PALETTE = np.array([
    (255, 255, 255),  # background
    (52, 101, 164),  # bars inside the window
    (204, 0, 0),  # bars beyond it: the clipped values
    (222, 222, 222),  # rounding boundaries between codes
    (46, 52, 54),  # the clip window's edges
    (78, 154, 6),  # the zero point
    (136, 138, 133),  # the value axis
    (252, 233, 233),  # the clipped regions' background
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


def draw_pane(edges: np.ndarray, counts: np.ndarray, boundaries: np.ndarray,
              window: tuple[float, float], zero: float, view: tuple[float, float],
              size: tuple[int, int] = (560, 200)) -> np.ndarray:
    """Palette indices of one pane: the histogram ``(edges, counts)`` over ``view``.

    Each column shows the tallest bin that touches it (a one-bin spike never falls between
    two columns); heights are log10(count + 1), as the window draws them.
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
        bar_px = np.round(heights / top * (h - 6)).astype(np.int64)
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
    img[h - 1, :] = AXIS
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
