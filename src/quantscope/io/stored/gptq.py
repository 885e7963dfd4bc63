"""GPTQ and AWQ checkpoints: ``qweight``, ``qzeros``, ``scales`` (and GPTQ's ``g_idx``).

Both store a linear layer's weight transposed, as (in, out), with integer codes packed
``32 // bits`` to an int32 (see :mod:`quantscope.io.stored.bits` for the two orders), one
fp16 scale and one packed zero point per group of ``group_size`` input rows and output column,
and decode ``scale * (code - zero)``, in fp16:

* GPTQ packs ``qweight`` down the input rows and ``qzeros`` along its columns. Checkpoints in
  the original format (``checkpoint_format`` ``gptq``, the default) store each zero point
  less one and every loader adds the one back (after masking: a stored zero of 0 wrapped to
  15 and decodes as 16, as in those runtimes); ``gptq_v2`` stores it as is. ``g_idx`` maps
  each input row to its group (activation order); without it, row ``i`` is in group
  ``i // group_size``. ``group_size`` -1 means one group (per channel).
* AWQ (GEMM kernels, ``version`` ``gemm``) packs both along the output columns in the order
  [0, 2, 4, 6, 1, 3, 5, 7], and stores zero points as they are.
"""

from __future__ import annotations

import numpy as np

from quantscope.io.checks import fail
from quantscope.io.stored.bits import awq_reorder, unpack_along
from quantscope.io.stored.config import QuantConfig, get_bool, get_int, get_str
from quantscope.io.stored.model import StoredFormat, StoredTensor
from quantscope.io.stored.parts import (
    Parts,
    check_elements,
    check_group_index,
    code_window,
    scaled,
)


def _settings(config: QuantConfig) -> tuple[int, int | None]:
    s = config.settings
    bits_key = "w_bit" if "w_bit" in s and "bits" not in s else "bits"
    group_key = "q_group_size" if "q_group_size" in s and "group_size" not in s else "group_size"
    bits = get_int(config, s, bits_key, lo=2, hi=8)
    if bits not in (2, 4, 8):
        raise fail(config.source, f"quantization_config {bits_key} is {bits}: only 2-, 4- and "
                                  "8-bit codes pack whole into an int32 word, and the 3-bit "
                                  "packing across words is not decoded here")
    group = get_int(config, s, group_key, lo=1, hi=1 << 20, default=-1, allow=(-1,))
    return bits, None if group == -1 else group


def decode(name: str, parts: Parts, config: QuantConfig) -> StoredTensor:
    bits, group = _settings(config)
    awq = config.method == "awq"
    if awq:
        version = get_str(config, config.settings, "version", ("gemm", "gemv", "gemv_fast",
                                                              "marlin", "exllama", "ipex"),
                          "gemm")
        if version != "gemm":
            raise fail(config.source, f"AWQ version {version!r} packs for its own kernel; "
                                      "only the GEMM layout (the default) is decoded")
        symmetric = not get_bool(config, config.settings, "zero_point", True)
        if symmetric:
            raise fail(config.source, "AWQ without zero points (zero_point false) is not "
                                      "decoded: every AWQ GEMM checkpoint stores qzeros")
    else:
        symmetric = get_bool(config, config.settings, "sym", True)
        v1 = get_str(config, config.settings, "checkpoint_format", ("gptq", "gptq_v2"),
                     "gptq") == "gptq"
    for role in ("qweight", "qzeros", "scales"):
        if not parts.has(role):
            raise parts.missing(role, config.method)
    per = 32 // bits
    scale_shape = parts.shape("scales")
    if len(scale_shape) != 2:
        raise parts.error("scales", "is not a (groups, out) matrix")
    groups, cols = scale_shape
    q_shape = parts.shape("qweight")
    rows = q_shape[0] if awq else q_shape[0] * per
    expect_q = (rows, cols // per) if awq else (rows // per, cols)
    if cols % per or len(q_shape) != 2 or tuple(q_shape) != expect_q:
        raise parts.error("qweight", f"has shape {list(q_shape)}, which does not pack "
                                     f"{bits}-bit codes for the {cols} output columns of "
                                     f"'scales' ({'along columns' if awq else 'down rows'})")
    size = rows if group is None else group
    if -(-rows // size) != groups:
        raise parts.error("scales", f"holds {groups} groups, but the {rows} input rows that "
                                    f"{bits}-bit codes in 'qweight' make, in groups of {size}, "
                                    f"are {-(-rows // size)} groups")
    check_elements(parts, "qweight", (rows, cols))
    scale = parts.read("scales", "f")
    scale_dtype = parts.dtype("scales")
    words = parts.read("qweight", "i", dtypes=("int32",))
    zwords = parts.read("qzeros", "i", shape=(groups, cols // per), dtypes=("int32",))
    if awq:
        codes = awq_reorder(unpack_along(words, bits, axis=1))
        zeros = awq_reorder(unpack_along(zwords, bits, axis=1)).astype(np.int32)
    else:
        codes = unpack_along(words, bits, axis=0)
        zeros = unpack_along(zwords, bits, axis=1).astype(np.int32) + (1 if v1 else 0)
    if not awq and parts.has("g_idx"):
        g_idx = check_group_index(parts, "g_idx", parts.read("g_idx", "iu", shape=(rows,)),
                                  groups)
    else:
        g_idx = np.arange(rows) // size
    steps = codes.astype(np.int32) - zeros[g_idx]
    values = scaled(steps, scale[g_idx], scale_dtype).T.copy()  # stored (in, out): to (out, in)
    fmt = StoredFormat(config.method, f"uint{bits}",
                       "channel" if group is None else "group", group_size=group,
                       symmetric=symmetric if not awq else False, scale_dtype=scale_dtype,
                       notes=(("zero points stored less one",) if not awq and v1 else ()))
    def window():
        lo, hi = code_window(0, (1 << bits) - 1, zeros[g_idx], scale[g_idx], scale_dtype)
        return lo.T, hi.T
    return StoredTensor(name, values, fmt, codes.T.astype(np.uint8), scale.astype(np.float32),
                        zeros, parts.nbytes(), scale_dtype, window)
