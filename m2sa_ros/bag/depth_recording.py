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
Depth beside the colour images of a bag: what the recorder adds, and the 3-D ground truth.

For every frame of a bag planned from synthetic data (``m2sa_core.data.synthetic``), the
recorder writes, with the colour image's header stamp and frame_id (so the node binds
them to that frame):

* a registered depth image (sensor_msgs/Image, ``32FC1`` metres, NaN = no depth; or
  ``16UC1`` millimetres, 0 = no depth, with ``--depth-encoding 16UC1``) on
  ``/camera/depth_registered/image_raw``; or, with ``--compressed-depth png|rvl``, that
  image as image_transport's compressedDepth writes it (sensor_msgs/CompressedImage on
  ``/camera/depth_registered/image_raw/compressedDepth``, m2sa_ros/depth/compressed_depth.py:
  16UC1 lossless, 32FC1 quantised to inverse depth, as robots record depth to keep bags
  small);
* a sensor_msgs/CameraInfo on ``/camera/camera_info``: K of the synthetic camera
  (plumb_bob, no distortion, P = [K | 0]);

and ``geometry_ground_truth.json`` (``m2sa_ros.bag.geometry_truth``) with each command's
targets' visible-surface truth. Depth is rebuilt from the dataset's generator and checked
against the PNG (``m2sa_core.data.synthetic.dataset_depth``); data from elsewhere has
no depth and the bag is written without it, with a one-line note.

**Sensor artefacts** (``--depth-artefacts``): a real registered depth image has holes,
range noise and mixed pixels at object borders, and a node scored on perfect depth says
little about a robot. The default, ``mild``, is a good RealSense-class camera at table
range: 2 % holes, noise of 1 mm + 0.1 % of the range, and a 1-px ring of mixed pixels
round every visible object; ``strong`` is what tests/core/test_target_geometry.py stresses
the geometry with (20 % holes, 3 mm, 2-px ring); ``none`` is the clean render. The
artefacts are drawn from the image's own stream, so a bag is reproducible, and the
ground truth is always the clean geometry.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
import sys
from typing import Any, Callable

from m2sa_ros.bag.geometry_truth import FrameCamera, GeometryGroundTruth, TargetGeometryTruth
import numpy as np

DEPTH_ENCODINGS = ("32FC1", "16UC1")
DEPTH_CODECS = ("", "png", "rvl")  # "": sensor_msgs/Image; else compressedDepth with that codec
DEPTH_TYPE = "sensor_msgs/msg/Image"
COMPRESSED_DEPTH_TYPE = "sensor_msgs/msg/CompressedImage"
COMPRESSED_DEPTH_SUFFIX = "/compressedDepth"  # image_transport's topic beside the raw one
CAMERA_INFO_TYPE = "sensor_msgs/msg/CameraInfo"


@dataclass(frozen=True)
class Artefacts:
    """Sensor artefacts added to the clean depth (``m2sa_core.data.synthetic.depth_noise``)."""

    holes: float  # share of pixels without depth
    sigma_m: float  # range noise: sigma = sigma_m + per_metre * z
    per_metre: float
    bleed_px: int  # mixed-pixel ring round each visible object (0: none)


ARTEFACT_LEVELS: dict[str, Artefacts | None] = {
    "none": None,
    "mild": Artefacts(holes=0.02, sigma_m=0.001, per_metre=0.001, bleed_px=1),
    "strong": Artefacts(holes=0.2, sigma_m=0.003, per_metre=0.0, bleed_px=2),
}
DEFAULT_ARTEFACTS = "mild"


@dataclass(frozen=True)
class DepthOptions:
    """
    How depth is recorded.

    ``encoding`` one of DEPTH_ENCODINGS, ``artefacts`` a key of ARTEFACT_LEVELS, ``codec`` ""
    (sensor_msgs/Image) or a compressedDepth codec (png, rvl).
    """

    encoding: str = "32FC1"
    artefacts: str = DEFAULT_ARTEFACTS
    codec: str = ""

    def check(self) -> None:
        from m2sa_ros.bag.ground_truth import BagError

        if self.encoding not in DEPTH_ENCODINGS:
            raise BagError(f"depth encoding must be one of {', '.join(DEPTH_ENCODINGS)}, got {self.encoding!r}")
        if self.artefacts not in ARTEFACT_LEVELS:
            raise BagError(f"depth artefacts must be one of {', '.join(ARTEFACT_LEVELS)}, got {self.artefacts!r}")
        if self.codec not in DEPTH_CODECS:
            raise BagError(f"compressedDepth codec must be png or rvl, got {self.codec!r}")

    @property
    def depth_topic(self) -> str:
        """Where the depth goes: the raw topic, or image_transport's compressedDepth beside it."""
        from m2sa_ros.bag.geometry_truth import DEPTH_TOPIC

        return DEPTH_TOPIC + COMPRESSED_DEPTH_SUFFIX if self.codec else DEPTH_TOPIC


