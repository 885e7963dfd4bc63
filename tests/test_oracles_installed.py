"""The cross-check runtimes are installed where CI runs (see tests/oracles.py)."""

import pytest

from oracles import ORACLE_MODULES, need


@pytest.mark.parametrize("module", ORACLE_MODULES)
def test_oracle_runtime_importable(module):
    assert need(module) is not None
