"""The evaluations of a report are shared between the engine's threads in pieces: the pieces
cover every evaluation once, carry about equal work, and change no number."""

import numpy as np
import pytest

from quantscope.core import QuantParams
from quantscope.core.kernels.parallel import PIECES_PER_THREAD, THREADS
from quantscope.core.stats import sorted_stats
from quantscope.core.stats.prepared import prepare


def _rows(lengths):
    rng = np.random.default_rng(len(lengths))
    width = max(lengths)
    x = np.full((len(lengths), width), np.nan, np.float32)
    for i, n in enumerate(lengths):
        x[i, :n] = rng.standard_normal(n)
    return x


@pytest.mark.parametrize("lengths", [[4096] * 64, [30000, 10, 10, 5000, 4096, 100] * 6,
                                     [1] * 200_000, [70000] * 3])
def test_pieces_cover_every_evaluation_once_with_about_equal_work(lengths):
    rows = prepare(_rows(lengths) if max(lengths) > 1 else np.ones((len(lengths), 1),
                                                                    np.float32)).layout(0, None)
    row = np.arange(rows.n_rows)
    parts = sorted_stats._evaluation_shares(rows, row)
    assert parts[0][0] == 0 and parts[-1][1] == row.size
    assert all(a < b for a, b in parts)
    assert all(parts[i][1] == parts[i + 1][0] for i in range(len(parts) - 1))
    assert len(parts) <= max(1, THREADS * PIECES_PER_THREAD)
    work = np.minimum(rows.lengths[row], 1 << 14) + 64
    share = [int(work[a:b].sum()) for a, b in parts]
    if THREADS > 1 and work.sum() >= sorted_stats.PARALLEL_ELEMENTS // 8:
        assert len(parts) > THREADS or len(parts) == row.size  # pieces, not one per thread
        # each piece at most its fair part plus the one evaluation it could not split
        assert max(share) <= work.sum() / (THREADS * PIECES_PER_THREAD) + work.max()


def test_a_report_in_pieces_equals_the_report_in_one_range(monkeypatch):
    """Walked and searched rows, clipping on both sides: every statistic and the code counts
    to the bit, whether the evaluations run in pieces or as one range."""
    x = _rows([4096] * 40 + [30000] * 4 + [50] * 30)
    x[:, :3] *= 40.0
    prep = prepare(x)
    n = x.shape[0]
    scale = np.abs(np.nan_to_num(x)).max(axis=1).astype(np.float32) / np.float32(300.0)
    p = QuantParams(scale, np.arange(n, dtype=np.int32) % 7 - 3, -128, 127, axis=0)
    rows = prep.layout(0, None)
    assert len(sorted_stats._evaluation_shares(rows, np.arange(n))) > 1 or THREADS == 1
    pieces = prep.analyze(p)
    monkeypatch.setattr(sorted_stats, "_evaluation_shares", lambda rows, row: [(0, row.size)])
    whole = prep.analyze(p)
    assert pieces.clipped_below > 0 and pieces.clipped_above > 0
    np.testing.assert_array_equal(pieces.code_histogram, whole.code_histogram)
    for name in ("n", "mse", "rounding_mse", "clipping_mse", "max_abs_error", "clipped_below",
                 "clipped_above", "codes_used", "x_min", "x_max"):
        np.testing.assert_array_equal(getattr(pieces.per_channel, name),
                                      getattr(whole.per_channel, name), err_msg=name)
    assert pieces.summary() == whole.summary()
