"""The compiled quantize loop written as vectors of 16 float32 lanes in LLVM IR.

Numba's loop over :func:`quantscope.core.kernels.sorted_kernel.code_of` vectorised 8 lanes at a
time and
spent most of its time on the division (or float64 sum), a NaN test, the clamp and the
narrowing: at 16M elements
on one core it ran 1.27 times as long as ``torch.quantize_per_tensor``. Here each line of 16
elements is loaded once and its codes stored as 16 bytes; the non-finite test ORs the bits of
``x − x`` (zero for every finite float32, a NaN's bits otherwise) into one vector.

Exactness. :meth:`_Line.full` is ``code_of``'s operations in the same order on the same types
(IEEE float32 with no fast-math flags, so the compiler may neither reassociate nor fold
``x − x``), clamped and NaN sent to the zero point as the scalar loop does. The lines form
their codes from one fused product instead (:meth:`_Line.fused`) and take the full rule for
any line with a lane where the two could differ: near a rounding boundary
(:data:`NEAR_BOUNDARY`) or not finite. The tests compare the loops
with the scalar rule on ties, on values one ulp beside them and on random bit patterns.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from quantscope.core.kernels.sorted_kernel import prefetch_at

#: float32 lanes per line: one 64-byte cache line.
LANES = 16
#: Elements ahead of the line being quantized whose line is prefetched (8 KB): the hardware's
#: own prefetching left both cores waiting on memory (16M elements on two threads: 1.09-1.13
#: times ``torch.quantize_per_tensor``'s time without, 0.93-1.01 with; a prefetch never faults,
#: also past the end of the array).
PREFETCH_AHEAD = 2048

_F32 = ir.FloatType()
_F64 = ir.DoubleType()
_I32 = ir.IntType(32)
_VF = ir.VectorType(_F32, LANES)
_VD = ir.VectorType(_F64, LANES)
_VI = ir.VectorType(_I32, LANES)
_V8 = ir.VectorType(ir.IntType(8), LANES)


def _splat(builder: ir.IRBuilder, value: Any, vector: ir.VectorType) -> Any:
    first = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(first, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(_VI, [0] * LANES))


def _call(builder: ir.IRBuilder, name: str, result: Any, *args: Any) -> Any:
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(result, [a.type for a in args]), name)
    return builder.call(fn, list(args))


def _rounded(builder: ir.IRBuilder, v: Any, half_away: bool) -> Any:
    """``code_of``'s rounding of each lane: ``rint`` (ties to even), or ties away from zero as
    ``t = trunc(v); t ± 1 if |v − t| ≥ 0.5``."""
    if not half_away:
        return _call(builder, "llvm.rint.v16f32", _VF, v)
    t = _call(builder, "llvm.trunc.v16f32", _VF, v)
    frac = _call(builder, "llvm.fabs.v16f32", _VF, builder.fsub(v, t))
    up = builder.fcmp_ordered(">=", frac, _splat(builder, ir.Constant(_F32, 0.5), _VF))
    step = builder.select(builder.fcmp_ordered(">", v, ir.Constant(_VF, [0.0] * LANES)),
                          _splat(builder, ir.Constant(_F32, 1.0), _VF),
                          _splat(builder, ir.Constant(_F32, -1.0), _VF))
    return builder.select(up, builder.fadd(t, step), t)


#: Within this distance of a rounding boundary ``k + 1/2``, ``w = fma(x, inv, z)`` may lie on
#: the other side of it from an arithmetic's own value plus the zero point. Where
#: ``|x / s| ≤ 512``: the divide's ``float32(x / s)`` against ``x · float32(1/s)`` (a normal
#: float32), one rounding each, differ by at most ``2⁻²³ · 512 = 2⁻¹⁴``; a float32 product or
#: sum below 1024 is off by at most ``2⁻¹⁵``, so ``w`` and any rule's value differ by at most
#: ``2⁻¹⁴ + 2⁻¹⁵ < 2⁻¹³``. Values beyond ±512 saturate either way (a zero point lies within 255
#: of every code).
NEAR_BOUNDARY = 2.0**-13


def _codes(builder: ir.IRBuilder, x: Any, s: Any, inv: Any, z: Any, arithmetic: int,
           half_away: bool) -> Any:
    """``code_of`` of each lane (unclamped float32 codes)."""
    if arithmetic == 0:
        v = _rounded(builder, builder.fdiv(x, s), half_away)
    elif arithmetic == 1:
        v = _rounded(builder, builder.fmul(x, inv), half_away)
    elif arithmetic == 2:  # x · inv is exact in float64; one rounding of the sum, then float32
        wide = builder.fadd(builder.fmul(builder.fpext(x, _VD), builder.fpext(inv, _VD)),
                            builder.fpext(z, _VD))
        v = _rounded(builder, builder.fptrunc(wide, _VF), half_away)
    else:
        v = _rounded(builder, builder.fadd(builder.fmul(x, inv), z), half_away)
    return builder.fadd(v, z) if arithmetic < 2 else v


class _Line:
    """One line's operands: the splatted parameters, the running non-finite bits."""

    def __init__(self, builder: ir.IRBuilder, args: Any, rule: tuple[int, bool]) -> None:
        self.s, self.inv, self.z, self.lo, self.hi, self.near = (
            _splat(builder, a, _VF) for a in args)
        self.lo_int = builder.fptosi(self.lo, _VI)
        self.hi_int = builder.fptosi(self.hi, _VI)
        self.rule = rule
        self.bits = cgutils.alloca_once_value(builder, ir.Constant(_VI, [0] * LANES))

    def store(self, builder: ir.IRBuilder, v: Any, dst: Any) -> None:
        """Narrow the float32 codes ``v`` (in ``[qmin, qmax]``) to 8 bits into ``dst``."""
        builder.store(builder.trunc(builder.fptosi(v, _VI), _V8),
                      builder.bitcast(dst, _V8.as_pointer()), align=1)

    def full(self, builder: ir.IRBuilder, x: Any, dst: Any) -> None:
        """The scalar loop's rule lane by lane: code, clamp (inf saturates), NaN to the zero
        point, and the bits of ``x − x`` into :attr:`bits`."""
        v = _codes(builder, x, self.s, self.inv, self.z, *self.rule)
        c = builder.select(builder.fcmp_ordered("<", v, self.lo), self.lo, v)
        c = builder.select(builder.fcmp_ordered(">", c, self.hi), self.hi, c)
        self.store(builder, builder.select(builder.fcmp_unordered("uno", v, v), self.z, c), dst)
        builder.store(builder.or_(builder.load(self.bits),
                                  builder.bitcast(builder.fsub(x, x), _VI)), self.bits)

    def fused(self, builder: ir.IRBuilder, x: Any, dst: Any) -> None:
        """The codes from ``w = fma(x, inv, z)``, and :meth:`full` for a line where some lane's
        ``w`` lies within ``near`` of a rounding boundary -- where ``w`` and the rule's own
        value could round apart -- or is NaN, ±inf or beyond int32.

        Every arithmetic's value before rounding (plus the zero point) lies within
        :data:`NEAR_BOUNDARY` of ``w``, so away from the boundaries ``w`` rounds to the rule's
        code: one fused product instead of a division (or a float64 sum), rounded and
        converted by one instruction; the rounding rule only matters at a boundary, in
        :meth:`full`. As every NaN or ±inf element takes the full rule, the non-finite bits
        come from it alone. ``near`` is :data:`NEAR_BOUNDARY`, or +inf (every line takes the
        full rule) for a divide whose ``inv = float32(1/s)`` is not a normal float32.
        """
        w = _call(builder, "llvm.fma.v16f32", _VF, x, self.inv, self.z)
        code = _call(builder, "llvm.lrint.v16i32.v16f32", _VI, w)  # out of int32: any value
        rest = _call(builder, "llvm.fabs.v16f32", _VF, builder.fsub(w, builder.sitofp(code, _VF)))
        half = _splat(builder, ir.Constant(_F32, 0.5), _VF)
        near = builder.fcmp_unordered(">=", rest, builder.fsub(half, self.near))
        with builder.if_else(_call(builder, "llvm.vector.reduce.or.v16i1", ir.IntType(1), near),
                             likely=False) as (on_boundary, away):
            with on_boundary:
                self.full(builder, x, dst)
            with away:
                code = builder.select(builder.icmp_signed("<", code, self.lo_int), self.lo_int,
                                      code)
                code = builder.select(builder.icmp_signed(">", code, self.hi_int), self.hi_int,
                                      code)
                builder.store(builder.trunc(code, _V8),
                              builder.bitcast(dst, _V8.as_pointer()), align=1)


