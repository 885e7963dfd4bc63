"""The user's own objects raising or lying, and tensors that are not what their shape says:
each entry point (engine, ``prepare``, ``view`` / ``figure``'s input reader) gives one typed
quantscope error naming the object and what is wrong, or the exact result -- never a raw
Python error, a hang, a memory blowup, or a number computed on something else than what was
passed (a masked array's hidden values, float64 values turned into inf)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hostile_support import bounded, record, run_isolated

import quantscope as qs
from quantscope.core.tensors.validate import EngineTypeError, EngineValueError
from quantscope.errors import UserError
from quantscope.inputs import resolve_source


class GarbageDLPack:
    def __dlpack__(self, **kw):
        return "not a capsule"

    def __dlpack_device__(self):
        return (1, 0)


class RaisingDLPack:
    def __dlpack__(self, **kw):
        raise ZeroDivisionError("boom")

    def __dlpack_device__(self):
        return (1, 0)


class EndlessLiar:
    """Says it has 3 items, answers every index: NumPy alone would iterate forever."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return 1.0


class NegativeLength:
    def __len__(self):
        return -1

    def __getitem__(self, i):
        return 1.0


class RaisingLength:
    def __len__(self):
        raise KeyError("length")

    def __getitem__(self, i):
        return 1.0


class RaisingItem:
    def __len__(self):
        return 2

    def __getitem__(self, i):
        raise RuntimeError("no item for you")


#: (name, object, error type, words the message must hold)
CORPUS = [
    ("garbage __dlpack__", GarbageDLPack(), EngineTypeError,
     ("GarbageDLPack", "DLPack")),
    ("raising __dlpack__", RaisingDLPack(), EngineTypeError,
     ("RaisingDLPack", "ZeroDivisionError: boom")),
    ("lying __len__", EndlessLiar(), EngineTypeError,
     ("EndlessLiar", "says its length is 3 but holds more")),
    ("negative __len__", NegativeLength(), EngineTypeError, ("NegativeLength",)),
    ("raising __len__", RaisingLength(), EngineTypeError, ("RaisingLength", "KeyError")),
    ("raising __getitem__", RaisingItem(), EngineTypeError,
     ("RaisingItem", "RuntimeError: no item for you")),
    ("masked values", np.ma.masked_array(np.arange(10, dtype=np.float32),
                                          mask=[True] + [False] * 9), EngineTypeError,
     ("masked array with 1 masked value(s) of 10", "x.compressed()")),
    ("float64 beyond float32", np.array([[1.0, 2.0], [3.0, -1e300]]), EngineValueError,
     ("1 float64 value(s) beyond float32's range", "index (1, 1)", "-1e+300")),
    ("broadcast 1-D", np.broadcast_to(np.float32(1.5), (10**9,)), EngineValueError,
     ("expanded view", "holding 4 bytes", "1,000,000,000 elements", "3.7 GiB")),
    ("broadcast 2-D", np.broadcast_to(np.ones(1024, np.float32), (1 << 20, 1024)),
     EngineValueError, ("axes [0]", "holding 4.0 KiB", "4.0 GiB as float32")),
]

ENTRY_POINTS = {
    "choose_qparams": lambda x: qs.choose_qparams(x),
    "analyze": lambda x: qs.analyze(x, qs.choose_qparams(np.ones(4, np.float32))),
    "prepare": lambda x: qs.prepare(x),
    "view's reader": lambda x: resolve_source(x),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize(("name", "obj", "error", "words"), CORPUS,
                         ids=[c[0] for c in CORPUS])
def test_objects_that_lie_get_one_quantscope_error(entry, name, obj, error, words):
    with bounded(seconds=5.0), warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(error) as info:
            ENTRY_POINTS[entry](obj)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, message
    record(refused=True)


def test_masked_array_without_masked_values_is_its_data():
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    m = np.ma.masked_array(x, mask=np.zeros(64, bool))
    assert qs.analyze(m, qs.choose_qparams(m)).sqnr_db == qs.analyze(
        x, qs.choose_qparams(x)).sqnr_db
    record(refused=False)


def test_small_broadcast_is_read_as_the_tensor_it_stands_for():
    row = np.linspace(-1, 1, 256, dtype=np.float32)
    wide = np.broadcast_to(row, (64, 256))
    p = qs.choose_qparams(wide, granularity="channel", axis=1)
    assert qs.analyze(wide, p).sqnr_db == qs.analyze(np.ascontiguousarray(wide), p).sqnr_db
    record(refused=False)


def test_float64_within_float32_still_reads():
    x = np.array([1e-30, -3e38, 1.5])
    p = qs.choose_qparams(x)
    assert np.isfinite(qs.analyze(x, p).sqnr_db)
    record(refused=False)


def test_torch_expand_and_nested_tensors():
    torch = pytest.importorskip("torch")
    big = torch.ones(1, 1).expand(1 << 16, 1 << 15)
    with bounded(), pytest.raises(EngineValueError, match="expanded view"):
        qs.choose_qparams(big)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch calls its nested tensors a prototype
        nested = torch.nested.nested_tensor([torch.randn(3), torch.randn(4)])
    for call in ENTRY_POINTS.values():
        with pytest.raises(EngineTypeError, match=re.escape(
                "x is a nested (ragged) torch tensor of 2 components")):
            call(nested)
    record(refused=True)


@pytest.mark.parametrize("path", ["", "a" * 10**6, "nul\x00byte"])
def test_paths_that_are_no_path(path):
    with pytest.raises(UserError) as info:
        resolve_source(path)
    assert len(str(info.value)) < 400
    record(refused=True)


def test_figure_of_a_folder_or_nothing_fails_at_once(tmp_path):
    outcome = run_isolated(f"""
import time, quantscope as qs
from quantscope.errors import UserError
for data in ("", {str(tmp_path)!r}):
    start = time.monotonic()
    try:
        qs.figure(data)
    except UserError as exc:
        print(round(time.monotonic() - start, 2), exc)
""", timeout=60)
    assert outcome.code == 0, outcome.describe()
    lines = outcome.out.splitlines()
    assert len(lines) == 2, outcome.out
    for line in lines:
        seconds, message = line.split(" ", 1)
        assert float(seconds) < 1.0, line
        assert "a figure draws one tensor" in message
    record(refused=True)

