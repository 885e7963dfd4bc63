"""``quantscope.view(model)`` and ``view(plan)``: the model view on a model held in Python, the
plan's rows each changeable, the rest re-planned at once."""

from __future__ import annotations

import pytest

import quantscope as qs
from oracles import need
from tiny_models import tiny_lm

torch = need("torch")
FORMATS = ["int8/channel", "fp8_e4m3/tensor", "int4_g32", "nvfp4", "mxfp4"]


@pytest.fixture
def opened(qtbot):
    made = []

    def make(data, **kw):
        v = qs.view(data, **kw)
        qtbot.addWidget(v.window)
        made.append(v)
        return v

    yield make
    for v in made:
        v.close()


def test_view_of_a_module_shows_its_scan(opened):
    model = tiny_lm(torch)
    v = opened(model)
    view = v.window.model_view
    assert v.window.model_active() and view.path is None
    assert [r.name for r in view.rows] == list(model.state_dict())
    assert view.model.rowCount() == len(view.rows)
    assert "TinyLM" in view.title.text()


def test_plan_rows_change_and_replan(opened, tmp_path):
    table = qs.scan(tiny_lm(torch))
    p = qs.plan(table, 5.5, formats=FORMATS)
    v = opened(p)
    panel = v.window.model_view.plan_panel
    assert panel.table.rowCount() == len(p.rows) and panel.plan is p
    name = "layers.1.q_proj.weight"
    row = [r.name for r in p.rows].index(name)
    box = panel.table.cellWidget(row, 2)
    assert box.currentText() == p[name].spec
    box.setCurrentText("int8/channel")  # what a click on the chooser does
    q = panel.plan
    assert q[name].spec == "int8/channel" and q[name].pinned
    assert q.total_error == pytest.approx(p.choose(name, "int8/channel").total_error, rel=1e-15)
    assert q.average_bits <= 5.5
    assert panel.table.item(row, 3).text() == f"{q[name].bits / q[name].params:.4f}"
    panel.budget.setValue(7.0)
    panel.budget.editingFinished.emit()
    assert panel.plan.budget == 7.0 and panel.plan[name].spec == "int8/channel"
    panel.budget.setValue(1.5)  # nothing fits: said, and the plan stays
    panel.budget.editingFinished.emit()
    assert panel.plan.budget == 7.0 and "not applied" in panel.summary.text()
    panel.free.click()
    assert not any(r.pinned for r in panel.plan.rows)
    v.window.grab().save(str(tmp_path / "plan.png"))
