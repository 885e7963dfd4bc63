"""The xdist queue's order (tests/file_costs.py): whole files, costliest first, and the costs
read back from a JUnit report the way pytest writes it."""

from __future__ import annotations

from types import SimpleNamespace

from file_costs import costliest_first, costs_from_junit, file_of, load_costs


def _items(*nodeids: str) -> list:
    return [SimpleNamespace(nodeid=n) for n in nodeids]


def test_files_go_costliest_first_each_keeping_its_own_order():
    items = _items("tests/a/test_cheap.py::t1", "tests/test_dear.py::t1",
                   "tests/a/test_cheap.py::t2", "tests/test_new.py::t1",
                   "tests/test_dear.py::t2", "tests/test_mid.py::t1")
    costs = {"tests/a/test_cheap.py": 1.0, "tests/test_dear.py": 90.0, "tests/test_mid.py": 5.0,
             "tests/test_other.py": 9.0}
    costliest_first(items, costs)
    # unknown files cost the median (7.0): after the 9 s file, before the 5 s one
    assert [i.nodeid for i in items] == [
        "tests/test_dear.py::t1", "tests/test_dear.py::t2", "tests/test_new.py::t1",
        "tests/test_mid.py::t1", "tests/a/test_cheap.py::t1", "tests/a/test_cheap.py::t2"]


def test_without_costs_the_order_is_left_alone():
    items = _items("tests/test_b.py::t", "tests/test_a.py::t")
    costliest_first(items, {})
    assert [i.nodeid for i in items] == ["tests/test_b.py::t", "tests/test_a.py::t"]


def test_node_ids_name_their_file_from_the_repository_root():
    assert file_of("tests/gui/test_window.py::test_x[a::b]") == "tests/gui/test_window.py"
    assert file_of("gui/test_window.py::test_x") == "tests/gui/test_window.py"


def test_costs_sum_each_files_cases_from_a_junit_report(tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.gui.test_window" name="test_a" time="1.25"/>'
        '<testcase classname="tests.gui.test_window" name="test_b[x.y]" time="2.5"/>'
        '<testcase classname="tests.test_state_machine.TestMachine" name="runTest" time="4"/>'
        '</testsuite></testsuites>')
    assert costs_from_junit(report) == {"tests/gui/test_window.py": 3.8,
                                        "tests/test_state_machine.py": 4.0}


def test_a_missing_or_malformed_costs_file_gives_no_costs(tmp_path):
    assert load_costs(tmp_path / "absent.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert load_costs(bad) == {}
    mixed = tmp_path / "mixed.json"
    mixed.write_text('{"tests/test_a.py": 2, "tests/test_b.py": "x", "tests/test_c.py": true}')
    assert load_costs(mixed) == {"tests/test_a.py": 2.0}


def test_the_measured_costs_name_files_that_exist():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    costs = load_costs()
    assert costs, "tests/file_costs.json is missing: python tests/file_costs.py REPORT.xml"
    missing = [name for name in costs if not (root / name).is_file()]
    # a renamed or deleted file only costs the median; many mean the costs need measuring again
    assert len(missing) <= len(costs) // 10, missing
