"""Shared test set-up: Qt renders offscreen (no display here or in CI) and the real tensors
bundled with the package are available as fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import compile_guard
import rewrite_cache

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "quantscope" / "resources" / "samples"


def _no_compile_notice_in_process() -> None:
    """The compile notice goes to stderr on any stream, once per process, whichever command
    compiles first; on a fresh cache (CI) that would be whichever test ran first, and tests
    that hold a command's stderr to its own words would see it by chance. Marked as already
    installed here, it stays out of in-process runs; its own tests run it in subprocesses
    (tests/core/test_compile_notice.py)."""
    from quantscope.core.kernels import compile_notice

    compile_notice._installed = True


_no_compile_notice_in_process()


@pytest.fixture(scope="session")
def gelu_activations() -> np.ndarray:
    """Real layer-0 FFN GELU activations of MiniLM [197 tokens, 1536 features]: skewed, with
    one feature reaching 24.8 (the outlier case)."""
    return np.load(SAMPLES / "layer0_ffn_gelu_activations.npy", allow_pickle=False)


@pytest.fixture(scope="session")
def query_weight() -> np.ndarray:
    """Real layer-0 attention query weight of MiniLM [384 out, 384 in]."""
    return np.load(SAMPLES / "layer0_query_weight.npy", allow_pickle=False)


def _engine_reports(x: np.ndarray, axis: int, bits: int = 8) -> dict:
    """The four schemes straight from the engine (choose_qparams + analyze, no state): the
    independent reference the window and ``quantscope report`` are held to."""
    from quantscope.core import analyze, choose_qparams

    out = {}
    for sym in ("symmetric", "asymmetric"):
        for gran in ("tensor", "channel"):
            p = choose_qparams(x, symmetric=sym == "symmetric", granularity=gran, axis=axis,
                               bits=bits)
            out[f"{sym}/{gran}"] = analyze(x, p)
    return out


@pytest.fixture(scope="session")
def engine_reports():
    """``engine_reports(x, axis, bits=8)``: the four schemes' reports from the engine alone."""
    return _engine_reports


def pytest_addoption(parser):
    parser.addoption("--hostile-long", action="store_true", default=False,
                     help="run the hostile-input fuzzers (tests/hostile) with many more examples")


def pytest_configure(config):
    if config.getoption("--hostile-long"):
        os.environ["QUANTSCOPE_HOSTILE_LONG"] = "1"  # read by tests/hostile/hostile_support.py
    config.addinivalue_line(
        "markers", "slow: starts fresh interpreters or whole windows many times (the last tier)")
    config.addinivalue_line(
        "markers", "compiles(why): compiles a loop of the engine in the test's own process "
        "(tests/compile_guard.py fails any other test that does)")
    if not hasattr(config, "workerinput"):  # once per test session, before any worker starts
        if getattr(config.option, "dist", "no") != "no":
            rewrite_cache.write_ahead(config)
        _warm_kernels(config)
    compile_guard.configure(config, warmed_up=not os.environ.get("QUANTSCOPE_TEST_NO_WARM_UP"))
    if not hasattr(config, "workerinput"):
        if getattr(config.option, "dist", "no") == "loadfile":
            # the queue of files keeps the order the workers collected them in: costliest first
            # (pytest_collection_modifyitems), not xdist's most-tests-first
            config.option.loadscopereorder = False


def _warm_kernels(config) -> None:
    """Compile every kernel the suite uses into Numba's on-disk cache, once, before the tests.

    On a fresh clone nothing is cached: without this, whichever test first touched a loop paid
    its compile inside its own timeout (the first window test timed out), and both test workers
    compiled the same loops side by side. Here two processes, this one and a second, share the
    steps of :func:`quantscope.state.compile_ahead.compile_all` (the panes' loops and the
    others) in groups that share their loops, each group compiled by whichever is free first
    (a file per group in a scratch folder says who took it), so both cores compile and no
    loop is compiled twice; the workers then load them from the cache.
    ``QUANTSCOPE_TEST_NO_WARM_UP=1`` skips it (a test file run alone)."""
    import shutil
    import subprocess
    import tempfile
    import time

    if os.environ.get("QUANTSCOPE_TEST_NO_WARM_UP"):
        return
    start = time.perf_counter()
    claims = tempfile.mkdtemp(prefix="quantscope-warm-up-")
    try:
        rest = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, time; start = time.perf_counter(); "
             "from quantscope.state.compile_ahead import claim_in, compile_all; "
             "compile_all(claim_in(sys.argv[1])); "
             "print(f'{time.perf_counter() - start:.1f} s ({time.process_time():.1f} s CPU)')",
             claims], stdout=subprocess.PIPE, text=True)
        from quantscope.state.compile_ahead import claim_in, compile_all

        cpu = time.process_time()
        compile_all(claim_in(claims))
        here = f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU)"
        others = rest.communicate()[0].strip().splitlines()
        taken = len(os.listdir(claims))
    finally:
        shutil.rmtree(claims, ignore_errors=True)
    if rest.returncode != 0:
        raise pytest.UsageError("compiling the kernels ahead of the tests failed (see above)")
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    line = (f"kernels compiled or loaded in {time.perf_counter() - start:.1f} s, before the "
            f"tests ({taken} groups of steps shared by two processes: {here} here, "
            f"{others[-1] if others else '?'} in the other)")
    if reporter is not None:
        reporter.write_line(line)
    else:
        print(line)


