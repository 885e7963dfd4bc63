"""The Matmul lab view shows the engine's numbers, follows α and the threshold live, survives
bad files, and leaves no thread or timer behind.

Every expected value comes from an independent call of
:func:`quantscope.core.labs.outliers.quantized_matmul` on the bundled pair, never from the view's
own cache.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from quantscope.core.labs.outliers import quantized_matmul
from quantscope.gui.views.matmul import MatmulView
from quantscope.io import samples
from quantscope.state.matmul_lab import (
    HIST_BINS,
    REAL_A,
    REAL_W,
    LabRequest,
    Operand,
    display_text,
)

TIMEOUT = 30_000  # ms: generous on a loaded 2-core machine; waits end as soon as it is true


@pytest.fixture(scope="module")
def pair() -> tuple[np.ndarray, np.ndarray]:
    """The real pair as the engine takes it: A [197, 384], W = FFN weightᵀ [384, 1536]."""
    a = np.load(samples.sample_path("output_activations"), allow_pickle=False)
    w = np.load(samples.sample_path("ffn_weight"), allow_pickle=False)
    return a, np.ascontiguousarray(w.T)


@pytest.fixture
def view(qtbot):
    """A shown view with its first (default) result on screen; checks for leaks afterwards."""
    threads_before = {t.ident for t in threading.enumerate()}
    v = MatmulView()
    qtbot.addWidget(v)
    v.resize(1600, 1000)
    with qtbot.waitSignal(v.outcome_changed, timeout=TIMEOUT):
        v.show()
    yield v
    v.close()  # closeEvent: worker joined
    assert not v.job.busy
    # the engine's worker pool (quantscope.core.kernels.parallel) is made once and kept for the
    # process
    leaked = [t for t in threading.enumerate() if t.ident not in threads_before and t.is_alive()
              and not t.name.startswith("quantscope-engine")]
    assert leaked == []


def wait_for(qtbot, v: MatmulView, **fields) -> None:
    """Wait until the shown outcome's request has ``fields`` (e.g. alpha=0.3)."""
    def shown() -> bool:
        req = v.outcome.request if v.outcome is not None else None
        return req is not None and all(getattr(req, k) == pytest.approx(val)
                                       if isinstance(val, float) else getattr(req, k) == val
                                       for k, val in fields.items())
    qtbot.waitUntil(shown, timeout=TIMEOUT)


def assert_shows(v: MatmulView, expected, plain) -> None:
    """Every label, both plots and the outcome equal the engine's result."""
    out = v.outcome
    assert out.result.vs_float.sqnr_db == expected.vs_float.sqnr_db
    np.testing.assert_array_equal(out.result.vs_float.sqnr_db_per_channel,
                                  expected.vs_float.sqnr_db_per_channel)
    assert out.result.int8.accumulator_max == expected.int8.accumulator_max
    assert out.result.int8.max_safe_k == expected.int8.max_safe_k
    assert out.result.output_saturated == expected.output_saturated
    np.testing.assert_array_equal(out.result.outlier_columns, expected.outlier_columns)
    text = display_text(expected, plain, (197, 384), (384, 1536),
                        threshold=out.request.threshold)
    for key, label in v.values.items():
        assert label.text() == text[key], key
    for key, label in v.details.items():
        assert label.text() == text[key], key
    # the histogram: the engine's error arrays on bins spanning both results' max |error|
    reach = max(expected.vs_float.max_abs_error, plain.vs_float.max_abs_error)
    edges = np.linspace(-reach, reach, HIST_BINS + 1)
    for item, res in ((v.hist_now, expected), (v.hist_plain, plain)):
        x, shown = item.xData, item.yData  # as set (getData is log-transformed)
        np.testing.assert_allclose(x, (edges[:-1] + edges[1:]) / 2)
        np.testing.assert_array_equal(np.nan_to_num(shown),
                                      np.histogram(res.vs_float.error, bins=edges)[0])
    # the per-channel plot (default order: worst first)
    per = v.chan_now.yData
    np.testing.assert_array_equal(per, np.sort(expected.vs_float.sqnr_db_per_channel))


def test_defaults_are_the_engines(view):
    assert view.request() == LabRequest()
    assert view.outcome.request.a == REAL_A and view.outcome.request.w == REAL_W


def test_real_pair_shows_the_engine_numbers(view, pair):
    a, w = pair
    expected = quantized_matmul(a, w)
    assert_shows(view, expected, expected)
    assert view.values["sqnr"].text() == f"{expected.vs_float.sqnr_db:.2f} dB"
    assert view.shapes.text() == "A [197, 384] × W [384, 1536] → [197, 1536]"


