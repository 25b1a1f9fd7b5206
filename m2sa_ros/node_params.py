"""The perception node's parameters: one table for names, defaults, docs and checks.

Declaring (the node), validating (at configure), the shipped config/perception.yaml
and the README's parameter table all come from :data:`PARAMETERS`, so they cannot
drift apart. Validation is plain Python, testable without ROS, and reports every bad
value with its name and the accepted range, because a lifecycle transition that fails
with only "configure failed" sends a user to the source code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping

_DEVICE_RE = re.compile(r"^(cpu|mps|cuda(:\d+)?|xpu(:\d+)?)$")
DTYPES = ("", "float32", "bfloat16", "float16")
RELIABILITIES = ("best_effort", "reliable")


class ParameterError(ValueError):
    """One or more parameter values are invalid; the message lists each of them."""


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: Any
    description: str
    check: Callable[[Any], str | None] | None = None  # returns a complaint or None


def _at_least(minimum: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"must be >= {minimum}"


def _check_device(v: str) -> str | None:
    return None if _DEVICE_RE.match(v) else "must be cpu, cuda, cuda:N, mps or xpu[:N]"


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else "must be one of " + ", ".join(repr(o) for o in options)


PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("model_path", "", "Local checkpoint directory, anything Segmenter.from_pretrained "
              "loads (never downloaded). Empty: `preset` if set, else the shipped "
              "models/m2sa-tiny-synth."),
    ParamSpec("preset", "", "Build this preset (tiny, 7b, 13b) with random weights when no "
              "model_path is given: for tests and benchmarks, outputs are meaningless."),
    ParamSpec("device", "cpu", "Torch device for the model: cpu, cuda, cuda:N, mps.", _check_device),
    ParamSpec("dtype", "", "Model dtype: float32, bfloat16, float16; empty = bfloat16 on GPU, "
              "float32 on CPU.", _one_of(DTYPES)),
    ParamSpec("max_new_tokens", 64, "Longest answer generated, in tokens.", _at_least(1)),
    ParamSpec("mask_threshold", 0.0, "Logit threshold of the masks (0 = probability 0.5)."),
    ParamSpec("frame_cache_size", 4, "Frames whose image features stay cached; several commands "
              "on one frame encode it once.", _at_least(0)),
    ParamSpec("max_image_age", 0.0, "Reject commands whose image is older than this many seconds "
              "(0 = any age). Service/action requests may give their own.", _at_least(0.0)),
    ParamSpec("wait_for_image", 1.0, "Seconds a command waits for a first camera image before "
              "failing with 'no image yet' (0 = fail at once).", _at_least(0.0)),
    ParamSpec("publish_overlay", True, "Publish `overlay` (rgb8, masks tinted per target) when "
              "someone subscribes."),
    ParamSpec("use_compressed", False, "Subscribe to `image/compressed` (sensor_msgs/CompressedImage, "
              "decoded exactly as sent) instead of `image`."),
    ParamSpec("image_reliability", "best_effort", "Reliability of the image subscriptions: "
              "best_effort (sensor-data QoS) or reliable.", _one_of(RELIABILITIES)),
    ParamSpec("amodal", False, "Also output amodal (complete, occlusion-filled) masks when the "
              "model provides them."),
    ParamSpec("max_queue", 4, "Commands waiting for the model beyond the running one; more get "
              "'queue full'.", _at_least(1)),
    ParamSpec("max_command_length", 1000, "Longest accepted command, in characters.", _at_least(1)),
    ParamSpec("depth_tolerance", 0.05, "Largest stamp difference (s) between the colour image and "
              "the depth / camera_info used for its centroids.", _at_least(0.0)),
    ParamSpec("centroid_erosion_px", 3, "Mask erosion (pixels) before taking the median depth, "
              "so border pixels do not pull the centroid to the background.", _at_least(0)),
    ParamSpec("diagnostics_period", 1.0, "Seconds between /diagnostics messages.", _at_least(0.05)),
    ParamSpec("heap_trim_period", 5.0, "When idle, hand freed heap pages back to the OS (glibc "
              "malloc_trim) at most this often, in seconds; keeps RSS flat over long runs "
              "(0 = never).", _at_least(0.0)),
    ParamSpec("autostart", True, "Configure and activate at start-up (else wait for lifecycle "
              "transitions)."),
)

PARAMETER_NAMES = tuple(spec.name for spec in PARAMETERS)


@dataclass(frozen=True)
class NodeParams:
    """Validated parameter values, read once at configure."""

    model_path: str
    preset: str
    device: str
    dtype: str
    max_new_tokens: int
    mask_threshold: float
    frame_cache_size: int
    max_image_age: float
    wait_for_image: float
    publish_overlay: bool
    use_compressed: bool
    image_reliability: str
    amodal: bool
    max_queue: int
    max_command_length: int
    depth_tolerance: float
    centroid_erosion_px: int
    diagnostics_period: float
    heap_trim_period: float
    autostart: bool


assert tuple(f.name for f in fields(NodeParams)) == PARAMETER_NAMES, "PARAMETERS and NodeParams differ"


def validate(values: Mapping[str, Any]) -> NodeParams:
    """Check every value against its type and range; ParameterError lists all problems."""
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for spec in PARAMETERS:
        if spec.name not in values:
            problems.append(f"{spec.name}: missing")
            continue
        value = values[spec.name]
        expected = type(spec.default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not expected:
            problems.append(f"{spec.name}={value!r}: expected {expected.__name__}")
            continue
        if isinstance(value, str):
            value = value.strip()
        complaint = spec.check(value) if spec.check else None
        if complaint:
            problems.append(f"{spec.name}={value!r}: {complaint}")
        checked[spec.name] = value
    if problems:
        raise ParameterError("invalid parameters: " + "; ".join(problems))
    return NodeParams(**checked)
