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
The perception node's parameters: one table for names, defaults, docs and checks.

Declaring (the node, with ranges and read-only marks in the descriptors) and validating
(at configure and on every ``ros2 param set``) read :data:`PARAMETERS`; the shipped
config/perception.yaml and the parameter table of docs/ROS_INTERFACE.md are written by hand
and checked against it (tests/ros/test_launch_files.py: keys, values, types, defaults, when
each applies, ranges), so they cannot drift apart. Validation is plain Python, testable
without ROS, and reports every bad value with its name and the accepted range, because a
lifecycle transition that fails with only "configure failed" sends a user to the source code.

Each parameter is either *runtime* (thresholds, ages, the overlay, depth matching: the
node applies a new value at once) or *load-time* (the model, device, queue, QoS: read
at configure, so a new value needs deactivate, cleanup, configure, activate; the node
says so when one is set). ``autostart`` and ``cameras`` are read-only: they only mean
something at start-up (the cameras decide the node's topics, services and actions).

Every parameter is declared with its type (:func:`ros_type`, no dynamic typing), so
``ros2 param describe`` and ``get`` show the documented type whatever value it holds, and a
value of another type is refused. The one exception is an integer for a double: it is
converted, always (``-p mask_threshold:=1``, a YAML ``1`` and ``ros2 param set ... 1`` all
give 1.0, see :func:`ros_value`), because YAML and ros2cli read ``1`` as an integer and
refusing what a user reads as a number helps nobody.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
import re
from typing import Any, Callable, Mapping

from m2sa_core.shipped_model import SHIPPED_MODEL_RELATIVE
from m2sa_ros.cameras.camera_names import check_camera_names
from m2sa_ros.cameras.transport_names import COMPRESSED, COMPRESSED_DEPTH, DEPTH_TRANSPORTS, IMAGE_TRANSPORTS, RAW

_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?|xpu(:\d+)?)$")
DTYPES = ("", "float32", "bfloat16", "float16")  # "" and m2sa_core.inference.DTYPE_NAMES, without importing torch
# m2sa_core.model.quantization.MODES, spelled out so reading parameters never imports torch (tested equal).
QUANTIZATIONS = ("none", "int8", "int4")
RELIABILITIES = ("best_effort", "reliable")


class ParameterError(ValueError):
    """One or more parameter values are invalid; the message lists each of them."""


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    check: Callable[[Any], str | None] | None = None  # returns a complaint or None
    runtime: bool = False  # applied at once when set; else read at configure
    read_only: bool = False  # cannot be changed after start-up
    minimum: float | None = None  # inclusive range, also put into the ROS descriptor
    maximum: float | None = None


def _range(name: str, default: Any, description: str, minimum: float, maximum: float,
           runtime: bool = False) -> ParamSpec:
    """Return a numeric parameter with an inclusive range (checked here and by ROS itself)."""
    def check(v: Any) -> str | None:
        if v < minimum:
            return f"must be >= {minimum}"
        if v > maximum:
            return f"must be <= {maximum}"
        return None

    return ParamSpec(name, default, description, check, runtime=runtime, minimum=minimum, maximum=maximum)


def _check_device(v: str) -> str | None:
    return None if _DEVICE_RE.match(v) else "must be cpu, cuda, cuda:N, mps or xpu[:N]"


def _check_frame_id(v: str) -> str | None:
    """Return a tf2 frame id: tf2 refuses a leading '/', and whitespace is never part of one."""
    if v.startswith("/"):
        return "a tf2 frame id must not start with '/'"
    if any(c.isspace() for c in v):
        return "a tf2 frame id has no whitespace"
    return None


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else "must be one of " + ", ".join(repr(o) for o in options)


PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("model_path", "", "Local checkpoint directory, anything Segmenter.from_pretrained "
              "loads (never downloaded). Empty: `preset` if set, else the shipped "
              f"{SHIPPED_MODEL_RELATIVE}."),
    ParamSpec("preset", "", "Build this preset (tiny, tiny-authors, 7b, 13b) with random weights when no "
              "model_path is given: for tests and benchmarks, outputs are meaningless (tiny-authors: the tiny "
              "shapes with the authors' prompt and preprocessing, as 7b and 13b have them)."),
    ParamSpec("device", "cpu", "Torch device for the model: cpu, cuda, cuda:N, mps, xpu or xpu:N.", _check_device),
    ParamSpec("dtype", "", "Model dtype: float32, bfloat16, float16; empty = bfloat16 on GPU, "
              "float32 on CPU. float32 gives the shipped tiny model's answers on a GPU word for word as on "
              "the CPU, at no cost a model this small can measure; bfloat16 rewords some answers (and may "
              "name other targets), float16 coarsens the masks (figures: bench/RESULTS.md).", _one_of(DTYPES)),
    _range("cpu_threads", 1, "Threads torch gives the model's CPU work (0 = torch's default, one "
           "per core). One, because on cores the robot's other processes also use, threads that wait "
           "for each other at every operation stall: a command beside busy processes takes several "
           "times as long with one thread per core, while an idle machine gains little from them "
           "(bench/bench_cpu_contention.py, figures in bench/RESULTS.md).", 0, 1024),
    ParamSpec("quantization", "none", "Load the language model quantized (bitsandbytes): none, int8 "
              "(LLM.int8) or int4 (NF4); vision towers and SAM stay in dtype. 13b fits a 24 GB GPU "
              "with int8.", _one_of(QUANTIZATIONS)),
    _range("max_new_tokens", 256, "Longest answer generated, in tokens; a longer one is cut and "
           "the result says truncated.", 1, 4096),
    _range("mask_threshold", 0.0, "Logit threshold of the masks (0 = probability 0.5).", -100.0, 100.0,
           runtime=True),
    _range("duplicate_iou", -1.0, "Merge two instances of one category (or one part of two) whose visible "
           "masks overlap by at least this IoU: one object the answer named twice (0 = off, -1 = the "
           "model's setting: 0.7 for the shipped tiny model, off for the authors' weights).", -1.0, 1.0,
           runtime=True),
    _range("frame_cache_size", 4, "Frames whose image features stay cached; several commands "
           "on one frame encode it once.", 0, 64),
    _range("max_image_age", 1.0, "Reject commands whose image is older than this many seconds "
           "(0 = any age): a camera that stopped must not be answered from its last frame. "
           "/diagnostics warns when the newest image is older. Service/action requests may give their own.",
           0.0, 3600.0, runtime=True),
    _range("image_min_rate", 1.0, "/diagnostics warns when a camera's images come slower than this, in Hz, "
           "over a 5 s window (0 = no floor).", 0.0, 1000.0, runtime=True),
    _range("image_timeout", 5.0, "/diagnostics reports an ERROR when a camera sent no image for this many "
           "seconds, or none that long after activation (0 = never).", 0.0, 3600.0, runtime=True),
    _range("failed_commands_error", 3, "/diagnostics reports an ERROR once this many results in a row "
           "failed, naming the last error (0 = never).", 0, 1000, runtime=True),
    _range("wait_for_image", 1.0, "Seconds a command waits for a first camera image before "
           "failing with 'no image yet' (0 = fail at once).", 0.0, 60.0, runtime=True),
    ParamSpec("publish_overlay", True, "Publish `overlay` (rgb8, masks tinted per target) when "
              "someone subscribes.", runtime=True),
    ParamSpec("publish_detections", True, "Publish `detections_2d` and `detections_3d` (vision_msgs "
              "Detection2DArray / Detection3DArray, one detection per target: the mask's ROI, the 3-D box) "
              "beside every result, for the tools that read vision_msgs (RViz plugins, trackers). Needs "
              "vision_msgs; without it one warning, and the node runs without them."),
    ParamSpec("full_frame_masks", False, "Also send every mask full frame (`mask`, `amodal_mask`: mono8 "
              "of the image's size, as interfaces v4 did) besides the cropped PNGs (`mask_crop`, "
              "`amodal_mask_crop`), for clients that read those fields; each mask then adds its image's "
              "width x height bytes to a result (0.92 MB at 1280x720; bench/RESULTS.md).", runtime=True),
    ParamSpec("use_compressed", False, "Subscribe to `image/compressed` (sensor_msgs/CompressedImage, "
              "decoded exactly as sent) instead of `image`."),
    ParamSpec("use_compressed_depth", False, "Subscribe to `depth/compressedDepth` (sensor_msgs/CompressedImage "
              "as image_transport's compressedDepth sends it: 16UC1 PNG or RVL, 32FC1 as quantised inverse depth) "
              "instead of `depth`: what robots record to keep bags small."),
    ParamSpec("image_transport", "", "The colour image's transport, as depth_image_proc's parameter of this "
              "name chooses it: raw or compressed, read at the image topic's resolved name (after "
              "remapping) plus /compressed, as image_transport names it. Empty: use_compressed decides.",
              _one_of(("",) + IMAGE_TRANSPORTS)),
    ParamSpec("depth_image_transport", "", "The depth image's transport, as depth_image_proc's parameter of "
              "this name chooses it: raw or compressedDepth (at the depth topic's resolved name plus "
              "/compressedDepth). Empty: use_compressed_depth decides.", _one_of(("",) + DEPTH_TRANSPORTS)),
    ParamSpec("image_reliability", "best_effort", "Reliability of the image, depth and camera_info "
              "subscriptions: best_effort (sensor-data QoS) or reliable. The default of their "
              "`qos_overrides.<topic>.subscription.reliability`, which sets one topic alone.", _one_of(RELIABILITIES)),
    ParamSpec("amodal", False, "Also output amodal (complete, occlusion-filled) masks for every "
              "target, not only when the command asks for the complete shape."),
    _range("max_queue", 4, "Commands waiting for the model beyond the running one (per camera); more "
           "get 'queue full'.", 1, 64),
    _range("max_batch", 4, "Several cameras only: most commands one model call answers when commands "
           "wait together, taken round-robin one per camera per round, so every waiting camera gets in "
           "(1 = no batching).", 1, 64),
    _range("max_command_length", 1000, "Longest accepted command, in characters.", 1, 10_000_000,
           runtime=True),
    _range("depth_tolerance", 0.05, "Largest stamp difference (s) between the colour image and "
           "the depth / camera_info used for its centroids.", 0.0, 10.0, runtime=True),
    _range("depth_wait", 0.1, "Longest wait (s), once the model has answered, for a frame's depth and "
           "camera_info that have not come yet while the depth stream is behind the colour image (a "
           "loaded link, a large message being repaired); 0 = no wait. Without depth the command gets no "
           "3-D; a camera without depth never waits.", 0.0, 10.0, runtime=True),
    _range("depth_missing_frames", 5, "Frames in a row without usable depth before a warning names the "
           "cause (none received, stamps outside depth_tolerance); depth often comes a few ms after its "
           "image, so one frame without it is no fault. A refused depth is said at its first frame.",
           1, 100_000, runtime=True),
    _range("centroid_erosion_px", 3, "Mask erosion (pixels) before taking the median depth, "
           "so border pixels do not pull the centroid to the background.", 0, 100, runtime=True),
    ParamSpec("image_rectified", True, "The colour image (and the depth registered to it) is rectified "
              "(image_rect, as depth_image_proc assumes): pixels are back-projected through camera_info's P. "
              "false: it is the raw image, back-projected through K and D (plumb_bob, rational_polynomial or "
              "equidistant; another distortion model refuses the depth with one warning).", runtime=True),
    ParamSpec("allow_depth_frame_mismatch", False, "Use depth and camera_info whose frame_id differs from "
              "the colour image's (only when you know they are the colour camera's anyway: registered depth "
              "shares the colour camera's camera_info); else they give no centroid, pose or points and one "
              "warning.", runtime=True),
    ParamSpec("target_points", True, "Fill each target's `points` (its visible points as a PointCloud2, "
              "what grasp planners start from); off: the clouds stay empty and the result small, while "
              "pose, size and has_pose are still set from the depth.", runtime=True),
    _range("target_points_voxel", 0.005, "Voxel size (metres) the target points are downsampled to: "
           "the mean point of each occupied cube (0 = every valid pixel's point). 5 mm keeps a button's "
           "shape while the cloud of an object shrinks several times, the more the larger the image "
           "(bench/RESULTS.md).", 0.0, 0.1,
           runtime=True),
    _range("depth_noise_sigma_1m", 0.003, "The depth sensor's noise (metres, one sigma) at 1 m, growing with "
           "the square of the range as stereo and structured-light noise does. With depth_noise_floor and "
           "plane_inlier_sigmas it sets the widest the plane fit's inlier band may be; the band itself follows "
           "each target's own measured noise, so raise this only for a sensor noisier than the model (a D435 "
           "is about 0.004 at 640x480), which would otherwise lose points at range.", 0.0, 0.1, runtime=True),
    _range("depth_noise_floor", 0.003, "The depth sensor's noise (metres, one sigma) at short range, where "
           "the z^2 growth of depth_noise_sigma_1m falls below it.", 0.0, 0.1, runtime=True),
    _range("plane_inlier_sigmas", 4.0, "How many sigmas of depth noise a pixel may be off a target's plane "
           "and still be on it: of the target's measured noise, and at most of the sensor model's "
           "(depth_noise_sigma_1m, depth_noise_floor).", 1.0, 20.0, runtime=True),
    _range("plane_band_floor", 0.012, "The narrowest the plane fit's inlier band is (metres of depth), "
           "however quiet the depth: a target's own relief (a raised button, a handle) and 16-bit depth's "
           "millimetre steps stay on its plane, while a surface 3 cm away stays off. Never wider than the "
           "sensor model's band.", 0.0, 0.1, runtime=True),
    ParamSpec("target_frame", "", "Frame the targets' 3-D values (centroid, pose, points, markers, "
              "target_points) are given in, e.g. base_link or odom: moved there with tf2 at the image's "
              "stamp, never the latest transform, which on a moving robot is a later instant's. Empty: "
              "the colour camera's optical frame. Masks stay in image space; when the transform is missing "
              "or late the result stays in the optical frame and says why (transform_error).",
              _check_frame_id, runtime=True),
    _range("tf_timeout", 0.1, "Longest wait (s) for target_frame's transform at an image's stamp, "
           "after the model ran on it: long enough for the transform sample after the image to arrive, "
           "short enough that a missing transform delays each result by no more.", 0.0, 10.0, runtime=True),
    _range("diagnostics_period", 1.0, "Seconds between /diagnostics messages.", 0.05, 3600.0, runtime=True),
    _range("heap_trim_period", 5.0, "When idle, hand freed heap pages back to the OS (glibc "
           "malloc_trim) at most this often, in seconds; keeps RSS flat over long runs "
           "(0 = never).", 0.0, 3600.0, runtime=True),
    ParamSpec("cameras", [], "Camera names served by this one node and its one model, e.g. "
              "['head', 'wrist']: each has its own topics, service and actions under <camera>/ "
              "(<camera>/image, <camera>/result, <camera>/segment, ...). Empty: one camera on "
              "image, result, segment, ...", check_camera_names, read_only=True),
    ParamSpec("autostart", True, "Configure and activate at start-up (else wait for lifecycle "
              "transitions).", read_only=True),
)

