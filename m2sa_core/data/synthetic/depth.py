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
Registered depth and camera intrinsics for a synthetic scene, with 3-D ground truth.

A grasp or press planner needs a target's points, surface normal and size; testing the
code that computes them needs a world where those are known exactly. This module gives
every rendered :class:`~m2sa_core.data.synthetic.scene.Scene` a physically consistent
3-D interpretation, without changing a single RGB byte or mask (it draws from its own
rng, never from the one ``render_scene`` used):

* **Camera.** A pinhole camera (REP 103 optical frame: x right, y down, z forward) with
  a horizontal field of view of 55-65 degrees and a principal point within 1 % of the
  image centre; square pixels. Pixel centres are integer coordinates (CameraInfo's).
* **Table.** A plane ``up . P = -height`` below the camera (height 0.45-0.65 m), the
  camera pitched down by 30-42 degrees and rolled by at most 3 degrees, so ``up`` (the
  table's normal, unit, in the optical frame) is ``Rz(roll) (0, -cos pitch, -sin pitch)``.
* **Wall.** A vertical plane facing the camera at the table's far edge: the edge is the
  table point seen at the scene's horizon row (``Layout.horizon``) in the image centre
  column, which is where ``render_scene`` paints the wall/table boundary.
* **Objects.** Each object is a planar standee: a vertical plane (it contains ``up``)
  standing on the table along the bottom row of its complete (amodal) mask, turned by a
  yaw of at most 35 degrees about ``up`` away from facing the camera. Its pixels are the
  rays through its mask meeting that plane, so the sprite's 2-D shape is exactly the
  object's silhouette. Lower objects touch the table nearer the camera, which is the
  order ``render_scene`` draws them in (nearer ones occlude farther ones).
* **Parts.** A part is a patch of its object's face offset along the face normal by a
  relief: a button is raised 3-8 mm, a screen recessed 2-5 mm, ... (:data:`RELIEF_MM`);
  parts without an entry and the object's unlabelled pixels lie on the face itself.

Depth is painted from the visible masks (each pixel belongs to the object whose visible
mask holds it, else to the table or the wall), so depth and masks agree exactly whatever
the draw order; every pixel has a valid depth (sensor artefacts: :mod:`.depth_noise`).

Ground truth per object and part (:class:`SurfaceTruth`) describes the *visible*
surface only - what a camera can measure, and what an amodal target's geometry is
defined from: the exact (float64) 3-D points of its visible pixel centres, their mean
(the centroid), the face normal pointing to the camera, and a box whose z axis is that
normal, x axis the face's horizontal direction (image-right positive), y = z x x (down
the face), centred on the points' min-max mid-range with min-max extents (z extent =
the relief spread, 0 for a flat target).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from m2sa_core.camera import Intrinsics
from m2sa_core.data.synthetic.scene import Scene
from m2sa_core.data.synthetic.shapes import CATEGORIES
import numpy as np

# (low, high) relief in millimetres along the face normal (positive = towards the camera).
RELIEF_MM: dict[str, tuple[float, float]] = {
    "button": (3.0, 8.0),
    "left_button": (1.0, 3.0),
    "right_button": (1.0, 3.0),
    "screen": (-5.0, -2.0),
    "keyboard": (1.0, 3.0),
    "touchpad": (-2.0, -1.0),
    "cap": (2.0, 5.0),
    "label": (0.5, 1.5),
    "handle": (4.0, 10.0),
}
MAX_YAW_DEG = 30.0
LEAN_SHARE = (0.4, 1.1)  # of the lean that would face the camera squarely


def sample_camera(rng: np.random.Generator, width: int, height: int) -> Intrinsics:
    """Return a camera as the module docstring describes it (field of view, principal point)."""
    hfov = np.deg2rad(rng.uniform(55.0, 65.0))
    f = (width / 2.0) / np.tan(hfov / 2.0)
    cx = (width - 1) / 2.0 + rng.uniform(-0.01, 0.01) * width
    cy = (height - 1) / 2.0 + rng.uniform(-0.01, 0.01) * height
    return Intrinsics(float(f), float(f), float(cx), float(cy), int(width), int(height))


