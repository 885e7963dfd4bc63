"""compressed-tensors (llm-compressor) checkpoints, decoded as its compressors decompress them.

``quantization_config`` holds ``config_groups``, each with the ``weights`` arguments
(``num_bits``, ``type`` int / float, ``symmetric``, ``strategy`` tensor / channel / group /
block / tensor_group, ``group_size``, ``block_structure``) and a ``format`` (per group, or
one for the whole checkpoint):

* ``pack-quantized``: ``weight_packed`` (int32, dense packing, see
  :func:`~quantscope.io.stored.bits.unpack_dense`), ``weight_scale``, ``weight_shape``,
  and for asymmetric group / channel schemes ``weight_zero_point`` packed the same way down
  the output dimension; an activation-order checkpoint adds ``weight_g_idx``;
* ``int-quantized``, ``float-quantized``, ``naive-quantized``: ``weight`` stored as int8
  or FP8 E4M3 codes beside ``weight_scale`` (and ``weight_zero_point``);
* ``nvfp4-pack-quantized``: two E2M1 codes per byte (low nibble first), an E4M3 scale per
  16 elements and a float32 ``weight_global_scale`` the scale is divided by.

The checkpoint does not say which group a module belongs to except through ``targets``
(module classes or regular expressions); each distinct set of arguments is tried against the
stored shapes instead, so no pattern from the file is ever run.
"""

from __future__ import annotations

import json

import numpy as np

from quantscope.io.checks import fail
from quantscope.io.stored.bits import dense_words, nibbles, unpack_dense
from quantscope.io.stored.config import QuantConfig, get_bool, get_int, get_str
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.stored.parts import (
    Parts,
    check_elements,
    check_group_index,
    code_window,
    expand_groups,
    scaled,
)

FORMATS = ("pack-quantized", "int-quantized", "float-quantized", "naive-quantized",
           "nvfp4-pack-quantized")
STRATEGIES = ("tensor", "channel", "group", "block", "tensor_group")
#: E2M1 magnitudes by the low three bits of a code (the fourth is the sign).
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


class _Misfit(Exception):
    """A candidate scheme does not fit a module's stored shapes (another one may)."""


def schemes(config: QuantConfig) -> list[tuple[str, dict]]:
    """Each distinct (format, weights arguments) of the config, validated."""
    settings = config.settings
    groups = settings.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise fail(config.source, "quantization_config has no config_groups")
    default = settings.get("format")
    found: list[tuple[str, dict]] = []
    for key, group in list(groups.items())[:1000]:
        if not isinstance(group, dict):
            raise fail(config.source, f"config_groups {str(key)[:40]!r} is not an object")
        weights = group.get("weights")
        if weights is None:
            continue  # an activation-only group stores no weight differently
        if not isinstance(weights, dict):
            raise fail(config.source, f"config_groups {str(key)[:40]!r} weights is not an "
                                      "object")
        fmt = group.get("format") or default
        fmt = get_str(config, {"format": fmt}, "format", FORMATS)
        args = _weight_args(config, weights)
        if (fmt, args) not in found:
            found.append((fmt, args))
    if not found:
        raise fail(config.source, "quantization_config quantizes no weights")
    return found


def _weight_args(config: QuantConfig, weights: dict) -> dict:
    args = {
        "num_bits": get_int(config, weights, "num_bits", lo=1, hi=8),
        "type": get_str(config, weights, "type", ("int", "float"), "int"),
        "symmetric": get_bool(config, weights, "symmetric", True),
        "strategy": get_str(config, weights, "strategy", STRATEGIES, "tensor"),
    }
    if args["strategy"] in ("group", "tensor_group"):
        args["group_size"] = get_int(config, weights, "group_size", lo=1, hi=1 << 20)
    if args["strategy"] == "block":
        block = weights.get("block_structure")
        if not (isinstance(block, list) and len(block) == 2 and all(
                isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 1 << 20
                for b in block)):
            raise fail(config.source, "quantization_config block_structure is "
                                      f"{json.dumps(block)[:40]}; expected [rows, columns]")
        args["block"] = (block[0], block[1])
    return args