SPECS = {spec.name: spec for spec in PARAMETERS}
PARAMETER_NAMES = tuple(spec.name for spec in PARAMETERS)


@dataclass(frozen=True)
class NodeParams:
    """Validated parameter values, read once at configure."""

    model_path: str
    preset: str
    device: str
    dtype: str
    cpu_threads: int
    quantization: str
    max_new_tokens: int
    mask_threshold: float
    duplicate_iou: float
    frame_cache_size: int
    max_image_age: float
    image_min_rate: float
    image_timeout: float
    failed_commands_error: int
    wait_for_image: float
    publish_overlay: bool
    publish_detections: bool
    full_frame_masks: bool
    use_compressed: bool
    use_compressed_depth: bool
    image_transport: str
    depth_image_transport: str
    image_reliability: str
    amodal: bool
    max_queue: int
    max_batch: int
    max_command_length: int
    depth_tolerance: float
    depth_wait: float
    depth_missing_frames: int
    centroid_erosion_px: int
    image_rectified: bool
    allow_depth_frame_mismatch: bool
    target_points: bool
    target_points_voxel: float
    depth_noise_sigma_1m: float
    depth_noise_floor: float
    plane_inlier_sigmas: float
    plane_band_floor: float
    target_frame: str
    tf_timeout: float
    diagnostics_period: float
    heap_trim_period: float
    cameras: tuple[str, ...]
    autostart: bool


