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
One node, several cameras: what belongs to each camera (its names are camera_names.py's).

A robot has a head camera and a wrist camera; one node per camera would load one copy
of the model per camera (2 x 16 GB for 7B). With the ``cameras`` parameter one node
serves all of them from one model: each camera gets its own relative topics, service
and actions under its own namespace (``<camera>/image``, ``<camera>/result``,
``<camera>/segment``, ...), its own keep-latest frame, depth and camera_info buffers,
tracks, counters and queue (a worker lane, m2sa_ros.worker). An empty list is today's
single camera with today's names: its :class:`Camera` has the name "" and no prefix.

Plain data and names only; the node creates the ROS entities and stores them here, the
publishers in the camera's :class:`~m2sa_ros.cameras.camera_outputs.CameraOutputs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from m2sa_ros.cameras.camera_outputs import CameraOutputs
from m2sa_ros.cameras.latest_frame import LatestFrame
from m2sa_ros.cameras.transport_names import camera_topic, CameraInputs
from m2sa_ros.depth.depth_health import DepthHealth
from m2sa_ros.depth.stamped_buffer import StampedBuffer
from m2sa_ros.diagnostics.camera_health import ImageArrivals
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.tracking.tracks import TrackSet


@dataclass(eq=False)
class Camera:
    """
    One camera's inputs, outputs and state inside the node.

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
    depth_health: DepthHealth = field(default_factory=DepthHealth)  # bound / missing / refused, for diagnostics
    tracks: TrackSet = field(default_factory=TrackSet)
    stats: NodeStats = field(default_factory=NodeStats)
    arrivals: ImageArrivals = field(default_factory=ImageArrivals)  # its image rate, for diagnostics
    # Its publishers, created by the node at configure and handed to the pipeline in this
    # narrow object (camera_outputs.py); empty while unconfigured.
    outputs: CameraOutputs = field(default_factory=CameraOutputs)
    # The topics its image, depth and camera_info come on, as image_transport names them
    # (transport_names.py); configure sets them.
    inputs: CameraInputs | None = None
    # ROS entities the node keeps for itself, created at activate.
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
        """Return the relative name of one of its topics, services or actions."""
        return camera_topic(self.name, name)

    def clear(self) -> None:
        """Forget frames and depth (cleanup): a later configure starts fresh."""
        self.latest.clear()
        self.depth.clear()
        self.camera_info.clear()
        self.depth_health.clear()
