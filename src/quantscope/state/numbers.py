"""The panes' numbers as one JSON-ready document section, keyed by what each pane shows.

The classic layout's panes are the four int schemes, so their numbers are keyed by pane
(``"symmetric/tensor"``...). In the comparison layout each pane shows a number format of its
own: keyed by pane, an NVFP4 report would be filed under "symmetric/tensor" and say nothing
of its format. There the numbers are keyed by format (``"nvfp4"``, ``"fp8_e4m3/tensor"``), as
``quantscope report --format --json`` keys them, each naming its format, its storage cost and
the pane that shows it. ``report --json``, the window's ``--metrics``, ``Viewer.numbers()``
and ``figure(...).numbers`` all take this one section.
"""

from __future__ import annotations

from quantscope.core import QuantReport
from quantscope.state.choices import PANES, FormatChoice
from quantscope.state.settings import Settings


def format_summary(spec: str, report: QuantReport) -> dict:
    """A format's report summary with its ``format`` name and ``bits_per_element`` (scales
    included): one row of ``report --format --json``."""
    # the format table loads Numba: the int panes' numbers, the same section, never need it
    from quantscope.core.formats.catalog import bits_per_element

    out = report.summary()
    out["format"] = FormatChoice(spec).name
    out["bits_per_element"] = bits_per_element(report.params, report.n + report.n_nonfinite)
    return out


def pane_numbers(settings: Settings, reports: dict[str, QuantReport],
                 errors: dict[str, str]) -> dict:
    """``{"schemes": {pane: summary}, "errors": {pane: text}}`` in the classic layout;
    ``{"formats": {spec: summary + format, bits_per_element, pane}, "errors": {spec: text}}``
    in the comparison layout. ``reports`` and ``errors`` are keyed by pane."""
    if settings.formats is None:
        return {"schemes": {p: reports[p].summary() for p in PANES if p in reports},
                "errors": {p: errors[p] for p in PANES if p in errors}}
    formats, refused = {}, {}
    for pane, spec in zip(PANES, settings.formats, strict=True):
        if pane in reports:
            formats[spec] = {**format_summary(spec, reports[pane]), "pane": pane}
        elif pane in errors:
            refused[spec] = errors[pane]
    return {"formats": formats, "errors": refused}