# The hostile-input tally (tests/hostile/hostile_support.py) is kept per process; under
# pytest-xdist each worker hands its own to the controller, which prints the sum.
_WORKERS_TALLY = {"accepted": 0, "refused": 0}


def _own_tally() -> dict[str, int]:
    support = sys.modules.get("hostile_support")
    return dict(support.TALLY) if support else {"accepted": 0, "refused": 0}


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["hostile_tally"] = _own_tally()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    compile_guard.node_down(node)
    for key, count in getattr(node, "workeroutput", {}).get("hostile_tally", {}).items():
        _WORKERS_TALLY[key] += count


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    compile_guard.summary(terminalreporter)
    tally = _own_tally()
    refused = tally["refused"] + _WORKERS_TALLY["refused"]
    accepted = tally["accepted"] + _WORKERS_TALLY["accepted"]
    if not refused + accepted:
        return
    failed = len(terminalreporter.stats.get("failed", []))
    terminalreporter.write_line(
        f"hostile inputs: {refused + accepted} tried, {refused} clear errors, "
        f"{accepted} accepted, {failed} failing tests (crash, traceback, hang, "
        "memory blowup or code executed would each fail one)")


@pytest.fixture(scope="session")
def hf_folder(tmp_path_factory):
    """``(folder, tensors)``: the bundled bf16 checkpoint split over two shards in a Hugging
    Face folder (``config.json``, ``model.safetensors.index.json``), and its tensors."""
    import json

    import ml_dtypes  # noqa: F401  (safetensors reads bf16 only once NumPy knows the type)

    from oracles import need

    st = need("safetensors.numpy")
    tensors = st.load_file(str(SAMPLES / "layer0_bf16.safetensors"))
    names = sorted(tensors)
    root = tmp_path_factory.mktemp("hf")
    weight_map = {}
    for i, part in enumerate((names[: len(names) // 2], names[len(names) // 2:]), start=1):
        shard = f"model-0000{i}-of-00002.safetensors"
        st.save_file({n: tensors[n] for n in part}, str(root / shard))
        weight_map.update(dict.fromkeys(part, shard))
    (root / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 0}, "weight_map": weight_map}))
    (root / "config.json").write_text(json.dumps({"model_type": "bert"}))
    return root, tensors


def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto`` (the README's command): :func:`auto_workers.auto_workers` workers, one and
    a half per core where memory holds them, instead of pytest-xdist's one per core."""
    from auto_workers import auto_workers

    return auto_workers()


def _tier(item) -> int:
    """0: the engine, loaders and state; 1: the window; 2: the fresh-interpreter tests (slow)."""
    if item.get_closest_marker("slow") is not None:
        return 2
    return 1 if "/gui/" in item.nodeid.replace("\\", "/") or item.nodeid.startswith("gui/") else 0


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Tell each xdist worker whether the cache was warm (:mod:`compile_guard`) and to sort the
    files costliest first (a worker's own options say ``--dist no``)."""
    compile_guard.configure_node(node)
    if node.config.option.dist == "loadfile":
        node.workerinput["files_costliest_first"] = True


def pytest_collection_modifyitems(config, items):
    """In one process, run the tests in tiers, fastest feedback first: engine and state tests,
    then the window tests, then the ``slow`` ones (``-m "not slow"`` leaves those out). The sort
    is stable, so each file keeps its order.

    Spread over xdist workers file by file (``--dist loadfile``, the README's command), the
    files go out costliest first instead (:mod:`file_costs`): the run ends when the last file
    does, and a long file handed out last ran alone while the other workers idled. Every worker
    sorts its collection the same way, as xdist requires."""
    if getattr(config, "workerinput", {}).get("files_costliest_first"):
        from file_costs import costliest_first, load_costs

        costliest_first(items, load_costs())
        return
    items.sort(key=_tier)
