"""The real tensors bundled with quantscope (all-MiniLM-L6-v2, see resources/samples/NOTICE.md).

They give every user, and every demo, real data at once: skewed GELU activations with an
outlier feature, a residual stream, two weight matrices, and a bf16 checkpoint slice.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from quantscope.errors import UserError


class UnknownSampleError(UserError, ValueError):
    """A ``--sample`` name that is not bundled; the message lists the valid names."""


#: name -> (file under resources/samples, description).
_SAMPLES: dict[str, tuple[str, str]] = {
    "gelu_activations": (
        "layer0_ffn_gelu_activations.npy",
        "MiniLM layer-0 FFN activations after GELU, 197x1536 float32: skewed, one outlier "
        "feature at 24.8"),
    "output_activations": (
        "layer0_output_activations.npy",
        "MiniLM layer-0 block output (residual stream), 197x384 float32"),
    "query_weight": (
        "layer0_query_weight.npy",
        "MiniLM layer-0 attention query weight [out, in], 384x384 float32"),
    "ffn_weight": (
        "layer0_intermediate_dense_weight.npy",
        "MiniLM layer-0 FFN up-projection weight [out, in], 1536x384 float32"),
    "bf16_checkpoint": (
        "layer0_bf16.safetensors",
        "every MiniLM encoder.layer.0 tensor (16) in bfloat16, as a safetensors checkpoint"),
}


def samples_dir() -> Path:
    """Directory holding the bundled sample files and their NOTICE."""
    return Path(str(resources.files("quantscope").joinpath("resources", "samples")))


def list_samples() -> list[tuple[str, Path, str]]:
    """``(name, path, description)`` for every bundled sample, in a stable order."""
    return [(name, samples_dir() / filename, description)
            for name, (filename, description) in _SAMPLES.items()]


def sample_path(name: str) -> Path:
    """Path of the bundled sample ``name``.

    Raises
    ------
    UnknownSampleError
        If ``name`` is not bundled; the message lists the names that are.
    """
    if name not in _SAMPLES:
        raise UnknownSampleError(f"unknown sample {name!r}; available: {', '.join(_SAMPLES)}")
    return samples_dir() / _SAMPLES[name][0]
