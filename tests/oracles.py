"""The real runtimes the cross-checks compare against (the ``oracles`` extra of pyproject).

:func:`need` imports one of them. Where it is missing, a developer's run skips the test, but a
CI run (the environment variable ``CI`` set, as ``.ci/run`` does) fails it: a cross-check that
silently skips in CI would let a regression land unseen.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

#: Every module the cross-checks import (the ``oracles`` extra installs them all).
ORACLE_MODULES = ("torch", "onnx", "onnxruntime", "ai_edge_litert.interpreter", "flatbuffers",
                  "safetensors.numpy", "torchao", "gguf", "compressed_tensors",
                  "modelopt.torch.quantization", "modelopt.torch.quantization.qtensor",
                  "bitsandbytes", "transformers")


def need(module: str) -> ModuleType:
    """``import module``; if it is missing, fail under CI and skip elsewhere."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = 'pip install -e ".[test,oracles]"'
        if os.environ.get("CI"):
            pytest.fail(f"{module} is missing under CI ({exc}); CI must run {hint}")
        pytest.skip(f"{module} is not installed ({hint} installs the cross-check runtimes)",
                    allow_module_level=True)
