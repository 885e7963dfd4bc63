"""The order in which pytest-xdist hands out the test files: the most expensive first.

``--dist loadfile`` gives each worker a whole file at a time, from a queue. pytest-xdist
orders that queue by the number of tests in a file, which is not their cost: the one test that
compiles every loop on an empty cache, or a file of a few fresh-interpreter tests, came out last
and ran alone on one core while the other worker had nothing left (the longest-processing-time
rule puts the longest jobs first, so that the short ones fill the gaps at the end). The
conftest turns xdist's reordering off and sorts the files by the seconds they took in a measured
run (:data:`COSTS_FILE`), files it does not know at the median.

``python tests/file_costs.py REPORT.xml`` rewrites :data:`COSTS_FILE` from a JUnit report of a
whole run (``pytest --junitxml=REPORT.xml``): each file's sum of its tests' set-up, call and
tear-down times, in seconds.
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

COSTS_FILE = Path(__file__).with_name("file_costs.json")


def load_costs(path: Path = COSTS_FILE) -> dict[str, float]:
    """``{"tests/…/test_x.py": seconds}``, or an empty dict when the file is missing or not a
    JSON object of numbers (the order then falls back to pytest-xdist's)."""
    try:
        costs = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(costs, dict):
        return {}
    return {str(k): float(v) for k, v in costs.items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def file_of(nodeid: str) -> str:
    """The test file of a node id, as the costs name it (``tests/gui/test_window.py``)."""
    path = nodeid.split("::", 1)[0].replace("\\", "/")
    return path if path.startswith("tests/") else f"tests/{path}"


def costliest_first(items: list, costs: dict[str, float]) -> None:
    """Sort ``items`` in place: whole files, the costliest first (unknown files at the median
    cost); within a file, the order they came in. Equal costs keep the files' order."""
    if not costs:
        return
    default = statistics.median(costs.values())
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), i)
    position = {id(item): i for i, item in enumerate(items)}

    def key(item) -> tuple[float, int, int]:
        name = file_of(item.nodeid)
        return -costs.get(name, default), first_seen[name], position[id(item)]

    items.sort(key=key)


def costs_from_junit(report: Path) -> dict[str, float]:
    """Each file's seconds in a JUnit report (pytest writes set-up + call + tear-down per
    test case), rounded to 0.1 s."""
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        # "tests.gui.test_window" or, for a test class, "tests.test_state_machine.TestMachine"
        for end in range(len(parts), 0, -1):
            if parts[end - 1].startswith("test_"):
                totals["/".join(parts[:end]) + ".py"] += float(case.get("time") or 0)
                break
    return {name: round(seconds, 1) for name, seconds in sorted(totals.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tests/file_costs.py REPORT.xml", file=sys.stderr)
        return 2
    costs = costs_from_junit(Path(argv[0]))
    COSTS_FILE.write_text(json.dumps(costs, indent=1) + "\n")
    print(f"{len(costs)} files, {sum(costs.values()):.0f} s in all -> {COSTS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
