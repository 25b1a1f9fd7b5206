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
The registered depth of an image of a generated synthetic dataset, found again from the files.

``m2sa-synth`` writes PNGs and JSON, not depth; a bag recorder that wants a depth image
beside each colour image re-renders it. Image ``k`` of a dataset is a pure function of
``(seed, k, size)`` (``world.image_rng``), so its scene and layout can be rebuilt alone,
and :func:`~m2sa_core.data.synthetic.depth.render_depth` gives that scene depth from a
stream of its own, ``(seed, k, DEPTH_STREAM)``, so the RGB and masks of every dataset
stay those of earlier versions. The seed and size come from the ``generator`` header of
the dataset's project-layout files (docs/DATASETS.md); a data file from elsewhere (a
real MMR release) has none, and then there is no depth to give.

The rebuilt image is checked byte for byte against the PNG on disk: a renamed folder,
an edited picture or a different version of the renderer must not get depth that
belongs to another picture.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
from pathlib import Path
import re

from m2sa_core.data.synthetic.depth import render_depth, SceneDepth
from m2sa_core.data.synthetic.scene import render_layout, Scene
from m2sa_core.data.synthetic.world import image_rng
import numpy as np

DEPTH_STREAM = 100  # the geometry's draws (camera, table, yaws, reliefs)
ARTEFACT_STREAM = 101  # sensor artefacts added by a recorder
# Small files of the project layouts with a ``generator`` header, in the order they are tried.
HEADER_FILES = ("r2sm_test.json", "amodal_reasonseg_test.json", "masks_val.json", "masks_test.json")
_FILE_NAME = re.compile(r"^(\d+)\.png$")


@dataclass(frozen=True)
class Generator:
    """How a synthetic dataset was generated (what depth needs of it)."""

    seed: int
    size: int


def find_generator(directory: str | Path) -> Generator | None:
    """Yield the generator of the synthetic dataset in ``directory``; None when no header says."""
    for name in HEADER_FILES:
        path = Path(directory) / name
        if not path.is_file():
            continue
        try:
            header = json.loads(path.read_text(encoding="utf-8")).get("generator")
            return Generator(int(header["seed"]), int(header["size"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
    return None


def image_index(file_name: str) -> int | None:
    """Index ``k`` of a dataset image from its file name (``000123.png`` -> 123)."""
    match = _FILE_NAME.match(Path(file_name).name)
    return int(match.group(1)) if match else None


def scene_depth(generator: Generator, index: int) -> tuple[Scene, SceneDepth]:
    """Image ``index``'s scene and its depth and 3-D ground truth (clean)."""
    layout, scene = render_layout(image_rng(generator.seed, index), generator.size)
    rng = np.random.default_rng(np.random.SeedSequence([generator.seed, index, DEPTH_STREAM]))
    return scene, render_depth(scene, rng, horizon=layout.horizon)


def matching_scene_depth(generator: Generator, file_name: str,
                         rgb: np.ndarray) -> tuple[Scene, SceneDepth] | str:
    """(scene, depth) of the image ``file_name`` whose pixels are ``rgb``, or why not (one line)."""
    index = image_index(file_name)
    if index is None:
        return f"{file_name} is not named like a synthetic image (NNNNNN.png)"
    scene, depth = scene_depth(generator, index)
    if scene.image.shape != rgb.shape or not np.array_equal(scene.image, rgb):
        return (f"{file_name} is not image {index} of the synthetic world with seed {generator.seed} and "
                f"size {generator.size} (its pixels differ)")
    return scene, depth
