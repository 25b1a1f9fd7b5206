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
Sprites of the synthetic household categories, drawn with OpenCV.

Each category has a distinctive silhouette and a fixed layout of PACO-style parts, each
part with its own colour family, so a tiny model trained from scratch on a CPU can tell
them apart; sizes, colours, textures and orientation vary per instance. A sprite is an
RGB image plus a label map (0 outside, 1 object without a named part, 2 + k for part k
of the category's ``parts``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np

OTHER = 1  # label of object pixels that belong to no named part


@dataclass(frozen=True)
class CategorySpec:
    """A category: its PACO name, part names and the words a question may use for it."""

    name: str
    parts: tuple[str, ...]
    spoken: tuple[str, ...]


@dataclass
class Sprite:
    """One rendered object instance in its own small frame."""

    image: np.ndarray  # uint8 [h, w, 3]
    labels: np.ndarray  # int16 [h, w]

    @property
    def mask(self) -> np.ndarray:
        return self.labels > 0


class Canvas:
    """A sprite under construction: paint colour and label together."""

    def __init__(self, h: int, w: int) -> None:
        self.image = np.zeros((h, w, 3), np.uint8)
        self.labels = np.zeros((h, w), np.int16)

    def paint(self, region: np.ndarray, colour: np.ndarray, label: int) -> None:
        self.image[region] = colour if colour.ndim == 1 else colour[region]
        self.labels[region] = label

    def shape(self) -> tuple[int, int]:
        return self.labels.shape  # type: ignore[return-value]

    def region(self, draw: Callable[[np.ndarray], None]) -> np.ndarray:
        """Boolean mask of whatever ``draw`` paints with value 1 on an empty uint8 frame."""
        frame = np.zeros(self.labels.shape, np.uint8)
        draw(frame)
        return frame.astype(bool)

    def sprite(self) -> Sprite:
        return Sprite(self.image, self.labels)


def _colour(rng: np.random.Generator, base: tuple[int, int, int], spread: int = 25) -> np.ndarray:
    return np.clip(np.array(base) + rng.integers(-spread, spread + 1, 3), 0, 255).astype(np.uint8)


def _hue_colour(rng: np.random.Generator, hue: float | None = None, sat: int = 200, val: int = 210) -> np.ndarray:
    h = rng.uniform(0, 180) if hue is None else hue
    hsv = np.uint8([[[int(h) % 180, sat, val]]])
    return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)[0, 0]


def _gradient(h: int, w: int, a: np.ndarray, b: np.ndarray, vertical: bool = True) -> np.ndarray:
    t = np.linspace(0, 1, h if vertical else w, dtype=np.float32)
    t = t[:, None, None] if vertical else t[None, :, None]
    img = a[None, None].astype(np.float32) * (1 - t) + b[None, None].astype(np.float32) * t
    return np.broadcast_to(img, (h, w, 3)).astype(np.uint8)


def _rect(r: Canvas, x0: int, y0: int, x1: int, y1: int) -> np.ndarray:
    return r.region(lambda f: cv2.rectangle(f, (x0, y0), (x1, y1), 1, -1))


def _poly(r: Canvas, pts: list[tuple[float, float]]) -> np.ndarray:
    arr = np.round(np.array(pts)).astype(np.int32)[None]
    return r.region(lambda f: cv2.fillPoly(f, arr, 1))


def _ellipse(r: Canvas, cx: float, cy: float, ax: float, ay: float, thickness: int = -1) -> np.ndarray:
    c, a = (int(round(cx)), int(round(cy))), (max(1, int(round(ax))), max(1, int(round(ay))))
    return r.region(lambda f: cv2.ellipse(f, c, a, 0, 0, 360, 1, thickness))


