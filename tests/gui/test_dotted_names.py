"""Dotted names shortened to a width keep what tells them apart: their leading components give
way to initials first, layer numbers and the last component stay whole."""

from __future__ import annotations

import pytest

from quantscope.gui.dotted_names import ELLIPSIS, fit_dotted, initials

#: One BERT layer's names without their shared prefix (the real file's rows).
LAYER = ("attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
         "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
         "attention.output.dense.weight", "attention.output.dense.bias",
         "attention.output.LayerNorm.weight", "attention.output.LayerNorm.bias",
         "intermediate.dense.weight", "intermediate.dense.bias", "output.dense.weight",
         "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias")


def _within(chars: int):
    return lambda text: len(text) <= chars


def test_a_name_that_fits_is_whole_and_the_start_gives_way_first():
    name = "attention.self.query.weight"
    assert fit_dotted(name, _within(100)) == name
    assert fit_dotted(name, _within(len(name) - 1)) == "a.self.query.weight"
    assert fit_dotted(name, _within(17)) == "a.s.query.weight"
    assert initials(name) == "a.s.q.weight"


def test_layer_numbers_and_the_last_component_stay_whole():
    name = "model.layers.17.mlp.experts.3.down_proj.weight"
    assert initials(name) == "m.l.17.m.e.3.d.weight"
    assert fit_dotted(name, _within(len(initials(name)))) == initials(name)


def test_past_the_initials_the_start_is_cut_at_a_component():
    name = "attention.output.LayerNorm.weight"
    assert fit_dotted(name, _within(20)) == "a.o.LayerNorm.weight"
    assert fit_dotted(name, _within(19)) == "a.o.L.weight"
    assert fit_dotted(name, _within(11)) == ELLIPSIS + "o.L.weight"
    assert fit_dotted(name, _within(9)) == ELLIPSIS + "L.weight"
    assert fit_dotted(name, _within(3)) == ELLIPSIS + "weight"  # the caller's elision cuts on


@pytest.mark.parametrize("chars", range(len(max(map(initials, LAYER), key=len)), 40))
def test_a_layers_names_read_apart_at_every_width_down_to_their_initials(chars):
    """Cut in their middle (Qt's elision) two rows read ``attention…se.weight``; shortened
    from their start every row of the layer reads differently at every width."""
    shown = [fit_dotted(name, _within(chars)) for name in LAYER]
    assert len(set(shown)) == len(LAYER), shown
    assert all(len(text) <= chars for text in shown)