@dataclass
class PlannedDepth:
    """The depth and camera_info of one frame: rendered only when written."""

    stamp_ns: int
    frame_id: str
    camera: FrameCamera
    load: Callable[[], np.ndarray]  # float32 metres (H, W), NaN = no depth


def sensor_depth(scene: Any, clean: np.ndarray, artefacts: Artefacts | None, rng: np.random.Generator) -> np.ndarray:
    """Return the clean depth with ``artefacts``: mixed pixels round each visible object, then noise, then holes."""
    from m2sa_core.data.synthetic.depth_noise import add_holes, add_noise, bleed_edges

    depth = np.array(clean, dtype=np.float32, copy=True)
    if artefacts is None:
        return depth
    if artefacts.bleed_px > 0:
        for obj in scene.objects:
            depth = bleed_edges(depth, obj.visible, rng, width_px=artefacts.bleed_px)
    depth = add_noise(depth, rng, artefacts.sigma_m, artefacts.per_metre)
    return add_holes(depth, rng, artefacts.holes)


def _target_truth(truth: Any) -> TargetGeometryTruth:
    from m2sa_core.evaluation.geometry_errors import support_points

    return TargetGeometryTruth(truth.centroid, truth.normal, truth.box_centre, truth.box_axes, truth.extents,
                               support_points(truth.points), truth.pixels)


def scene_target(scene: Any, target: Any) -> tuple[int, str | None] | None:
    """
    Return (object index, part or None) of a question target in ``scene``; None when none matches.

    Found by its category, instance and part name (how the synthetic world labels them).
    """
    for index, obj in enumerate(scene.objects):
        if obj.category == target.object_name and obj.instance == int(target.instance):
            part = target.part_name or None
            if part is None or part in obj.parts_visible or part in obj.parts_amodal:
                return index, part
    return None


def _generator_dirs(records: Sequence[Any], data_dirs: Sequence[Path]) -> list[Path]:
    dirs = [Path(d) for d in data_dirs]
    for record in records:
        for d in (Path(record.image_path).parent.parent, Path(record.image_path).parent):
            if d not in dirs:
                dirs.append(d)
    return dirs


def plan_depth(plan: Any, records: Sequence[Any], options: DepthOptions = DepthOptions(),
               data_dirs: Sequence[str | Path] = (), frame_id: str | None = None) -> list[str]:
    """
    Add depth, camera_info and the geometry sidecar to ``plan``; return notes on what got no depth.

    ``plan`` is a bag_io.BagPlan made by ``plan_from_records(records)``; the notes are one
    line each, with the reason.

    Frames whose picture is not the synthetic world's get no depth (their commands no 3-D
    truth); when no frame has depth, ``plan`` is left as it was.
    """
    from m2sa_core.data.synthetic.dataset_depth import find_generator, image_index, matching_scene_depth

    options.check()
    truth = plan.ground_truth
    if len(records) != len(truth.commands):
        raise ValueError(f"plan_depth: {len(records)} records for {len(truth.commands)} planned commands")
    generator = None
    for directory in _generator_dirs(records, [Path(d) for d in data_dirs]):
        generator = find_generator(directory)
        if generator is not None:
            break
    if generator is None:
        return ["no depth: the data has no synthetic generator header (r2sm_test.json, ...) to rebuild it from"]
    # plan_from_records groups the records by image, in first-seen order: the same order here.
    by_image: dict[str, list[Any]] = {}
    for record in records:
        by_image.setdefault(str(record.image_path), []).append(record)
    in_plan_order = [r for group in by_image.values() for r in group]
    for command, record in zip(truth.commands, in_plan_order):
        if command.command != record.question:
            raise ValueError(f"plan_depth: command {command.index} is '{command.command}' but its record asks "
                             f"'{record.question}': the plan was not made from these records")
    record_of_frame = {c.image_stamp_ns: in_plan_order[c.index] for c in reversed(truth.commands)}
    frame_ids = {f.stamp_ns: f.frame_id for f in plan.frames}
    artefacts = ARTEFACT_LEVELS[options.artefacts]
    geometry = GeometryGroundTruth(encoding=options.encoding, depth_topic=options.depth_topic,
                                   depth_codec=options.codec,
                                   artefacts={"level": options.artefacts,
                                              **(asdict(artefacts) if artefacts else {})},
                                   generator={"seed": generator.seed, "size": generator.size})
    notes: list[str] = []
    scenes: dict[int, Any] = {}
    depths: list[PlannedDepth] = []
    for stamp, record in sorted(record_of_frame.items()):
        found = matching_scene_depth(generator, Path(record.image_path).name, record.load_image())
        if isinstance(found, str):
            notes.append(f"no depth for frame {stamp}: {found}")
            continue
        scene, sd = found
        scenes[stamp] = (scene, sd)
        camera = FrameCamera(list(sd.camera.k), sd.camera.width, sd.camera.height)
        geometry.frames[stamp] = camera
        index = image_index(Path(record.image_path).name)
        depths.append(PlannedDepth(stamp, frame_id or frame_ids.get(stamp, ""), camera,
                                   _depth_loader(generator, index, options.artefacts)))
    if not depths:
        return notes
    for command in truth.commands:
        if command.image_stamp_ns not in scenes:
            continue
        scene, sd = scenes[command.image_stamp_ns]
        targets: list[TargetGeometryTruth | None] = []
        for target in command.targets:
            where = scene_target(scene, target)
            surface = None if where is None else sd.truth(*where)
            if where is None:
                notes.append(f"command {command.index}: target '{target.label}' is not in its scene; "
                             "no 3-D truth for it")
            targets.append(None if surface is None else _target_truth(surface))
        geometry.commands[command.index] = targets
    plan.depth = depths
    plan.geometry = geometry
    return notes


