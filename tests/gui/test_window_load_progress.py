"""Loading a tensor: every O(N) step runs in the worker, and the preparation reports a
percentage the window shows."""

import numpy as np

from quantscope.state import Source


def test_load_shows_the_preparation_percentage(make_window, qtbot, monkeypatch):
    import quantscope.state.explorer as state_module

    win = make_window()
    texts = []
    win.live.progress.connect(lambda kind, fraction, text: texts.append((kind, fraction, text)))

    def no_pass_on_the_gui_thread(x):
        raise AssertionError("set_tensor re-checked the tensor on the GUI thread")

    x = np.random.default_rng(0).standard_normal((300, 400)).astype(np.float16)
    win.load_from(Source("array", "half"), lambda: (x, "float16"))
    monkeypatch.setattr(state_module, "tensor_problem", no_pass_on_the_gui_thread)
    qtbot.waitUntil(lambda: win.state.tensor is not None and win.state.tensor.shape == x.shape,
                    timeout=30_000)
    qtbot.waitUntil(win.all_shown, timeout=30_000)
    assert win.state.tensor.dtype == np.float32
    np.testing.assert_array_equal(win.state.tensor, x.astype(np.float32))
    shown = [t for k, f, t in texts if k == "load" and f >= 0]
    assert any("preparing exact statistics" in t and "%" in t for t in shown), shown
    assert any(t.endswith("100%") for t in shown), shown
