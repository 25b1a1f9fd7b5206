"""One node, several cameras: what belongs to each camera, and the camera names.

A robot has a head camera and a wrist camera; one node per camera would load one copy
of the model per camera (2 x 16 GB for 7B). With the ``cameras`` parameter one node
serves all of them from one model: each camera gets its own relative topics, service
and actions under its own namespace (``<camera>/image``, ``<camera>/result``,
``<camera>/segment``, ...), its own keep-latest frame, depth and camera_info buffers,
tracks, counters and queue (a worker lane, m2sa_ros.worker). An empty list is today's
single camera with today's names: its :class:`Camera` has the name "" and no prefix.

Plain data and names only; the node creates the ROS entities and stores them here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from m2sa_ros.centroids import StampedBuffer
from m2sa_ros.diagnostics import NodeStats
from m2sa_ros.latest_frame import LatestFrame
from m2sa_ros.tracks import TrackSet

# A relative ROS name of one or more tokens ("head", "arm/wrist"): letters, digits and
# underscores, not starting with a digit. Checked here so a bad name is one clear line
# at configure rather than rcl's exception at the first create_subscription.
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_CAMERAS = 16


def check_camera_names(names: Any) -> str | None:
    """A complaint about a ``cameras`` value (a list of names), or None when it is fine."""
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        return "expected a list of camera names, e.g. ['head', 'wrist']"
    if len(names) > MAX_CAMERAS:
        return f"at most {MAX_CAMERAS} cameras, got {len(names)}"
    bad = [n for n in names if not _NAME_RE.match(n)]
    if bad:
        return (f"invalid camera name(s) {', '.join(repr(n) for n in bad)}: use letters, digits and '_' "
                f"(not starting with a digit), tokens separated by '/'")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return f"duplicate camera name(s) {', '.join(repr(n) for n in duplicates)}"
    return None


@dataclass(eq=False)
class Camera:
    """One camera's inputs, outputs and state inside the node.

    ``name`` is "" for the single-camera node (topics ``image``, ``result``, ...) and
    the camera's name otherwise (``head/image``, ``head/result``, ...). The frame keys
    of its frames carry the name, so the one shared frame-feature cache never mixes
    two cameras' frames.
    """

    name: str
    key_prefix: str
    latest: LatestFrame = field(init=False)
    depth: StampedBuffer = field(default_factory=lambda: StampedBuffer(capacity=10))
    camera_info: StampedBuffer = field(default_factory=lambda: StampedBuffer(capacity=10))
    tracks: TrackSet = field(default_factory=TrackSet)
    stats: NodeStats = field(default_factory=NodeStats)
    # ROS entities, created by the node (configure: publishers; activate: the rest).
    result_pub: Any = None
    overlay_pub: Any = None
    markers_pub: Any = None
    points_pub: Any = None  # target_points: the result's target clouds merged, for RViz
    interfaces: list[Any] = field(default_factory=list)  # subscriptions and the service
    action_server: Any = None
    track_server: Any = None
    sensor_group: Any = None
    command_group: Any = None

    def __post_init__(self) -> None:
        self.latest = LatestFrame(key_prefix=f"{self.key_prefix}:{self.name}" if self.name else self.key_prefix)

    @property
    def lane(self) -> str:
        """Its queue in the worker."""
        return self.name

    @property
    def label(self) -> str:
        """How log lines and diagnostics name it ("" for the single camera)."""
        return self.name

    def topic(self, name: str) -> str:
        """The relative name of one of its topics, services or actions."""
        return f"{self.name}/{name}" if self.name else name

    def image_topic(self, compressed: bool) -> str:
        """The relative name of the image topic it listens on (``use_compressed``)."""
        return self.topic("image/compressed" if compressed else "image")

    def clear(self) -> None:
        """Forget frames and depth (cleanup): a later configure starts fresh."""
        self.latest.clear()
        self.depth.clear()
        self.camera_info.clear()
