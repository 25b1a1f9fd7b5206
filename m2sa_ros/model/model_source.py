# Copyright 2026 m2sa_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
Which model the node loads: an explicit path, a preset, or the shipped checkpoint.

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

from m2sa_core.shipped_model import SHIPPED_MODEL, SHIPPED_MODEL_NAME, SHIPPED_MODEL_RELATIVE
from m2sa_ros.params.node_params import NodeParams

FALLBACK_PRESET = "tiny"
# m2sa_core.model.PRESETS' names, spelled out so that choosing a model never imports torch
# (tested equal): a name outside them is refused before anything is announced or built.
PRESETS = ("tiny", "tiny-authors", "7b", "13b")


@dataclass(frozen=True)
class ModelSource:
    """What to pass to ``Segmenter.from_pretrained`` and what to tell the user about it."""

    source: str  # a directory path or a preset name
    is_preset: bool
    warning: str = ""
    is_shipped: bool = False  # the shipped tiny checkpoint: /diagnostics warns that it knows only toy scenes


def shipped_model_candidates() -> list[Path]:
    """Where the shipped checkpoint may live: the repository, then the ament share dir."""
    candidates = [SHIPPED_MODEL]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(Path(get_package_share_directory("m2sa_ros")) / "models" / SHIPPED_MODEL_NAME)
    except Exception:  # noqa: BLE001 - not installed through ament, or ament_index missing
        pass
    return candidates


def resolve_model_source(model_path: str, preset: str,
                         candidates: list[Path] | None = None) -> ModelSource:
    """
    Explicit path > explicit preset > shipped checkpoint > tiny preset with a warning.

    An explicit ``model_path`` that does not exist is an error (FileNotFoundError), not
    a silent fallback: a typo must not quietly give the robot a random model. So is a
    ``preset`` that names none (ValueError), raised before the random-weights warning
    is due, so that configure logs one error rather than a warning and then an error.
    """
    if model_path:
        path = Path(model_path).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"model_path '{model_path}' does not exist")
        shipped = candidates if candidates is not None else shipped_model_candidates()
        return ModelSource(str(path), is_preset=False,
                           is_shipped=any(_same_directory(path, candidate) for candidate in shipped))
    if preset:
        if preset not in PRESETS:
            raise ValueError(f"preset '{preset}' is not a preset (presets: {', '.join(PRESETS)})")
        return ModelSource(preset, is_preset=True,
                           warning=f"using preset '{preset}' with random weights: outputs are untrained")
    for candidate in candidates if candidates is not None else shipped_model_candidates():
        if (candidate / "config.json").is_file():
            return ModelSource(str(candidate), is_preset=False, is_shipped=True)
    return ModelSource(FALLBACK_PRESET, is_preset=True,
                       warning=f"shipped model {SHIPPED_MODEL_RELATIVE} not found; falling back to "
                               f"preset '{FALLBACK_PRESET}' with random weights: outputs are UNTRAINED")


def _same_directory(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def load_segmenter(params: NodeParams, source: ModelSource) -> Any:
    """Return the production factory: ``Segmenter.from_pretrained`` with the node's parameters."""
    from m2sa_core.inference import dtype_from_name, Segmenter
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