def plan_sequence_depth(plan: Any, tracking: Any, sequences: Sequence[Any], seed: int,
                        options: DepthOptions = DepthOptions()) -> None:
    """
    Add depth, camera_info and the per-frame geometry sidecar to a tracking bag's ``plan``.

    The plan is ``sequences.plan_from_sequences(sequences)``, whose ground truth is ``tracking``.

    Sequence ``k``'s world is drawn from ``(seed, k, DEPTH_STREAM)`` for all its frames
    (``m2sa_core.data.synthetic.sequence_depth``), frame ``t``'s artefacts from
    ``(seed, k, t, ARTEFACT_STREAM)``; depth is rendered when the bag is written.
    """
    from m2sa_core.data.synthetic.dataset_depth import ARTEFACT_STREAM, DEPTH_STREAM
    from m2sa_core.data.synthetic.sequence_depth import sequence_depths

    options.check()
    if len(sequences) != len(tracking.sequences):
        raise ValueError(f"plan_sequence_depth: {len(sequences)} sequences for {len(tracking.sequences)} planned")
    artefacts = ARTEFACT_LEVELS[options.artefacts]
    geometry = GeometryGroundTruth(encoding=options.encoding, depth_topic=options.depth_topic,
                                   depth_codec=options.codec,
                                   artefacts={"level": options.artefacts, **(asdict(artefacts) if artefacts else {})},
                                   generator=dict(tracking.generator or {}, seed=seed))
    frame_ids = {f.stamp_ns: f.frame_id for f in plan.frames}
    depths: list[PlannedDepth] = []
    for sequence, entry in zip(sequences, tracking.sequences):
        k = entry.index
        question = sequence.questions[k % len(sequence.questions)]
        per_frame = sequence_depths(sequence, (seed, k, DEPTH_STREAM))
        frames_truth: list[list[TargetGeometryTruth | None]] = []
        for t, (scene, sd, planned) in enumerate(zip(sequence.frames, per_frame, entry.frames)):
            camera = FrameCamera(list(sd.camera.k), sd.camera.width, sd.camera.height)
            geometry.frames[planned.image_stamp_ns] = camera
            rng_seed = (seed, k, t, ARTEFACT_STREAM)
            depths.append(PlannedDepth(planned.image_stamp_ns, frame_ids.get(planned.image_stamp_ns, ""), camera,
                                       _sensor_loader(scene, sd.depth, artefacts, rng_seed)))
            truths = [sd.truth(index, part or None) for index, part in question.targets]
            frames_truth.append([None if truth is None else _target_truth(truth) for truth in truths])
        geometry.sequences[k] = frames_truth
        # The ordinary sidecar holds sequence k's command on its first frame, as command k
        # (plan_from_sequences): the same truth, so a command-by-command replay of a
        # tracking bag is scored in 3-D too.
        geometry.commands[k] = frames_truth[0]
    plan.depth = depths
    plan.geometry = geometry


