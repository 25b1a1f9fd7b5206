"""Which model the node loads: an explicit path, a preset, or the shipped checkpoint.

A robot engineer starting the node with no arguments should get the project's own
trained tiny model (models/m2sa-tiny-synth), found next to the sources in a checkout
or under share/m2sa_ros/models when installed by colcon. When it is absent (a fresh
checkout before the model is trained) the node still starts, on the tiny preset with
random weights, and says loudly that its outputs are untrained. :func:`load_segmenter`
then loads it with the node's parameters (tests hand the node a fake in its place).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from m2sa_ros.node_params import NodeParams

SHIPPED_MODEL = "m2sa-tiny-synth"
FALLBACK_PRESET = "tiny"


@dataclass(frozen=True)
class ModelSource:
    """What to pass to ``Segmenter.from_pretrained`` and what to tell the user about it."""

    source: str  # a directory path or a preset name
    is_preset: bool
    warning: str = ""


def shipped_model_candidates() -> list[Path]:
    """Where the shipped checkpoint may live: the repository, then the ament share dir."""
    here = Path(__file__).resolve().parent  # resolves the venv symlink to the checkout
    candidates = [here.parent / "models" / SHIPPED_MODEL]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("m2sa_ros")) / "models" / SHIPPED_MODEL)
    except Exception:  # noqa: BLE001 - not installed through ament, or ament_index missing
        pass
    return candidates


def resolve_model_source(model_path: str, preset: str,
                         candidates: list[Path] | None = None) -> ModelSource:
    """Explicit path > explicit preset > shipped checkpoint > tiny preset with a warning.

    An explicit ``model_path`` that does not exist is an error (FileNotFoundError), not
    a silent fallback: a typo must not quietly give the robot a random model.
    """
    if model_path:
        path = Path(model_path).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"model_path '{model_path}' does not exist")
        return ModelSource(str(path), is_preset=False)
    if preset:
        return ModelSource(preset, is_preset=True,
                           warning=f"using preset '{preset}' with random weights: outputs are untrained")
    for candidate in candidates if candidates is not None else shipped_model_candidates():
        if (candidate / "config.json").is_file():
            return ModelSource(str(candidate), is_preset=False)
    return ModelSource(FALLBACK_PRESET, is_preset=True,
                       warning=f"shipped model models/{SHIPPED_MODEL} not found; falling back to "
                               f"preset '{FALLBACK_PRESET}' with random weights: outputs are UNTRAINED")


def load_segmenter(params: NodeParams, source: ModelSource) -> Any:
    """The production factory: ``Segmenter.from_pretrained`` with the node's parameters."""
    from m2sa_core.inference import Segmenter, dtype_from_name

    import torch

    if params.cpu_threads:
        torch.set_num_threads(params.cpu_threads)  # process-wide: the node is the model's only user
    dtype = dtype_from_name(params.dtype)
    return Segmenter.from_pretrained(source.source, device=params.device, dtype=dtype,
                                     frame_cache_size=params.frame_cache_size,
                                     max_new_tokens=params.max_new_tokens,
                                     mask_threshold=params.mask_threshold, amodal=params.amodal,
                                     duplicate_iou=None if params.duplicate_iou < 0 else params.duplicate_iou,
                                     quantization=params.quantization)
