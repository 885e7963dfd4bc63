"""The stateful machine of ``tests/test_state_machine.py`` through the real window (smaller
budget): loads and changes made with the controls, and after each step every pane's labels
equal the engine's numbers for the tensor and the settings the controls *show*."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from quantscope.core import analyze
from quantscope.errors import QuantscopeError
from quantscope.gui.controls import NARROW_LABELS
from quantscope.gui.numbers import display_values
from quantscope.state import PANES, Settings, Source

SOURCES = [
    Source("sample", "gelu_activations"),
    Source("sample", "query_weight"),
    Source.generator("weights", (64, 96), 1),
    Source.generator("relu", (32, 200), 2),
    Source("sample", "bf16_checkpoint",
           tensor="encoder.layer.0.attention.output.LayerNorm.bias"),
]


DEFAULTS = Settings()


def _combo(box, value) -> None:
    i = box.findData(value)
    if i >= 0 and box.isEnabled():
        box.setCurrentIndex(i)
        box.activated.emit(i)


def settings_shown(c, state) -> Settings:
    """The settings as the controls display them (a greyed preset value is the preset's)."""
    narrow = c.narrow.currentData()
    manual = c.method.currentData() == "manual" and state.settings.manual_clip is not None
    clip = (c.clip_lo.value(), c.clip_hi.value())
    if manual:  # the fields show the window to their 4 decimals: the state's, if it is that
        texts = (c.clip_lo.text(), c.clip_hi.text())
        if texts == (c.clip_lo.textFromValue(state.settings.manual_clip[0]),
                     c.clip_hi.textFromValue(state.settings.manual_clip[1])):
            clip = state.settings.manual_clip
    return Settings(
        method=c.method.currentData(), percentile=c.percentile.value(),
        manual_clip=clip if manual else None,
        rounding=(c.rounding.currentData() if c.rounding.isEnabled()
                  else state.settings.rounding),
        narrow_range=narrow if narrow in NARROW_LABELS else state.settings.narrow_range,
        bits=c.bits_label.value(), axis=c.axis.value(), group_size=c.group.value() or None,
        runtime=c.runtime.currentData())


def _expected_params():
    """The independent expectation of the Qt-free machine (one definition for both)."""
    path = Path(__file__).parents[1] / "test_state_machine.py"
    spec = importlib.util.spec_from_file_location("_state_machine_defs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.expected_params


def test_the_window_shows_the_engines_numbers_after_any_sequence(make_window, qtbot):
    expected_params = _expected_params()

    win = make_window()
    c = win.controls

    def settle() -> None:
        qtbot.waitUntil(lambda: win.all_shown(), timeout=60_000)

    class WindowMachine(RuleBasedStateMachine):
        @initialize(k=st.integers(0, len(SOURCES) - 1))
        def first(self, k: int) -> None:
            # every example starts from the same window: hypothesis replays a failing one
            # to shrink it, and what an earlier example left behind would change the replay
            win.state.set_role(None)
            win.state.update_settings(**{f.name: getattr(DEFAULTS, f.name)
                                         for f in dataclasses.fields(DEFAULTS)
                                         if f.name != "axis"})
            self.load(k)

        @rule(k=st.integers(0, len(SOURCES) - 1))
        def load(self, k: int) -> None:
            win.load(SOURCES[k])
            qtbot.waitUntil(lambda: win.state.source == SOURCES[k] and win.all_shown(),
                            timeout=60_000)

        @rule(method=st.sampled_from(["minmax", "percentile", "mse", "manual"]))
        def method(self, method: str) -> None:
            _combo(c.method, method)

        @rule(p=st.sampled_from([99.0, 99.9, 99.99]))
        def percentile(self, p: float) -> None:
            c.percentile.setValue(p)

        @rule(lo=st.floats(0.1, 0.9), hi=st.floats(0.1, 0.9))
        def clip_typed(self, lo: float, hi: float) -> None:
            ov = win.state.overview
            c.clip_lo.setValue(round(min(ov.min, 0.0) * lo, 4) - 0.0001)
            c.clip_hi.setValue(round(max(ov.max, 0.0) * hi, 4))

        @rule(bits=st.integers(2, 8))
        def bits(self, bits: int) -> None:
            c.bits_label.setValue(bits)

        @rule(rounding=st.sampled_from(["half_even", "half_away"]),
              narrow=st.sampled_from(list(NARROW_LABELS)))
        def rules(self, rounding: str, narrow) -> None:
            _combo(c.rounding, rounding)
            _combo(c.narrow, narrow)

        @rule(runtime=st.sampled_from([None, "pytorch", "onnxruntime", "tflite"]))
        def runtime(self, runtime) -> None:
            _combo(c.runtime, runtime)

        @rule(group=st.sampled_from([0, 32, 50]))
        def group(self, group: int) -> None:
            c.group.setValue(group)

        @rule(role=st.sampled_from([None, "weight", "activation"]))
        def role(self, role) -> None:
            _combo(c.role, role)

        @invariant()
        def panes_show_the_engine(self) -> None:
            settle()
            st_ = win.state
            shown = settings_shown(c, st_)
            used = st_.settings
            if used.method != "manual":  # a remembered window the panes do not use
                used = dataclasses.replace(used, manual_clip=None)
            assert shown == used
            x = st_.tensor
            for pane in PANES:
                try:
                    want = expected_params(x, pane, shown)
                except QuantscopeError:
                    want = None
                if want is None:
                    assert win.panes[pane].report is None and win.panes[pane].error.text()
                    continue
                assert win.panes[pane].displayed() == display_values(analyze(x, want)), pane

    run_state_machine_as_test(WindowMachine, settings=settings(
        max_examples=4, stateful_step_count=8, deadline=None,
        suppress_health_check=list(HealthCheck)))