assert tuple(f.name for f in fields(NodeParams)) == PARAMETER_NAMES, "PARAMETERS and NodeParams differ"


def image_transport_of(params: NodeParams) -> str:
    """Return the colour image's transport: ``image_transport`` when set, else ``use_compressed``'s."""
    return params.image_transport or (COMPRESSED if params.use_compressed else RAW)


def depth_transport_of(params: NodeParams) -> str:
    """Return the depth image's transport: ``depth_image_transport`` when set, else ``use_compressed_depth``'s."""
    return params.depth_image_transport or (COMPRESSED_DEPTH if params.use_compressed_depth else RAW)


def check_value(spec: ParamSpec, value: Any) -> tuple[Any, str | None]:
    """(normalised value, complaint or None) for one parameter: type, then range/choices."""
    expected = type(spec.default)
    if expected is list:
        return _check_list(spec, value)
    value = ros_value(spec, value)
    if type(value) is not expected:
        return value, f"{spec.name}={value!r}: expected {expected.__name__}"
    if isinstance(value, str):
        value = value.strip()
    complaint = spec.check(value) if spec.check else None
    return value, (f"{spec.name}={value!r}: {complaint}" if complaint else None)


def _check_list(spec: ParamSpec, value: Any) -> tuple[Any, str | None]:
    """Return a string-array parameter as a tuple: rcl gives None for an empty YAML list, [] an empty byte array."""
    if value is None:
        value = ()
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return value, f"{spec.name}={value!r}: expected a list of strings"
    value = tuple(v.strip() if isinstance(v, str) else v for v in value)
    complaint = spec.check(list(value)) if spec.check else None
    return value, (f"{spec.name}={list(value)!r}: {complaint}" if complaint else None)


