"""Shared test set-up: Qt renders offscreen (no display here or in CI) and the real tensors
bundled with the package are available as fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

SAMPLES = Path(__file__).resolve().parents[1] / "src" / "quantscope" / "resources" / "samples"


@pytest.fixture(scope="session")
def gelu_activations() -> np.ndarray:
    """Real layer-0 FFN GELU activations of MiniLM [197 tokens, 1536 features]: skewed, with
    one feature reaching 24.8 (the outlier case)."""
    return np.load(SAMPLES / "layer0_ffn_gelu_activations.npy", allow_pickle=False)


@pytest.fixture(scope="session")
def query_weight() -> np.ndarray:
    """Real layer-0 attention query weight of MiniLM [384 out, 384 in]."""
    return np.load(SAMPLES / "layer0_query_weight.npy", allow_pickle=False)