@dataclass(frozen=True)
class Table:
    """The table plane ``up . P = -height_m`` and the wall ``forward . P = wall_m``."""

    up: np.ndarray  # (3,) unit, the table's normal in the optical frame
    height_m: float  # camera centre above the table
    pitch_deg: float
    roll_deg: float
    forward: np.ndarray  # (3,) unit, horizontal, the wall's normal pointing away from the camera
    wall_m: float  # horizontal distance from the camera to the wall

    def depth_along(self, rays: np.ndarray) -> np.ndarray:
        """Return z of the first table or wall point along each ray (..., 3) with z = 1."""
        down = rays @ self.up
        with np.errstate(divide="ignore", invalid="ignore"):
            t_table = np.where(down < 0, -self.height_m / down, np.inf)
            ahead = rays @ self.forward
            t_wall = np.where(ahead > 0, self.wall_m / ahead, np.inf)
        return np.minimum(t_table, t_wall)


@dataclass(frozen=True)
class SurfaceTruth:
    """Ground truth of one target's visible surface in the optical frame (metres)."""

    points: np.ndarray  # (N, 3) float64, the exact points of the visible pixel centres
    centroid: np.ndarray  # (3,) their mean
    normal: np.ndarray  # (3,) unit, pointing towards the camera
    box_centre: np.ndarray  # (3,)
    box_axes: np.ndarray  # (3, 3) columns x, y, z (z = normal), right-handed
    extents: np.ndarray  # (3,) along the box axes, min-max of the points

    @property
    def pixels(self) -> int:
        return int(self.points.shape[0])


@dataclass(frozen=True)
class ObjectTruth:
    """One object's face plane, its parts' reliefs, and ground truth per visible surface."""

    contact: np.ndarray  # (3,) where the face stands on the table (bottom centre)
    normal: np.ndarray  # (3,) the face normal, towards the camera
    yaw_deg: float
    lean_deg: float
    relief_m: dict[str, float]  # per part, along ``normal``
    surface: SurfaceTruth | None  # the whole visible object; None if nothing is visible
    parts: dict[str, SurfaceTruth | None] = field(default_factory=dict)


@dataclass(frozen=True)
class SceneDepth:
    """
    A scene's registered depth (float32 metres, H x W), its camera and ground truth.

    ``objects`` follow ``scene.objects`` (same index as a question target's).
    """

    depth: np.ndarray
    camera: Intrinsics
    table: Table
    objects: list[ObjectTruth]
    occlusion_conflicts: int = 0  # pixels where a face is not in front of what it hides (_settle_faces)

    def truth(self, index: int, part: str | None = None) -> SurfaceTruth | None:
        """Ground truth of a question target ``(index, part)``; None when not visible."""
        obj = self.objects[index]
        return obj.parts.get(part) if part else obj.surface

    def visible_targets(self, scene: Scene) -> Iterator[tuple[int, str | None, np.ndarray, SurfaceTruth]]:
        """
        (index, part, visible mask, truth) of every object and part with ground truth, each object before its parts.

        What a test or benchmark measures the geometry on.
        """
        for index, obj in enumerate(scene.objects):
            for part in (None, *obj.parts_visible):
                truth = self.truth(index, part)
                if truth is not None:
                    yield index, part, (obj.parts_visible[part] if part else obj.visible), truth


