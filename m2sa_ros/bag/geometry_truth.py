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
The 3-D ground truth of a bag with depth: ``BAG/geometry_ground_truth.json``.

A bag recorded with depth (``m2sa-bag make``, the default for synthetic data) holds a
registered depth image and a camera_info beside each colour image, and this sidecar says
what the node should measure from them: per command (in bag order, as
``ground_truth.json``) and per target (in answer order), the *visible* surface's
centroid, normal (towards the camera), oriented box (centre, axes as columns, extents)
and its support points (the convex hull's vertices: what the size error needs of the
true points, ``m2sa_core.evaluation.geometry_errors``), in the colour camera's optical
frame, metres. A target with nothing visible has ``null``. A tracking bag
(``m2sa-bag make --sequences``) has the same per target, per sequence and per frame of
it (``sequences``), since its targets move.

A file of its own (format ``m2sa_ros/bag_geometry_ground_truth``, version 1) rather than
new keys in ``ground_truth.json``: readers of version 1 build their targets from every
key and would refuse unknown ones, and a bag without depth simply has no such file.

Reading is lenient by entry: a malformed target or command entry becomes one line in
``problems`` and that entry is left out of the 3-D scores; the masks are scored as ever.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from m2sa_ros.bag.ground_truth import (
    BagError,
    check_sidecar_header,
    read_sidecar_json,
    sidecar_to_load,
    write_sidecar_json,
)
import numpy as np

GEOMETRY_GROUND_TRUTH_FILE = "geometry_ground_truth.json"
GEOMETRY_GROUND_TRUTH_FORMAT = "m2sa_ros/bag_geometry_ground_truth"
GEOMETRY_GROUND_TRUTH_VERSION = 1
DEPTH_TOPIC = "/camera/depth_registered/image_raw"
CAMERA_INFO_TOPIC = "/camera/camera_info"
_DIGITS = 6  # micrometres: far below any depth sensor's error, and a readable file


@dataclass(frozen=True)
class TargetGeometryTruth:
    """One target's visible surface (optical frame, metres)."""

    centroid: np.ndarray  # (3,)
    normal: np.ndarray  # (3,) unit, towards the camera
    box_centre: np.ndarray  # (3,)
    box_axes: np.ndarray  # (3, 3) columns x, y, z (z = normal)
    extents: np.ndarray  # (3,)
    support: np.ndarray  # (M, 3) convex-hull vertices of the visible points
    pixels: int

    def to_json(self) -> dict[str, Any]:
        def rounded(a: np.ndarray) -> Any:
            return np.round(np.asarray(a, np.float64), _DIGITS).tolist()

        return {"centroid": rounded(self.centroid), "normal": rounded(self.normal),
                "box_centre": rounded(self.box_centre), "box_axes": rounded(self.box_axes),
                "extents": rounded(self.extents), "support_points": rounded(self.support), "pixels": int(self.pixels)}

    @classmethod
    def from_json(cls, data: Any) -> "TargetGeometryTruth":
        """Parse one entry; ValueError saying which key is wrong."""
        if not isinstance(data, dict):
            raise ValueError(f"expected an object, got {type(data).__name__}")

        def array(key: str, shape: tuple[int, ...]) -> np.ndarray:
            if key not in data:
                raise ValueError(f"missing '{key}'")
            try:
                value = np.asarray(data[key], dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"'{key}' is not numbers") from exc
            if value.ndim != len(shape) or any(s != -1 and s != v for s, v in zip(shape, value.shape)):
                raise ValueError(f"'{key}' has shape {value.shape}, expected {shape}".replace("-1", "N"))
            if not np.isfinite(value).all():
                raise ValueError(f"'{key}' is not finite")
            return value

        support = array("support_points", (-1, 3))
        if not len(support):
            raise ValueError("'support_points' is empty")
        return cls(array("centroid", (3,)), array("normal", (3,)), array("box_centre", (3,)),
                   array("box_axes", (3, 3)), array("extents", (3,)), support, int(data.get("pixels", 0)))


@dataclass
class FrameCamera:
    """The intrinsics recorded for one frame (what its camera_info says)."""

    k: list[float]
    width: int
    height: int