def test_alpha_and_threshold_update_live(view, pair, qtbot):
    a, w = pair
    c = view.controls
    c.alpha.setValue(0.3)  # dragging the slider turns SmoothQuant on
    assert c.smooth_on.isChecked()
    wait_for(qtbot, view, alpha=0.3, threshold=None)
    alpha = view.outcome.request.alpha
    plain = quantized_matmul(a, w)
    assert_shows(view, quantized_matmul(a, w, alpha=alpha), plain)
    before = view.values["sqnr"].text()

    c.threshold.setValue(3.0)
    wait_for(qtbot, view, alpha=0.3, threshold=3.0)
    req = view.outcome.request
    expected = quantized_matmul(a, w, alpha=req.alpha, threshold=req.threshold)
    assert expected.outlier_columns.size > 0  # the case actually splits columns
    assert_shows(view, expected, plain)
    assert view.values["outliers"].text() == (
        f"{expected.outlier_columns.size} of 384 columns in float16")
    assert view.values["sqnr"].text() != before


def test_drag_burst_computes_only_the_last_value(view, qtbot):
    seen = []
    view.outcome_changed.connect(lambda o: seen.append(o.request.alpha))
    for value in (0.1, 0.2, 0.4, 0.6, 0.9):  # faster than the debounce: one request
        view.controls.alpha.setValue(value)
    wait_for(qtbot, view, alpha=0.9)
    assert seen == [pytest.approx(0.9)]


def test_requantization_choice_reaches_the_engine(view, pair, qtbot):
    a, w = pair
    view.controls.requant.setCurrentIndex(2)  # gemmlowp (double rounding)
    wait_for(qtbot, view, requantization="double")
    expected = quantized_matmul(a, w, requantization="double")
    assert_shows(view, expected, expected)


def test_bad_files_keep_the_previous_operands(view, qtbot, tmp_path):
    shown = view.values["sqnr"].text()
    cases = {
        "garbage.npy": (b"this is not a tensor file", ("A (activations)", "garbage.npy")),
        "cube.npy": (np.zeros((2, 3, 4), np.float32), ("A (activations)", "2-D", "(2, 3, 4)")),
        "wrong_k.npy": (np.ones((5, 100), np.float32), ("A is [5, 100]", "(K)")),
        "nan.npy": (np.full((3, 384), np.nan, np.float32), ("nan.npy", "1,152 NaN")),
    }
    for name, (content, words) in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            np.save(path, content)
        with qtbot.waitSignal(view.error_shown, timeout=TIMEOUT) as blocker:
            view.load_file("A", path)
        message = blocker.args[0]
        assert all(word in message for word in words), message
        assert view.message.isVisibleTo(view) and view.message.text() == message
        # the combo is back on the real A, the failed file is gone from it
        assert view.controls.spec("A") == REAL_A
        box = view.controls.sources["A"]
        assert all(not isinstance(box.itemData(i), Operand) or box.itemData(i).kind != "file"
                   for i in range(box.count()))
        qtbot.waitUntil(lambda: view.job.busy is False, timeout=TIMEOUT)
        assert view.outcome.request.a == REAL_A
        assert view.values["sqnr"].text() == shown


def test_good_file_and_generated_operands(view, pair, qtbot, tmp_path):
    a, w = pair
    path = tmp_path / "rows.npy"
    np.save(path, a[:50])
    view.load_file("A", path)
    wait_for(qtbot, view, a=Operand("file", str(path)))
    assert view.outcome.a_shape == (50, 384)
    expected = quantized_matmul(a[:50], w)
    assert view.outcome.result.vs_float.sqnr_db == expected.vs_float.sqnr_db
    assert not view.message.isVisibleTo(view)

    # a generated W adopts the fixed side's K; N comes from the spin box
    c = view.controls
    c.dims["N"].setValue(96)
    c.sources["W"].setCurrentIndex(c.sources["W"].findText("generated: Weight [out, in]"))
    qtbot.waitUntil(lambda: view.outcome.request.w.kind == "generator", timeout=TIMEOUT)
    assert view.outcome.w_shape == (384, 96)


def test_no_thread_or_timer_survives_a_close_mid_drag(qtbot):
    before = {t.ident for t in threading.enumerate()}
    v = MatmulView()
    qtbot.addWidget(v)
    with qtbot.waitSignal(v.outcome_changed, timeout=TIMEOUT):
        v.show()
    v.controls.alpha.setValue(0.7)
    v.controls.threshold.setValue(2.0)  # a job queued, maybe one running
    v.close()
    assert not v.job.busy
    # the engine's worker pool is made once, by whichever test first needs it, and kept for
    # the process (as conftest's window fixtures allow)
    assert [t for t in threading.enumerate() if t.ident not in before and t.is_alive()
            and not t.name.startswith("quantscope-engine")] == []