def television_set(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(92 * s), int(64 * s)
    stand = max(6, int(9 * s))
    r = Canvas(h + stand, w)
    r.paint(_rect(r, w // 2 - w // 6, h - 2, w // 2 + w // 6, h + stand - 1), _colour(rng, (60, 60, 65), 15), OTHER)
    r.paint(_rect(r, 0, 0, w - 1, h - 1), _colour(rng, (40, 40, 45), 20), OTHER)
    m, bottom = max(3, int(4 * s)), max(12, int(15 * s))
    screen = _rect(r, m, m, w - 1 - m, h - 1 - bottom)
    picture = _gradient(h + stand, w, _hue_colour(rng, rng.uniform(90, 115), 220, 240),
                        _hue_colour(rng, rng.uniform(75, 100), 160, 150), vertical=bool(rng.integers(2)))
    r.paint(screen, picture, 2)
    rad = max(4, int(5 * s))
    bx = w - 1 - m - 2 * rad if rng.random() < 0.7 else w // 2
    button = _ellipse(r, bx, h - 1 - bottom / 2, rad, rad)
    r.paint(button, _hue_colour(rng, rng.choice([0, 60]), 255, 255), 3)
    return r.sprite()


def remote_control(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(24 * s), int(66 * s)
    r = Canvas(h, w)
    r.paint(_poly(r, [(2, 0), (w - 3, 0), (w - 1, 3), (w - 1, h - 4), (w - 3, h - 1), (2, h - 1), (0, h - 4), (0, 3)]),
            _colour(rng, (35, 35, 40), 15), 2)
    rad = max(3, int(3.4 * s))
    buttons = np.zeros(r.shape(), bool)
    for row in range(3):
        for col in range(2):
            buttons |= _ellipse(r, w * (0.3 + 0.4 * col), h * (0.15 + 0.17 * row), rad, rad)
    top = _colour(rng, (230, 40, 40), 20)
    r.paint(buttons, top, 3)
    return r.sprite()


def mug(rng: np.random.Generator, s: float) -> Sprite:
    bw, bh = int(38 * s), int(44 * s)
    hw = max(9, int(14 * s))
    w = bw + hw
    r = Canvas(bh, w)
    left = bool(rng.integers(2))
    x0 = hw if left else 0
    colour = _hue_colour(rng, None, int(rng.integers(150, 230)), int(rng.integers(170, 240)))
    hx = x0 if left else x0 + bw - 1
    handle = _ellipse(r, hx, bh * 0.45, hw, bh * 0.28, thickness=max(3, int(5 * s)))
    r.paint(handle, (colour * 0.6).astype(np.uint8), 2)
    body = _poly(r, [(x0, 0), (x0 + bw - 1, 0), (x0 + bw - 1, bh - 5), (x0 + bw - 5, bh - 1), (x0 + 4, bh - 1),
                     (x0, bh - 5)])
    tex = np.broadcast_to(colour, (bh, w, 3)).copy()
    if rng.random() < 0.5:  # stripes on some mugs
        tex[:: max(4, int(8 * s))] = (255 - colour) // 2 + 60
    r.paint(body, tex, 3)
    return r.sprite()


def bottle(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(28 * s), int(84 * s)
    r = Canvas(h, w)
    cap_h, neck_h = max(5, int(8 * s)), int(16 * s)
    nw = max(4, w // 4)
    c = w / 2
    body = _poly(r, [(c - nw, cap_h), (c + nw, cap_h), (c + nw, cap_h + neck_h), (w - 1, cap_h + neck_h + 8 * s),
                     (w - 1, h - 1), (0, h - 1), (0, cap_h + neck_h + 8 * s), (c - nw, cap_h + neck_h)])
    glass = _hue_colour(rng, rng.choice([45, 60, 100, 15]), 200, int(rng.integers(110, 170)))
    r.paint(body, _gradient(h, w, glass, (glass * 0.7).astype(np.uint8), vertical=False), 2)
    r.paint(_rect(r, int(c - nw - 1), 0, int(c + nw), cap_h - 1),
            _hue_colour(rng, rng.choice([0, 120, 25]), 230, 230), 3)
    ly0 = int(h * rng.uniform(0.5, 0.58))
    label = _rect(r, 0, ly0, w - 1, ly0 + int(h * 0.22))
    tex = np.broadcast_to(_colour(rng, (240, 235, 215), 12), (h, w, 3)).copy()
    tex[ly0 + int(h * 0.09): ly0 + int(h * 0.13)] = _hue_colour(rng, None, 230, 200)
    r.paint(label, tex, 4)
    return r.sprite()


def knife(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(96 * s), max(12, int(16 * s))
    r = Canvas(h, w)
    hl = int(w * 0.36)
    r.paint(_rect(r, 0, h // 4, hl - 1, h - 1 - h // 4),
            _colour(rng, (95, 55, 25) if rng.random() < 0.6 else (25, 25, 25), 15), 3)
    blade = _poly(r, [(hl, 0), (w - 1 - w * 0.12, 0), (w - 1, h * 0.45), (w - 1 - w * 0.05, h - 1), (hl, h - 1)])
    steel = _colour(rng, (200, 205, 212), 15)
    r.paint(blade, _gradient(h, w, steel, (steel * 0.72).astype(np.uint8)), 2)
    if rng.random() < 0.5:
        return Sprite(r.image[:, ::-1].copy(), r.labels[:, ::-1].copy())
    return r.sprite()


def laptop_computer(rng: np.random.Generator, s: float) -> Sprite:
    w, lid_h, base_h = int(92 * s), int(56 * s), int(28 * s)
    r = Canvas(lid_h + base_h, w)
    shell = _colour(rng, (185, 188, 195), 20)
    inset = int(w * 0.06)
    r.paint(_rect(r, inset, 0, w - 1 - inset, lid_h - 1), shell, OTHER)
    m = max(3, int(4 * s))
    r.paint(_rect(r, inset + m, m, w - 1 - inset - m, lid_h - 1 - m),
            _gradient(lid_h + base_h, w, _colour(rng, (20, 30, 70), 15), _colour(rng, (60, 90, 150), 20)), 2)
    base = _poly(r, [(inset, lid_h), (w - 1 - inset, lid_h), (w - 1, lid_h + base_h - 1), (0, lid_h + base_h - 1)])
    r.paint(base, (shell * 0.9).astype(np.uint8), OTHER)
    ky0, ky1 = lid_h + int(base_h * 0.12), lid_h + int(base_h * 0.52)
    keys = _rect(r, int(w * 0.14), ky0, int(w * 0.86), ky1)
    tex = np.broadcast_to(_colour(rng, (30, 30, 35), 10), (lid_h + base_h, w, 3)).copy()
    tex[:, :: max(3, int(5 * s))] = 90
    tex[ky0::max(3, int(4 * s))] = 90
    r.paint(keys, tex, 3)
    r.paint(_rect(r, int(w * 0.38), ky1 + max(2, int(base_h * 0.1)), int(w * 0.62), lid_h + base_h - 3),
            _colour(rng, (140, 140, 148), 8), 4)
    return r.sprite()


def lamp(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(52 * s), int(92 * s)
    r = Canvas(h, w)
    sh = int(h * 0.34)
    r.paint(_poly(r, [(w * 0.22, 0), (w * 0.78, 0), (w - 1, sh), (0, sh)]), _colour(rng, (250, 225, 150), 15), 2)
    pw = max(2, int(3 * s))
    r.paint(_rect(r, w // 2 - pw, sh + 1, w // 2 + pw, h - 8), _colour(rng, (175, 140, 60), 20), 3)
    r.paint(_ellipse(r, w / 2, h - 6 * s, w * 0.36, max(3, 5 * s)), _colour(rng, (50, 45, 45), 15), 4)
    return r.sprite()


def pan(rng: np.random.Generator, s: float) -> Sprite:
    d = int(54 * s)
    hl = int(48 * s)
    w, h = d + hl, d
    r = Canvas(h, w)
    left = bool(rng.integers(2))
    cx = hl + d / 2 if left else d / 2
    hy = h / 2
    hx0, hx1 = (0, int(hl + 4)) if left else (int(d - 4), w - 1)
    r.paint(_rect(r, hx0, int(hy - 4 * s), hx1, int(hy + 4 * s)), _colour(rng, (20, 20, 20), 10), 3)
    rim = _ellipse(r, cx, h / 2, d / 2 - 1, h / 2 - 1)
    r.paint(rim, _colour(rng, (120, 120, 125), 15), OTHER)
    r.paint(_ellipse(r, cx, h / 2, d / 2 - 4 * s, h / 2 - 4 * s), _colour(rng, (55, 55, 60), 10), 2)
    return r.sprite()


def mouse(rng: np.random.Generator, s: float) -> Sprite:
    w, h = int(30 * s), int(46 * s)
    r = Canvas(h, w)
    shell = _colour(rng, (225, 225, 230) if rng.random() < 0.5 else (70, 70, 80), 15)
    r.paint(_ellipse(r, w / 2, h / 2, w / 2 - 1, h / 2 - 1), shell, 2)
    top = _ellipse(r, w / 2, h / 2, w / 2 - 1, h / 2 - 1) & (np.arange(h)[:, None] < h * 0.42)
    xs = np.arange(w)[None, :]
    r.paint(top & (xs < w / 2 - 1), _colour(rng, (70, 130, 220), 20), 3)
    r.paint(top & (xs > w / 2), _colour(rng, (230, 150, 50), 20), 4)
    r.paint(top & (xs >= w / 2 - 1) & (xs <= w / 2), np.array([20, 20, 20], np.uint8), 2)
    return r.sprite()


CATEGORIES: dict[str, CategorySpec] = {
    spec.name: spec
    for spec in (
        CategorySpec("television_set", ("screen", "button"), ("TV", "television", "TV set")),
        CategorySpec("remote_control", ("body", "button"), ("remote", "remote control")),
        CategorySpec("mug", ("handle", "body"), ("mug", "coffee mug")),
        CategorySpec("bottle", ("body", "cap", "label"), ("bottle",)),
        CategorySpec("knife", ("blade", "handle"), ("knife", "kitchen knife")),
        CategorySpec("laptop_computer", ("screen", "keyboard", "touchpad"), ("laptop", "laptop computer")),
        CategorySpec("lamp", ("shade", "pipe", "base"), ("lamp", "desk lamp")),
        CategorySpec("pan_(for_cooking)", ("bottom", "handle"), ("pan", "frying pan")),
        CategorySpec("mouse_(computer_equipment)", ("body", "left_button", "right_button"),
                     ("mouse", "computer mouse")),
    )
}

RENDERERS: dict[str, Callable[[np.random.Generator, float], Sprite]] = {
    "television_set": television_set,
    "remote_control": remote_control,
    "mug": mug,
    "bottle": bottle,
    "knife": knife,
    "laptop_computer": laptop_computer,
    "lamp": lamp,
    "pan_(for_cooking)": pan,
    "mouse_(computer_equipment)": mouse,
}


def render_sprite(category: str, rng: np.random.Generator, scale: float) -> Sprite:
    """Return a textured instance of ``category`` at ``scale`` (1.0 fits a 256-pixel scene)."""
    sprite = RENDERERS[category](rng, scale)
    noise = rng.normal(0, 6, sprite.image.shape)
    shade = rng.uniform(0.85, 1.12)
    img = np.clip(sprite.image.astype(np.float32) * shade + noise, 0, 255).astype(np.uint8)
    img[~sprite.mask] = 0
    return Sprite(img, sprite.labels)