def decode(name: str, parts: Parts, config: QuantConfig) -> StoredTensor:
    """Decode one module's weight (see the module docstring)."""
    candidates = schemes(config)
    first_problem: Exception | None = None
    for fmt, args in candidates:
        try:
            return _decode(name, parts, fmt, args)
        except _Misfit as exc:
            first_problem = first_problem or exc.args[0]
    assert first_problem is not None
    raise first_problem


def _decode(name: str, parts: Parts, fmt: str, args: dict) -> StoredTensor:
    if fmt == "nvfp4-pack-quantized":
        return _nvfp4(name, parts, args)
    if fmt == "pack-quantized":
        return _packed(name, parts, args)
    return _unpacked(name, parts, fmt, args)


def _fits(parts: Parts, role: str, shape: tuple[int, ...]) -> None:
    """Check a part's shape; a mismatch lets the next candidate scheme try."""
    if not parts.has(role):
        raise _Misfit(parts.missing(role, "compressed-tensors"))
    found = parts.shape(role)
    if found != shape and not (_numel(found) == _numel(shape) == 1):
        raise _Misfit(parts.error(role, f"has shape {list(found)} but the quantization "
                                        f"config implies {list(shape)}"))


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _scale_shape(args: dict, rows: int, cols: int) -> tuple[int, ...]:
    strategy = args["strategy"]
    if strategy == "tensor":
        return (1,)
    if strategy == "channel":
        return (rows, 1)
    if strategy == "block":
        bh, bw = args["block"]
        return (-(-rows // bh), -(-cols // bw))
    return (rows, -(-cols // args["group_size"]))


def _spread(args: dict, values: np.ndarray, rows: int, cols: int,
            g_idx: np.ndarray | None) -> np.ndarray:
    """A scale or zero point in its stored layout, spread over the (rows, cols) weight."""
    strategy = args["strategy"]
    if strategy == "tensor":
        return values.reshape(1, 1)
    if strategy == "channel":
        return values.reshape(rows, 1)
    if strategy == "block":
        bh, bw = args["block"]
        return np.repeat(np.repeat(values, bh, axis=0), bw, axis=1)[:rows, :cols]
    return expand_groups(values, cols, g_idx, args["group_size"])


def _label_format(args: dict, element: str, scale_dtype: str) -> StoredFormat:
    strategy = args["strategy"]
    return StoredFormat(
        method="compressed-tensors", element=element,
        granularity="group" if strategy in ("group", "tensor_group") else strategy,
        group_size=args.get("group_size"), block=args.get("block"),
        symmetric=args["symmetric"], scale_dtype=scale_dtype)


def _weight_shape(parts: Parts) -> tuple[int, int]:
    if not parts.has("weight_shape"):
        raise _Misfit(parts.missing("weight_shape", "pack-quantized"))
    shape = parts.read("weight_shape", "iu")
    if shape.shape != (2,) or shape.min() < 1 or shape.max() > 1 << 31:
        raise parts.error("weight_shape", f"holds {json.dumps(shape.tolist()[:4])}; expected "
                                          "two positive dimensions (out, in)")
    return int(shape[0]), int(shape[1])


def _packed(name: str, parts: Parts, args: dict) -> StoredTensor:
    bits = args["num_bits"]
    if args["type"] != "int":
        raise _Misfit(parts.error("weight_packed", "pack-quantized stores integers, but "
                                                   "the config says type float"))
    rows, cols = _weight_shape(parts)
    if args["strategy"] in ("group", "tensor_group") and cols % args["group_size"]:
        raise _Misfit(parts.error("weight_shape", f"has {cols} input columns, not a multiple "
                                                  f"of group_size {args['group_size']}"))
    _fits(parts, "weight_packed", (rows, dense_words(bits, cols)))
    scale_shape = _scale_shape(args, rows, cols)
    _fits(parts, "weight_scale", scale_shape)
    packed_zp = not args["symmetric"] and args["strategy"] in ("group", "channel")
    if not args["symmetric"]:
        _fits(parts, "weight_zero_point", (dense_words(bits, rows), scale_shape[1])
              if packed_zp else scale_shape)
    check_elements(parts, "weight_packed", (rows, cols))
    offset = 1 << (bits - 1)
    codes = unpack_dense(parts.read("weight_packed", "i", dtypes=("int32",)), bits, cols)
    codes -= offset
    scale = parts.read("weight_scale", "f")
    scale_dtype = parts.dtype("weight_scale")
    zp = None
    if not args["symmetric"]:
        if packed_zp:
            zp_words = parts.read("weight_zero_point", "i", dtypes=("int32",))
            zp = unpack_dense(np.ascontiguousarray(zp_words.T), bits, rows).T - offset
        else:
            zp = parts.read("weight_zero_point", "iuf").astype(np.int32)
    g_idx = _group_index(parts, args, cols, scale_shape)
    steps = codes.astype(np.int32)
    if zp is not None:
        steps = steps - _spread(args, zp.astype(np.int32), rows, cols, g_idx)
    values = scaled(_in_dtype(steps, scale_dtype), _spread(args, scale, rows, cols, g_idx),
                    scale_dtype)
    fmt = _label_format(args, f"int{bits}", scale_dtype)

    def window():
        zero = 0 if zp is None else _spread(args, zp.astype(np.float32), rows, cols, g_idx)
        return code_window(-offset, offset - 1, zero, _spread(args, scale, rows, cols, g_idx),
                           scale_dtype)
    return StoredTensor(name, values, fmt, codes.astype(np.int8), scale.astype(np.float32),
                        None if zp is None else zp.astype(np.int32),
                        parts.nbytes(), scale_dtype, window)


def _in_dtype(steps: np.ndarray, dtype: str) -> np.ndarray:
    """``q - zp`` as torch computes it, in the scale's dtype (exact for any code range
    except a half-precision scale with asymmetric 8-bit codes beyond 256 or 2048)."""
    from quantscope.io.dtypes import dtype_from_name

    return steps.astype(dtype_from_name(dtype)).astype(np.float32)


def _group_index(parts: Parts, args: dict, cols: int,
                 scale_shape: tuple[int, ...]) -> np.ndarray | None:
    if not parts.has("weight_g_idx"):
        return None
    g_idx = parts.read("weight_g_idx", "iu", shape=(cols,))
    if args["strategy"] not in ("group", "tensor_group"):
        raise parts.error("weight_g_idx", f"is stored, but strategy {args['strategy']!r} "
                                          "has no groups")
    return check_group_index(parts, "weight_g_idx", g_idx, scale_shape[1])


def _unpacked(name: str, parts: Parts, fmt: str, args: dict) -> StoredTensor:
    if not parts.has("weight"):
        raise _Misfit(parts.missing("weight", fmt))
    shape = parts.shape("weight")
    if len(shape) != 2:
        raise parts.error("weight", f"has {len(shape)} dimensions; quantized weights are "
                                    "stored as (out, in) matrices")
    rows, cols = shape
    stored = parts.dtype("weight")
    if args["type"] == "float":
        if args["num_bits"] != 8 or stored != "float8_e4m3fn":
            raise _Misfit(parts.error("weight", f"is {stored}; the config's float"
                                                f"{args['num_bits']} scheme stores "
                                                "float8_e4m3fn"))
    elif stored not in ("int8", "uint8", "int16", "int32"):
        raise _Misfit(parts.error("weight", f"is {stored}; the config's int"
                                            f"{args['num_bits']} scheme stores integers"))
    scale_shape = _scale_shape(args, rows, cols)
    _fits(parts, "weight_scale", scale_shape)
    if not args["symmetric"]:
        _fits(parts, "weight_zero_point", scale_shape)
    check_elements(parts, "weight", shape)
    raw = parts.read("weight", "iuf")
    scale = parts.read("weight_scale", "f")
    scale_dtype = parts.dtype("weight_scale")
    g_idx = _group_index(parts, args, cols, scale_shape)
    codes: np.ndarray
    steps: np.ndarray
    if args["type"] == "float":
        codes = raw.view(np.uint8)
        steps = raw.astype(np.float32)
        element = "fp8_e4m3"
        lo, hi = -448.0, 448.0
    else:
        codes = raw.astype(np.int32)
        steps = codes
        element = f"int{args['num_bits']}"
        lo, hi = -(1 << (args["num_bits"] - 1)), (1 << (args["num_bits"] - 1)) - 1
    if steps.size and (np.nanmin(steps) < lo or np.nanmax(steps) > hi):
        raise parts.error("weight", f"holds codes outside {element}'s range [{lo:g}, {hi:g}]")
    zp = None
    if not args["symmetric"]:
        zp = parts.read("weight_zero_point", "iuf").astype(np.float32)
        steps = steps.astype(np.float32) - _spread(args, zp, rows, cols, g_idx)
    values = scaled(_in_dtype(steps, scale_dtype) if args["type"] == "int" or zp is not None
                    else steps, _spread(args, scale, rows, cols, g_idx), scale_dtype)
    fmt_ = _label_format(args, element, scale_dtype)

    def window():
        zero = 0 if zp is None else _spread(args, zp, rows, cols, g_idx)
        return code_window(lo, hi, zero, _spread(args, scale, rows, cols, g_idx), scale_dtype)
    return StoredTensor(name, values, fmt_, codes, scale.astype(np.float32),
                        None if zp is None else zp.astype(np.int32), parts.nbytes(),
                        scale_dtype, window)


def _nvfp4(name: str, parts: Parts, args: dict) -> StoredTensor:
    if args["num_bits"] != 4 or args["type"] != "float":
        raise _Misfit(parts.error("weight_packed", "nvfp4-pack-quantized stores 4-bit floats, "
                                                   "but the config says otherwise"))
    if not parts.has("weight_packed"):
        raise _Misfit(parts.missing("weight_packed", "nvfp4-pack-quantized"))
    shape = parts.shape("weight_packed")
    if len(shape) != 2:
        raise parts.error("weight_packed", "is not a matrix")
    rows, cols = shape[0], shape[1] * 2
    group = args.get("group_size", 16)
    if cols % group:
        raise parts.error("weight_packed", f"unpacks to {cols} columns, not a multiple of "
                                           f"group_size {group}")
    _fits(parts, "weight_scale", (rows, cols // group))
    _fits(parts, "weight_global_scale", (1,))
    check_elements(parts, "weight_packed", (rows, cols))
    codes = nibbles(parts.read("weight_packed", "u", dtypes=("uint8",)),
                    low_first=True).reshape(rows, cols)
    elements: np.ndarray = E2M1[codes & 7] * np.where(codes & 8, np.float32(-1),
                                                      np.float32(1))
    scale = parts.read("weight_scale", "f")
    scale_dtype = parts.dtype("weight_scale")
    global_scale = parts.floats("weight_global_scale").reshape(())
    block_scale = np.divide(scale.astype(np.float32), global_scale, dtype=np.float32)
    values = scaled(elements, expand_groups(block_scale, cols, None, group), "bfloat16")
    fmt = StoredFormat("compressed-tensors", "fp4_e2m1", "group", group_size=group,
                       scale_dtype=scale_dtype, notes=("float32 global scale",))
    return StoredTensor(name, values, fmt, codes, scale.astype(np.float32), None,
                        parts.nbytes(), "bfloat16", lambda: code_window(
                            -6.0, 6.0, 0, expand_groups(block_scale, cols, None, group),
                            "bfloat16"))
