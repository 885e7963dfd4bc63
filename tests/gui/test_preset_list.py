"""The window's preset list: one entry per engine preset, each naming its runtime's version and
device (the tooltip, the engine's description, names the ops)."""

from __future__ import annotations

import re


def test_every_preset_is_listed_with_its_version_and_device():
    from quantscope.core.calibration.runtimes import PRESETS
    from quantscope.gui.controls import RUNTIME_LABELS
    from quantscope.state import RUNTIME_DESCRIPTIONS

    assert list(RUNTIME_LABELS) == [None, *PRESETS]
    assert set(RUNTIME_DESCRIPTIONS) == set(RUNTIME_LABELS)
    for runtime, label in RUNTIME_LABELS.items():
        if runtime is None:
            continue
        assert re.search(r"\d+\.\d+", label), label
        assert re.search(r"\d+\.\d+", PRESETS[runtime]), PRESETS[runtime]
        assert re.search(r"CPU|CUDA|GPU", PRESETS[runtime]), PRESETS[runtime]
