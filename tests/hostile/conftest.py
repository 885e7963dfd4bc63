"""Prints how many hostile inputs this run tried and how they ended."""

from __future__ import annotations


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from hostile_support import TALLY

    tried = sum(TALLY.values())
    if not tried:
        return
    failed = len(terminalreporter.stats.get("failed", []))
    terminalreporter.write_line(
        f"hostile inputs: {tried} tried, {TALLY['refused']} clear errors, "
        f"{TALLY['accepted']} accepted, {failed} failing tests (crash, traceback, hang, "
        "memory blowup or code executed would each fail one)")
