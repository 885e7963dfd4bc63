"""The explorer's state driven the way people drive it: random sequences of loads (samples,
generators, files of other shapes and roles) and control changes. After every step each
pane's numbers equal the engine's for the current tensor and the settings shown, worked out
here independently of the state's mapping (channel axis from the tensor's role, groups along
the input dimension, a manual window reset by a new tensor)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from quantscope.core import analyze, choose_qparams, params_from_range
from quantscope.errors import QuantscopeError
from quantscope.state import PANES, ExplorerState, Source, load_source, prepare_tensor

_RNG = np.random.default_rng(7)


def _array(name: str, shape: tuple[int, ...]) -> Source:
    return Source("array", name, shape=shape)


#: (source, role the test expects, how to build it). Arrays stand for files of other shapes.
SOURCES = [
    (Source("sample", "gelu_activations"), "activation"),
    (Source("sample", "query_weight"), "weight"),
    (Source("sample", "bf16_checkpoint",
            tensor="encoder.layer.0.attention.output.LayerNorm.weight"), "1-D"),
    (Source.generator("weights", (64, 96), 1), "weight"),
    (Source.generator("gelu", (48, 80), 2), "2-D"),
    (Source.generator("outliers", (40, 72), 3, count=3), "2-D"),
    (_array("stem.conv.weight", (16, 3, 5, 5)), "weight"),
    (_array("block_activations", (6, 10, 24)), "activation"),
    (_array("bias", (300,)), "1-D"),
]
ROLE_AXIS = {"weight": 0, "activation": -1, "2-D": 0, "1-D": 0}


def build(source: Source) -> np.ndarray:
    if source.kind == "array":
        x = _RNG.standard_normal(source.shape).astype(np.float32)
        x.flat[3] = 9.0
        return x
    x, _ = load_source(source)
    return x


def _runs_at(runtime: str, bits: int) -> bool:
    """Whether the preset quantizes to ``bits`` at all (ONNX Runtime: 4 or 8 bits)."""
    probe = np.array([-1.0, 2.0], np.float32)
    for sym in (True, False):
        try:
            choose_qparams(probe, symmetric=sym, bits=bits, runtime=runtime)
            return True
        except QuantscopeError:
            pass
    return False


def expected_params(x: np.ndarray, pane: str, s):
    """The engine call a pane must equal, from the definitions (not the state's code)."""
    sym = pane.startswith("symmetric")
    # these presets fix the code range by type, at the bit widths they run (the greyed
    # control shows theirs); at others a manual window is computed by the engine's rules
    narrow = None if s.runtime in ("onnxruntime", "tflite", "tflite-xnnpack") \
        and _runs_at(s.runtime, s.bits) else s.narrow_range
    common = dict(symmetric=sym, bits=s.bits, narrow_range=narrow)
    if pane.endswith("tensor"):
        gran, axis, group = "tensor", 0, None
    else:
        ax = s.axis % x.ndim
        if x.ndim == 1 and not s.group_size:
            return None  # no channels
        if s.group_size and x.ndim >= 3:
            return None  # refused
        if s.group_size:  # blocks along the input dimension
            gran, group = "group", s.group_size
            axis = 0 if x.ndim == 1 else (x.ndim - 1 if ax == x.ndim - 1 else 1)
        else:
            gran, axis, group = "channel", ax, None
    if s.method == "manual" and s.manual_clip is not None:
        lo, hi = s.manual_clip
        if sym:
            lo, hi = -max(abs(lo), abs(hi)), max(abs(lo), abs(hi))
        if gran == "tensor":
            return params_from_range(lo, hi, rounding=s.rounding, method="manual", **common)
        ref = choose_qparams(x, granularity=gran, axis=axis, group_size=group, **common)
        units = analyze(x, ref).per_channel
        shape = ref.scale.shape
        u_lo = np.where(units.n > 0, units.x_min, 0.0).reshape(shape)
        u_hi = np.where(units.n > 0, units.x_max, 0.0).reshape(shape)
        return params_from_range(np.maximum(u_lo, lo), np.minimum(u_hi, hi), axis=axis,
                                 group_size=group, rounding=s.rounding, method="manual",
                                 **common)
    method = "minmax" if s.method == "manual" else s.method
    options = {"percentile": s.percentile} if method == "percentile" else {}
    extra = {"runtime": s.runtime} if s.runtime else {"rounding": s.rounding}
    return choose_qparams(x, granularity=gran, axis=axis, group_size=group, method=method,
                          **common, **options, **extra)


def assert_same(got, want, where) -> None:
    g, w = got.summary(), want.summary()
    for k, v in w.items():
        if isinstance(v, float) and np.isfinite(v):
            assert abs(g[k] - v) <= 1e-9 * abs(v) + 1e-15, (where, k, g[k], v)
        else:
            assert g[k] == v, (where, k)
    np.testing.assert_array_equal(got.code_histogram, want.code_histogram)


class ExplorerMachine(RuleBasedStateMachine):
    """Loads and control changes in any order; the invariant checks every pane."""

    def __init__(self) -> None:
        super().__init__()
        self.state = ExplorerState()
        self.expected_role: str | None = None
        self.independent: dict = {}

    def _load(self, k: int) -> None:
        source, role = SOURCES[k]
        x = build(source)
        before = self.state.settings
        assert self.state.set_tensor(x, source, prepared=prepare_tensor(x))
        s = self.state.settings
        assert s.axis == ROLE_AXIS[role] and s.manual_clip is None
        # what does not depend on the tensor stays
        assert dataclasses.replace(s, axis=before.axis, manual_clip=before.manual_clip) == before
        self.expected_role = role

    @initialize(k=st.integers(0, len(SOURCES) - 1))
    def first(self, k: int) -> None:
        self._load(k)

    @rule(k=st.integers(0, len(SOURCES) - 1))
    def load(self, k: int) -> None:
        self._load(k)

    @rule(method=st.sampled_from(["minmax", "percentile", "mse", "entropy", "manual"]),
          percentile=st.sampled_from([90.0, 99.0, 99.99, 100.0]))
    def method(self, method: str, percentile: float) -> None:
        self.state.update_settings(method=method, percentile=percentile)

    @rule(a=st.floats(0.05, 1.0), b=st.floats(0.05, 1.0))
    def clip(self, a: float, b: float) -> None:
        ov_lo, ov_hi = float(np.min(self.state.tensor)), float(np.max(self.state.tensor))
        lo, hi = min(ov_lo, 0.0) * a, max(ov_hi, 0.0) * b
        if lo < hi:
            self.state.update_settings(method="manual", manual_clip=(lo, hi))

    @rule(rounding=st.sampled_from(["half_even", "half_away"]),
          narrow=st.sampled_from([None, True, False]), bits=st.integers(2, 8))
    def rules(self, rounding: str, narrow, bits: int) -> None:
        self.state.update_settings(rounding=rounding, narrow_range=narrow, bits=bits)

    @rule(runtime=st.sampled_from([None, None, "pytorch", "onnxruntime", "tflite",
                                   "tensorrt"]))
    def runtime(self, runtime) -> None:
        self.state.update_settings(runtime=runtime)

    @rule(group=st.sampled_from([None, None, 16, 32, 100]))
    def group(self, group) -> None:
        self.state.update_settings(group_size=group)

    @rule(axis=st.integers(-3, 3))
    def axis(self, axis: int) -> None:
        ndim = self.state.tensor.ndim
        before = self.state.settings.axis
        self.state.update_settings(axis=axis)
        assert self.state.settings.axis == (axis if -ndim <= axis < ndim else before)

    @rule(role=st.sampled_from([None, "weight", "activation"]))
    def role(self, role) -> None:
        self.state.set_role(role)
        if self.state.tensor.ndim > 1:
            want = {"weight": 0, "activation": -1}.get(role, ROLE_AXIS[self.expected_role])
            assert self.state.settings.axis == want

    @invariant()
    def every_pane_is_the_engines(self) -> None:
        st_ = self.state
        results = st_.compute()
        x, s = st_.tensor, st_.settings
        for pane in PANES:
            try:
                want = expected_params(x, pane, s)
                ref = None if want is None else analyze(x, want)
            except QuantscopeError as exc:  # the engine refuses it: so must the pane
                assert pane in st_.errors and str(exc) == st_.errors[pane], pane
                continue
            if ref is None:
                assert pane in st_.errors and pane not in results, pane
                continue
            assert pane in results, (pane, st_.errors.get(pane))
            assert_same(results[pane], ref, pane)
        notes = st_.applied()["notes"]
        assert bool(notes) == (s.method == "manual" and s.manual_clip is not None
                               and s.runtime is not None)


ExplorerMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=10, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
TestExplorerMachine = ExplorerMachine.TestCase