def _rotation_about(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rodrigues: the 3x3 rotation by ``angle`` radians about unit ``axis``."""
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * (k @ k)


def _sample_table(rng: np.random.Generator, camera: Intrinsics, horizon: int) -> Table:
    pitch, roll = rng.uniform(30.0, 42.0), rng.uniform(-3.0, 3.0)
    height = float(rng.uniform(0.45, 0.65))
    p, r = np.deg2rad(pitch), np.deg2rad(roll)
    up_unrolled = np.array([0.0, -np.cos(p), -np.sin(p)])
    rz = np.array([[np.cos(r), -np.sin(r), 0.0], [np.sin(r), np.cos(r), 0.0], [0.0, 0.0, 1.0]])
    up = rz @ up_unrolled
    forward = np.array([0.0, 0.0, 1.0]) - up[2] * up
    forward /= np.linalg.norm(forward)
    edge_ray = np.array([0.0, (horizon - camera.cy) / camera.fy, 1.0])  # the centre column
    down = float(edge_ray @ up)
    if down >= -1e-3:
        raise ValueError(f"horizon row {horizon} is above the table's vanishing line "
                         f"(pitch {pitch:.1f} deg): the table's far edge would be at infinity")
    edge = edge_ray * (-height / down)
    return Table(up, height, float(pitch), float(roll), forward, float(edge @ forward))


def _truth(points: np.ndarray, normal: np.ndarray, up: np.ndarray) -> SurfaceTruth:
    """Centroid and min-max box of exact surface points (N, 3) on a face with ``normal``."""
    x = np.cross(up, normal)
    x /= np.linalg.norm(x)
    if x[0] < 0:
        x = -x
    y = np.cross(normal, x)
    axes = np.stack([x, y, normal], axis=1)
    coords = points @ axes
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    return SurfaceTruth(points=points, centroid=points.mean(axis=0), normal=normal.copy(),
                        box_centre=axes @ ((lo + hi) / 2), box_axes=axes, extents=hi - lo)


@dataclass
class _Face:
    """One object's face while its pose is being settled (internal)."""

    base_normal: np.ndarray  # (3,) horizontal, facing the camera, perpendicular to the bottom edge
    edge_rays: np.ndarray  # (2, 3) rays through the bottom edge's two ends
    yaw_deg: float
    lean_deg: float
    reliefs: dict[str, float]

    def plane(self, table: Table) -> tuple[np.ndarray, float, np.ndarray]:
        """
        Return (normal, d, contact): the face ``normal . P = d`` resting on the table.

        The face is turned by the yaw about ``up``, leant back by the lean (0 = upright,
        90 = lying on the table) and pushed back until the lower end of its bottom edge
        touches the table (the other end floats above it when turned: a standee on a
        thin stand); ``contact`` is that touching point.
        """
        turned = _rotation_about(table.up, np.deg2rad(self.yaw_deg)) @ self.base_normal
        lean = np.deg2rad(self.lean_deg)
        normal = np.cos(lean) * turned + np.sin(lean) * table.up
        slope = (self.edge_rays @ table.up) / (self.edge_rays @ normal)  # > 0 for both ends
        j = int(np.argmax(slope))
        d = -table.height_m / float(slope[j])
        return normal, d, self.edge_rays[j] * (d / float(self.edge_rays[j] @ normal))


def _face(obj, camera: Intrinsics, table: Table, yaw_deg: float, lean_share: float,
          reliefs: dict[str, float]) -> _Face | None:
    """
    Return the face of ``obj`` standing on its mask's bottom edge.

    Its lean is ``lean_share`` of the angle at which it would face the camera squarely
    (the view ray's depression).
    """
    rows = np.flatnonzero(obj.amodal.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(obj.amodal.any(axis=0))
    v = (rows[-1] + 0.5 - camera.cy) / camera.fy  # the bottom edge of the lowest pixel row
    ends = np.array([[(cols[0] - 0.5 - camera.cx) / camera.fx, v, 1.0],
                     [(cols[-1] + 0.5 - camera.cx) / camera.fx, v, 1.0]])
    on_table = ends * (-table.height_m / (ends @ table.up))[:, None]
    along = on_table[1] - on_table[0]
    normal = np.cross(table.up, along / np.linalg.norm(along))
    if normal @ on_table[0] > 0:
        normal = -normal
    middle = on_table.mean(axis=0)
    depression = np.degrees(np.arcsin(float(-(middle / np.linalg.norm(middle)) @ table.up)))
    return _Face(normal, ends, yaw_deg, float(np.clip(lean_share * depression, 0.0, 80.0)), reliefs)


def _offsets(masks: dict[str, np.ndarray], reliefs: dict[str, float], shape: tuple[int, int]) -> np.ndarray:
    offset = np.zeros(shape)
    for part, mask in masks.items():
        offset[mask] = reliefs[part]
    return offset


def _face_depth(face: _Face, table: Table, rays: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Return z along ``rays`` (N, 3) of the face shifted by ``offset`` (N,) along its normal."""
    normal, d, _ = face.plane(table)
    return (d + offset) / (rays @ normal)


def _conflicts(scene: Scene, faces: list[_Face | None], table: Table, rays: np.ndarray,
               background: np.ndarray) -> tuple[int, set[int]]:
    """
    (pixels, objects) where a face is not where the masks say.

    Behind what it occludes, or behind the table / wall (a top leant back through the
    wall).
    """
    shape = scene.image.shape[:2]
    bad: set[int] = set()
    pixels = 0
    for a, oa in enumerate(scene.objects):
        fa = faces[a]
        if fa is None or not oa.visible.any():
            continue
        offset_a = _offsets(oa.parts_visible, fa.reliefs, shape)
        behind = int((_face_depth(fa, table, rays[oa.visible], offset_a[oa.visible]) > background[oa.visible]).sum())
        if behind:
            pixels += behind
            bad.add(a)
        for b, ob in enumerate(scene.objects):
            fb = faces[b]
            hidden = oa.visible & ob.amodal
            if a == b or fb is None or not hidden.any():
                continue
            za = _face_depth(fa, table, rays[hidden], offset_a[hidden])
            zb = _face_depth(fb, table, rays[hidden], _offsets(ob.parts_amodal, fb.reliefs, shape)[hidden])
            n = int((za > zb).sum())
            if n:
                pixels += n
                bad.update((a, b))
    return pixels, bad


def _settle_faces(scene: Scene, faces: list[_Face | None], table: Table, rays: np.ndarray,
                  background: np.ndarray, rounds: int = 6) -> int:
    """
    Turn and raise faces back towards upright-facing-the-camera until the masks' story holds.

    The masks fix who occludes whom; two turned or leant faces standing close may cross,
    and a face leant far back may go through the wall. Every face in a conflict has its
    yaw and lean halved, ``rounds`` times; if conflicts remain, every face stands upright
    facing the camera, and faces still in conflict (a raised part of a face a few mm
    behind another) lose their reliefs; what remains is a mask whose bottom row disagrees
    with the draw order. Returns the pixels still in conflict.
    """
    for _ in range(rounds):
        pixels, bad = _conflicts(scene, faces, table, rays, background)
        if not bad:
            return 0
        for k in bad:
            face = faces[k]
            assert face is not None
            face.yaw_deg, face.lean_deg = face.yaw_deg / 2, face.lean_deg / 2
    pixels, bad = _conflicts(scene, faces, table, rays, background)
    if bad:
        for face in faces:
            if face is not None:
                face.yaw_deg, face.lean_deg = 0.0, 0.0
        pixels, bad = _conflicts(scene, faces, table, rays, background)
    for k in bad:  # faces a few mm apart: a raised part of the one behind pokes through
        face = faces[k]
        assert face is not None
        face.reliefs = dict.fromkeys(face.reliefs, 0.0)
    if bad:
        pixels, _ = _conflicts(scene, faces, table, rays, background)
    return pixels


def render_depth(scene: Scene, rng: np.random.Generator, horizon: int | None = None,
                 camera: Intrinsics | None = None) -> SceneDepth:
    """
    Render registered depth, intrinsics and 3-D ground truth for ``scene`` (see the module doc).

    ``horizon``: the wall/table boundary row (``Layout.horizon``); None puts the table's
    far edge at 30 % of the height, the top of ``render_scene``'s range. ``camera``: the
    intrinsics to use (drawn from ``rng`` when None), of the scene's image size. The draws
    from ``rng``: camera, table, then per object in ``scene.objects`` order its yaw and its
    parts' reliefs in the category's part order - so one seed gives one geometry.
    """
    height, width = scene.image.shape[:2]
    camera = camera or sample_camera(rng, width, height)
    if (camera.height, camera.width) != (height, width):
        raise ValueError(f"camera is {camera.width}x{camera.height} but the scene is {width}x{height}")
    table = _sample_table(rng, camera, int(round(0.3 * height)) if horizon is None else int(horizon))
    rays = camera.rays()
    depth = table.depth_along(rays)
    faces: list[_Face | None] = []
    for obj in scene.objects:
        yaw = float(rng.uniform(-MAX_YAW_DEG, MAX_YAW_DEG))
        lean_share = float(rng.uniform(*LEAN_SHARE))
        reliefs = {}
        for part in CATEGORIES[obj.category].parts:
            lo, hi = RELIEF_MM.get(part, (0.0, 0.0))
            reliefs[part] = (float(rng.uniform(lo, hi)) if hi > lo else lo) / 1000.0
        faces.append(_face(obj, camera, table, yaw, lean_share, reliefs))
    conflicts = _settle_faces(scene, faces, table, rays, depth)
    objects = []
    for obj, face in zip(scene.objects, faces):
        if face is None:
            nan = np.full(3, np.nan)
            objects.append(ObjectTruth(nan, nan, 0.0, 0.0, {}, None, dict.fromkeys(obj.parts_visible)))
            continue
        normal, _, contact = face.plane(table)
        vs, us = np.nonzero(obj.visible)
        r = rays[vs, us]
        z = _face_depth(face, table, r, _offsets(obj.parts_visible, face.reliefs, (height, width))[vs, us])
        depth[vs, us] = z
        points = r * z[:, None]
        surface = _truth(points, normal, table.up) if z.size else None
        index = np.full((height, width), -1, np.int64)
        index[vs, us] = np.arange(vs.size)
        parts: dict[str, SurfaceTruth | None] = {}
        for part, mask in obj.parts_visible.items():  # a visible part lies inside ``visible``
            sel = index[mask]
            parts[part] = _truth(points[sel], normal, table.up) if sel.size else None
        objects.append(ObjectTruth(contact, normal, face.yaw_deg, face.lean_deg, dict(face.reliefs), surface, parts))
    return SceneDepth(depth.astype(np.float32), camera, table, objects, conflicts)