#: The rules a call can ask for: (arithmetic code, ties away from zero).
RULES = [(arithmetic, half_away) for arithmetic in range(4) for half_away in (False, True)]


def _lines(context, builder, signature, args, rule: tuple[int, bool]) -> Any:
    """The loop over the lines under one rule; returns the OR of the non-finite bits."""
    xa = context.make_array(signature.args[0])(context, builder, args[0])
    oa = context.make_array(signature.args[1])(context, builder, args[1])
    line = _Line(builder, args[4:10], rule)
    with cgutils.for_range(builder, args[3]) as loop:
        i = builder.add(args[2], builder.mul(loop.index, ir.Constant(loop.index.type, LANES)))
        x_line = builder.load(builder.bitcast(builder.gep(xa.data, [i]), _VF.as_pointer()),
                              align=4)
        prefetch_at(builder, builder.gep(xa.data, [builder.add(i, ir.Constant(i.type,
                                                                          PREFETCH_AHEAD))]))
        line.fused(builder, x_line, builder.gep(oa.data, [i]))
    return _call(builder, "llvm.vector.reduce.or.v16i32", _I32, builder.load(line.bits))


@intrinsic
def quantize_lines(typingctx, x, out, lo, lines, s, inv, z, qmin, qmax, near, arithmetic,
                   half_away):
    """Codes of ``x[lo:lo + 16·lines]`` into ``out`` at the same positions, as
    :func:`quantscope.core.kernels.direct_kernel.quantize_range`'s scalar loop forms them
    (``code_of``,
    clamped to ``[qmin, qmax]``, NaN to the zero point ``z``); returns the OR of the bits of
    every ``x − x``, non-zero when some element is NaN or ±inf. ``s``, ``inv``, ``z``, ``qmin``,
    ``qmax`` and ``near`` (see :meth:`_Line.fused`) are float32. Each rule (``arithmetic``,
    ``half_away``) has a loop of its own, with no branch on the rule inside; the call jumps to
    the one asked for."""
    if not (isinstance(arithmetic, types.Integer) and isinstance(half_away, types.Boolean)
            and isinstance(x, types.Array) and x.dtype == types.float32 and x.layout == "C"
            and isinstance(out, types.Array) and out.dtype in (types.int8, types.uint8)
            and out.layout == "C"):
        return None
    sig = types.uint32(x, out, lo, lines, s, inv, z, qmin, qmax, near, arithmetic, half_away)

    def codegen(context, builder, signature, args):
        bits = cgutils.alloca_once(builder, _I32)
        key = builder.add(builder.mul(builder.zext(args[10], ir.IntType(64)),
                                      ir.Constant(ir.IntType(64), 2)),
                          builder.zext(args[11], ir.IntType(64)))
        done = builder.append_basic_block("quantize_lines.done")
        last = builder.append_basic_block("quantize_lines.rule_last")
        switch = builder.switch(key, last)  # the arithmetic codes are 0 to 3
        for k, rule in enumerate(RULES):
            block = last if k == len(RULES) - 1 else builder.append_basic_block(
                f"quantize_lines.rule{k}")
            switch.add_case(ir.Constant(ir.IntType(64), k), block)
            builder.position_at_end(block)
            builder.store(_lines(context, builder, signature, args, rule), bits)
            builder.branch(done)
        builder.position_at_end(done)
        return builder.load(bits)

    return sig, codegen
