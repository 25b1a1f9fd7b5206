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
Scene composition: background, 2-4 objects, occlusion, visible and amodal masks.

Objects stand on a table; those lower in the image are nearer the camera and drawn
later, so they occlude the ones behind (visible masks differ from the complete, amodal
ones). Instances are numbered per category from left to right (by the centre of the
complete mask), which is how the answer text refers to them ("mug_2").
"""

from __future__ import annotations

from dataclasses import dataclass

from m2sa_core.data.synthetic.shapes import CATEGORIES, render_sprite
import numpy as np

MIN_VISIBLE_FRACTION = 0.45  # of each object and of each of its parts
MIN_PART_PIXELS = 12


@dataclass
class SceneObject:
    """One instance with full-frame masks (bool [H, W])."""

    category: str
    instance: int
    amodal: np.ndarray
    visible: np.ndarray
    parts_amodal: dict[str, np.ndarray]
    parts_visible: dict[str, np.ndarray]

    @property
    def occluded(self) -> bool:
        return bool((self.amodal & ~self.visible).any())


@dataclass
class Scene:
    image: np.ndarray  # uint8 RGB [H, W, 3]
    objects: list[SceneObject]

    def instances(self, category: str) -> list[SceneObject]:
        return [o for o in self.objects if o.category == category]

    def categories(self) -> list[str]:
        return sorted({o.category for o in self.objects})


def _background(rng: np.random.Generator, size: int) -> tuple[np.ndarray, int]:
    wall = rng.integers(150, 235, 3).astype(np.float32)
    table = np.array([rng.integers(110, 170), rng.integers(70, 115), rng.integers(30, 70)], np.float32)
    horizon = int(size * rng.uniform(0.3, 0.45))
    img = np.empty((size, size, 3), np.float32)
    img[:horizon] = wall
    rows = np.arange(size - horizon, dtype=np.float32)[:, None]
    grain = 12 * np.sin(rows / rng.uniform(2.0, 5.0) + rng.uniform(0, 6))  # wood grain
    img[horizon:] = table[None, None] + grain[:, :, None]
    img += rng.normal(0, 4, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8), horizon


def _place(rng: np.random.Generator, categories: list[str], size: int, horizon: int):
    """(category, sprite, x0, y0) per object, back to front (far objects first)."""
    placed = []
    for cat in categories:
        sprite = render_sprite(cat, rng, float(rng.uniform(0.85, 1.2)) * size / 256)
        h, w = sprite.labels.shape
        if h >= size or w >= size:
            raise ValueError(f"sprite of {cat} ({h}x{w}) does not fit a {size}x{size} scene")
        bottom = int(rng.uniform(max(horizon + 10, h), size))
        x0 = int(rng.integers(0, size - w + 1))
        placed.append((bottom, cat, sprite, x0, bottom - h))
    placed.sort(key=lambda p: p[0])
    return [p[1:] for p in placed]


def _compose(image: np.ndarray, placed, strict: bool = True) -> list[SceneObject] | None:
    """
    Paint the sprites into ``image`` and build masks, nearest object first.

    ``strict``: None if an object or a part is too hidden (a still scene must show every
    target); a sequence's later frames keep whatever stays visible.
    """
    layers = []
    for _, sprite, x0, y0 in placed:
        h, w = sprite.labels.shape
        full = np.zeros(image.shape[:2], np.int16)
        full[y0:y0 + h, x0:x0 + w] = sprite.labels
        image[y0:y0 + h, x0:x0 + w][sprite.mask] = sprite.image[sprite.mask]
        layers.append(full)
    objs = []
    covered = np.zeros(image.shape[:2], bool)  # by nearer objects
    for (cat, _, _, _), full in reversed(list(zip(placed, layers))):
        amodal = full > 0
        vis = amodal & ~covered
        covered |= amodal
        if strict and vis.sum() < MIN_VISIBLE_FRACTION * amodal.sum():
            return None
        parts_a, parts_v = {}, {}
        for k, part in enumerate(CATEGORIES[cat].parts):
            pa = full == 2 + k
            pv = pa & vis
            if strict and pv.sum() < max(MIN_PART_PIXELS, MIN_VISIBLE_FRACTION * pa.sum()):
                return None
            parts_a[part], parts_v[part] = pa, pv
        objs.append(SceneObject(cat, 0, amodal, vis, parts_a, parts_v))
    return objs


def _number_instances(objects: list[SceneObject]) -> list[SceneObject]:
    """Instance numbers per category, left to right; objects returned in that order."""
    def centre_x(o: SceneObject) -> float:
        return float(np.flatnonzero(o.amodal.any(axis=0)).mean())

    ordered = sorted(objects, key=lambda o: (o.category, centre_x(o)))
    counts: dict[str, int] = {}
    for o in ordered:
        counts[o.category] = counts.get(o.category, 0) + 1
        o.instance = counts[o.category]
    return ordered


@dataclass
class Layout:
    """How a scene was put together, so it can be re-composed (objects moved, camera moved)."""

    background: np.ndarray  # uint8 RGB [H, W, 3] before any object was painted
    horizon: int
    placed: list  # (category, Sprite, x0, y0) per object, back to front


def render_layout(rng: np.random.Generator, size: int = 256, max_tries: int = 60) -> tuple[Layout, Scene]:
    """Return a random scene with 2-4 objects that respects the visibility limits, and its layout."""
    names = list(CATEGORIES)
    n = int(rng.integers(2, 5))
    # Repeat a category now and then so several instances of one category appear.
    cats = [names[i] for i in rng.integers(0, len(names), n)]
    if n >= 2 and rng.random() < 0.35:
        cats[1] = cats[0]
    for attempt in range(max_tries):
        if attempt and attempt % 20 == 0 and len(cats) > 2:
            cats = cats[:-1]  # crowded: drop an object
        image, horizon = _background(rng, size)
        background = image.copy()
        placed = _place(rng, cats, size, horizon)
        objects = _compose(image, placed)
        if objects is not None:
            return Layout(background, horizon, placed), Scene(image=image, objects=_number_instances(objects))
    raise RuntimeError(f"could not place {cats} within the visibility limits in {max_tries} tries")


def render_scene(rng: np.random.Generator, size: int = 256, max_tries: int = 60) -> Scene:
    """Return a random scene with 2-4 objects that respects the visibility limits."""
    return render_layout(rng, size, max_tries)[1]