def validate(values: Mapping[str, Any]) -> NodeParams:
    """Check every value against its type and range; ParameterError lists all problems."""
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for spec in PARAMETERS:
        if spec.name not in values:
            problems.append(f"{spec.name}: missing")
            continue
        value, complaint = check_value(spec, values[spec.name])
        if complaint:
            problems.append(complaint)
        checked[spec.name] = value
    if problems:
        raise ParameterError("invalid parameters: " + "; ".join(problems))
    return NodeParams(**checked)


def ros_type(spec: ParamSpec) -> int:
    """
    Return the rcl_interfaces ParameterType a parameter is declared with, from its default's type.

    Spelled out because rclpy infers a type from the value, and an empty list infers as a
    byte array: ``cameras`` (a string array, empty by default) would be shown as one.
    """
    from rcl_interfaces.msg import ParameterType

    kinds = {bool: ParameterType.PARAMETER_BOOL, int: ParameterType.PARAMETER_INTEGER,
             float: ParameterType.PARAMETER_DOUBLE, str: ParameterType.PARAMETER_STRING,
             list: ParameterType.PARAMETER_STRING_ARRAY}
    return kinds[type(spec.default)]


def ros_value(spec: ParamSpec, value: Any) -> Any:
    """
    ``value`` as the parameter stores it: an integer given for a double becomes a float.

    Applied to start-up overrides and to every set, so a double stays a double however
    its value was written (YAML and ros2cli read ``1`` as an integer). Any other value is
    returned as it is; one of the wrong type is then refused.
    """
    if isinstance(spec.default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def descriptor(spec: ParamSpec) -> Any:
    """
    Return the rcl_interfaces ParameterDescriptor of a parameter: type, description, range, read-only.

    Statically typed (see the module docstring). The description ends with when a new
    value takes effect; a read-only parameter's says "start-up only" rather than
    "read-only", which ``ros2 param describe`` prints itself from ``read_only``.
    """
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

    kind = "applied at once" if spec.runtime else ("start-up only" if spec.read_only else
                                                   "load-time: takes effect at the next configure")
    desc = ParameterDescriptor(description=f"{spec.description} [{kind}]", type=ros_type(spec),
                               dynamic_typing=False, read_only=spec.read_only)
    if spec.minimum is not None and spec.maximum is not None:
        if isinstance(spec.default, float):
            desc.floating_point_range = [FloatingPointRange(from_value=float(spec.minimum),
                                                            to_value=float(spec.maximum), step=0.0)]
        else:
            desc.integer_range = [IntegerRange(from_value=int(spec.minimum), to_value=int(spec.maximum), step=1)]
    return desc


def check_params_files(argv: Sequence[str]) -> None:
    """
    Fail early, naming the file, when a ``--params-file`` is missing or is not YAML.

    rcl would refuse it too, but only after logging its own multi-line complaint; a user
    who mistyped a path should read one line that names it.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        """
        Also reads the files launch_ros writes.

        It dumps a launch's parameters with yaml.dump, which tags every list (``cameras:="[head, wrist]"``)
        ``!!python/tuple``; rcl reads those as arrays.
        """

    Loader.add_constructor("tag:yaml.org,2002:python/tuple", yaml.SafeLoader.construct_sequence)
    for flag, path in zip(argv, argv[1:]):
        if flag != "--params-file":
            continue
        file = Path(path)
        if not file.is_file():
            raise ParameterError(f"--params-file {path}: no such file")
        try:
            yaml.load(file.read_text(encoding="utf-8"), Loader=Loader)  # a SafeLoader: builds no objects
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise ParameterError(f"--params-file {path}: not a readable YAML file: {' '.join(str(err).split())}") \
                from err