@dataclass
class GeometryGroundTruth:
    """The sidecar: topics, how depth was recorded, per frame its camera, per command its targets."""

    depth_topic: str = DEPTH_TOPIC
    camera_info_topic: str = CAMERA_INFO_TOPIC
    encoding: str = "32FC1"
    # "" = sensor_msgs/Image; "png" or "rvl": image_transport's compressedDepth (a CompressedImage
    # on depth_topic, <raw topic>/compressedDepth) with that codec (m2sa_ros/depth/compressed_depth.py).
    depth_codec: str = ""
    artefacts: dict[str, Any] = field(default_factory=dict)
    generator: dict[str, Any] = field(default_factory=dict)
    frames: dict[int, FrameCamera] = field(default_factory=dict)
    # per command index: per target, its truth (None: nothing visible, or malformed)
    commands: dict[int, list[TargetGeometryTruth | None]] = field(default_factory=dict)
    # tracking bags: per sequence index, per frame of it, per target, its truth
    sequences: dict[int, list[list[TargetGeometryTruth | None]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # malformed entries, one line each

    def to_json(self) -> dict[str, Any]:
        return {"format": GEOMETRY_GROUND_TRUTH_FORMAT, "version": GEOMETRY_GROUND_TRUTH_VERSION,
                "depth_topic": self.depth_topic, "camera_info_topic": self.camera_info_topic,
                "encoding": self.encoding, **({"depth_codec": self.depth_codec} if self.depth_codec else {}),
                "artefacts": self.artefacts, "generator": self.generator,
                "frames": {str(k): {"k": list(v.k), "width": v.width, "height": v.height}
                           for k, v in sorted(self.frames.items())},
                "commands": [{"index": i, "targets": _targets_json(targets)}
                             for i, targets in sorted(self.commands.items())],
                **({"sequences": [{"index": k, "frames": [_targets_json(targets) for targets in frames]}
                                  for k, frames in sorted(self.sequences.items())]} if self.sequences else {})}

    def save(self, path: str | Path) -> Path:
        return write_sidecar_json(path, self.to_json())

    @classmethod
    def from_json(cls, data: Any, where: str = "geometry ground truth") -> "GeometryGroundTruth":
        """Parse a sidecar: a bad header is a BagError; a bad entry is one line in ``problems``."""
        check_sidecar_header(data, GEOMETRY_GROUND_TRUTH_FORMAT, GEOMETRY_GROUND_TRUTH_VERSION,
                             "geometry ground-truth", where)
        truth = cls(depth_topic=str(data.get("depth_topic", DEPTH_TOPIC)),
                    camera_info_topic=str(data.get("camera_info_topic", CAMERA_INFO_TOPIC)),
                    encoding=str(data.get("encoding", "32FC1")), depth_codec=str(data.get("depth_codec", "")),
                    artefacts=dict(data.get("artefacts") or {}),
                    generator=dict(data.get("generator") or {}))
        frames = data.get("frames") or {}
        for stamp, entry in (frames.items() if isinstance(frames, dict) else ()):
            try:
                truth.frames[int(stamp)] = FrameCamera([float(v) for v in entry["k"]], int(entry["width"]),
                                                       int(entry["height"]))
            except (TypeError, ValueError, KeyError) as exc:
                truth.problems.append(f"{where}: frame {stamp}: malformed camera entry ({exc})")
        commands = data.get("commands")
        for n, entry in enumerate(commands if isinstance(commands, list) else ()):
            try:
                index = int(entry["index"])
                raw_targets = entry["targets"]
                if not isinstance(raw_targets, list):
                    raise TypeError("'targets' is not a list")
            except (TypeError, ValueError, KeyError) as exc:
                truth.problems.append(f"{where}: command entry {n}: malformed ({exc}); not scored in 3-D")
                continue
            truth.commands[index] = _targets_from_json(raw_targets, f"{where}: command {index}", truth.problems)
        sequences = data.get("sequences")
        for n, entry in enumerate(sequences if isinstance(sequences, list) else ()):
            try:
                index = int(entry["index"])
                raw_frames = entry["frames"]
                if not isinstance(raw_frames, list) or not all(isinstance(f, list) for f in raw_frames):
                    raise TypeError("'frames' is not a list of target lists")
            except (TypeError, ValueError, KeyError) as exc:
                truth.problems.append(f"{where}: sequence entry {n}: malformed ({exc}); not scored in 3-D")
                continue
            truth.sequences[index] = [_targets_from_json(raw, f"{where}: sequence {index} frame {t}", truth.problems)
                                      for t, raw in enumerate(raw_frames)]
        return truth

    @classmethod
    def load(cls, path: str | Path) -> "GeometryGroundTruth":
        return cls.from_json(read_sidecar_json(path, "geometry ground truth"), str(path))


def _targets_json(targets: list[TargetGeometryTruth | None]) -> list[Any]:
    return [None if t is None else t.to_json() for t in targets]


def _targets_from_json(raw_targets: list[Any], where: str, problems: list[str]) -> list[TargetGeometryTruth | None]:
    """One command's (or frame's) targets; a malformed one is None and one line in ``problems``."""
    targets: list[TargetGeometryTruth | None] = []
    for t, raw in enumerate(raw_targets):
        try:
            targets.append(None if raw is None else TargetGeometryTruth.from_json(raw))
        except ValueError as exc:
            problems.append(f"{where} target {t}: malformed ({exc}); not scored in 3-D")
            targets.append(None)
    return targets


def geometry_ground_truth_path(bag: str | Path) -> Path:
    """Where the geometry sidecar of ``bag`` lives."""
    return Path(bag) / GEOMETRY_GROUND_TRUTH_FILE


def load_geometry_ground_truth(bag: str | Path, override: str | Path | None = None) -> GeometryGroundTruth | None:
    """Return the bag's geometry sidecar (or ``override``); None for a bag without depth ground truth."""
    path = sidecar_to_load(bag, GEOMETRY_GROUND_TRUTH_FILE, override)
    return None if path is None else GeometryGroundTruth.load(path)


__all__ = ["BagError", "CAMERA_INFO_TOPIC", "DEPTH_TOPIC", "FrameCamera", "GeometryGroundTruth",
           "TargetGeometryTruth", "geometry_ground_truth_path", "load_geometry_ground_truth"]
