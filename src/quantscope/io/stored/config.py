"""A checkpoint's declared quantization: ``quantization_config`` in its ``config.json``.

Hugging Face checkpoints say how their weights are stored in ``config.json``
(``quantization_config``, or ``compression_config`` in early compressed-tensors releases);
older GPTQ checkpoints keep the same keys in ``quantize_config.json``. The file is untrusted
input like a tensor header: its size is bounded, it must be a JSON object, and every value a
decoder uses is checked for its type and range where it is read (:func:`get_int` and
friends), so a lying config gives one clear error and never a crash or a huge allocation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from quantscope.io.checks import check_regular_file, fail

#: config.json files are a few kilobytes; a generous bound keeps a hostile one cheap.
MAX_CONFIG_BYTES = 4_000_000

#: The methods decoded here, by their ``quant_method`` name.
METHODS = ("compressed-tensors", "fp8", "fbgemm_fp8", "gptq", "awq", "bitsandbytes")


@dataclass(frozen=True)
class QuantConfig:
    """The declared quantization of a checkpoint: its method and its raw settings."""

    method: str
    settings: dict
    source: Path

    def where(self, key: str) -> str:
        return f"quantization_config {key!r}"


def config_path(path: str | os.PathLike) -> Path | None:
    """The ``config.json`` (or ``quantize_config.json``) that describes ``path``'s tensors:
    in the folder itself, beside an index, or beside a single safetensors file."""
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    for name in ("config.json", "quantize_config.json"):
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def read_quant_config(path: str | os.PathLike) -> QuantConfig | None:
    """The quantization ``path`` declares, or None for a checkpoint stored unquantized.

    Raises
    ------
    TensorFileError
        The config is too large, not JSON, or names a method that is not decoded here.
    """
    found = config_path(path)
    if found is None:
        return None
    size = check_regular_file(found)
    if size > MAX_CONFIG_BYTES:
        raise fail(found, f"config of {size} bytes exceeds the {MAX_CONFIG_BYTES}-byte limit")
    try:
        doc = json.loads(found.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise fail(found, "is not valid JSON") from None
    except OSError as exc:
        raise fail(found, f"cannot read file ({exc.strerror or exc})") from None
    if not isinstance(doc, dict):
        raise fail(found, "is not a JSON object")
    settings: object
    if found.name == "quantize_config.json":
        settings = doc
        doc.setdefault("quant_method", "gptq")
    else:
        settings = doc.get("quantization_config", doc.get("compression_config"))
        if settings is None:
            return None
    if not isinstance(settings, dict):
        raise fail(found, "quantization_config is not a JSON object")
    method = settings.get("quant_method")
    if method is None and "config_groups" in settings:
        method = "compressed-tensors"
    if not isinstance(method, str):
        raise fail(found, "quantization_config has no quant_method")
    method = method.lower()
    if method == "sparse-compressed-tensors":
        method = "compressed-tensors"
    if method not in METHODS:
        raise fail(found, f"quantization_config names quant_method {method[:40]!r}, which "
                          f"quantscope does not decode (it decodes {', '.join(METHODS)})")
    return QuantConfig(method, settings, found)


def get_int(config: QuantConfig, settings: dict, key: str, *, lo: int, hi: int,
            default: int | None = None, allow: tuple[int, ...] = ()) -> int:
    """``settings[key]`` as an int in ``[lo, hi]`` (or one of ``allow``), else one error."""
    value = settings.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int) or not (
            lo <= value <= hi or value in allow):
        shown = json.dumps(value)[:40] if value is not None else "nothing"
        raise fail(config.source, f"{config.where(key)} is {shown}; expected an integer "
                                  f"from {lo} to {hi}")
    return value


def get_bool(config: QuantConfig, settings: dict, key: str, default: bool) -> bool:
    value = settings.get(key, default)
    if not isinstance(value, bool):
        raise fail(config.source, f"{config.where(key)} is {json.dumps(value)[:40]}; "
                                  "expected true or false")
    return value


def get_str(config: QuantConfig, settings: dict, key: str, choices: tuple[str, ...],
            default: str | None = None) -> str:
    value = settings.get(key, default)
    if isinstance(value, str):
        value = value.lower()
    if value not in choices:
        raise fail(config.source, f"{config.where(key)} is {json.dumps(value)[:40]}; "
                                  f"expected one of {', '.join(choices)}")
    return value