def _sensor_loader(scene: Any, clean: np.ndarray, artefacts: Artefacts | None,
                   seed: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """``clean`` with ``artefacts`` drawn from ``seed``'s own stream, when called (at write time)."""
    return lambda: sensor_depth(scene, clean, artefacts, np.random.default_rng(np.random.SeedSequence(list(seed))))


def _depth_loader(generator: Any, index: int, level: str) -> Callable[[], np.ndarray]:
    """Render image ``index``'s depth with the artefacts of ``level`` when called (at write time)."""

    def load() -> np.ndarray:
        from m2sa_core.data.synthetic.dataset_depth import ARTEFACT_STREAM, scene_depth

        scene, sd = scene_depth(generator, index)
        rng = np.random.default_rng(np.random.SeedSequence([generator.seed, index, ARTEFACT_STREAM]))
        return sensor_depth(scene, sd.depth, ARTEFACT_LEVELS[level], rng)

    return load


# --------------------------------------------------------------------------- messages
def depth_message(store: Any, header: Any, depth_m: np.ndarray, encoding: str) -> Any:
    """Return a rosbags sensor_msgs/Image of float metres: 32FC1 (NaN kept) or 16UC1 millimetres (0 = none)."""
    from m2sa_core.geometry.depth_encoding import to_16uc1

    Image = store.types[DEPTH_TYPE]
    height, width = depth_m.shape
    if encoding == "16UC1":
        data = to_16uc1(depth_m).astype("<u2")
    else:
        data = np.ascontiguousarray(depth_m, dtype="<f4")
    return Image(header=header, height=height, width=width, encoding=encoding, is_bigendian=0,
                 step=width * data.itemsize, data=data.reshape(-1).view(np.uint8))


def compressed_depth_message(store: Any, header: Any, depth_m: np.ndarray, encoding: str, codec: str) -> Any:
    """
    Return a rosbags sensor_msgs/CompressedImage of float metres.

    As compressed_depth_image_transport's publisher writes it with its defaults
    (m2sa_ros.depth.compressed_depth): 16UC1 millimetres lossless, 32FC1 metres quantised to
    inverse depth (depth_max 10 m, depth_quantization 100).
    """
    from m2sa_core.geometry.depth_encoding import to_16uc1
    from m2sa_ros.depth.compressed_depth import encode_compressed_depth

    CompressedImage = store.types[COMPRESSED_DEPTH_TYPE]
    image = to_16uc1(depth_m) if encoding == "16UC1" else np.ascontiguousarray(depth_m, dtype=np.float32)
    fmt, data = encode_compressed_depth(image, encoding, codec)
    return CompressedImage(header=header, format=fmt, data=np.frombuffer(data, np.uint8))


def depth_entry(store: Any, header: Any, depth_m: np.ndarray, encoding: str, codec: str = "") -> tuple[Any, str]:
    """(message, its type) of one frame's depth as the bag records it: Image, or compressedDepth with ``codec``."""
    if codec:
        return compressed_depth_message(store, header, depth_m, encoding, codec), COMPRESSED_DEPTH_TYPE
    return depth_message(store, header, depth_m, encoding), DEPTH_TYPE


def camera_info_message(store: Any, header: Any, camera: FrameCamera) -> Any:
    """Return a rosbags sensor_msgs/CameraInfo of a pinhole camera without distortion (P = [K | 0])."""
    CameraInfo = store.types[CAMERA_INFO_TYPE]
    RegionOfInterest = store.types["sensor_msgs/msg/RegionOfInterest"]
    k = np.asarray(camera.k, np.float64)
    p = np.zeros(12)
    p[[0, 1, 2, 4, 5, 6, 10]] = [k[0], k[1], k[2], k[3], k[4], k[5], 1.0]
    return CameraInfo(header=header, height=camera.height, width=camera.width, distortion_model="plumb_bob",
                      d=np.zeros(5), k=k, r=np.eye(3).reshape(-1), p=p, binning_x=0, binning_y=0,
                      roi=RegionOfInterest(x_offset=0, y_offset=0, height=0, width=0, do_rectify=False))


def print_notes(notes: Sequence[str], prog: str = "m2sa-bag") -> None:
    """Print the recorder's notes on stderr, one line each."""
    for note in notes:
        print(f"{prog}: {note}", file=sys.stderr)
