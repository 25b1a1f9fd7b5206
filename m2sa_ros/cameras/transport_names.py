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
The topics a camera's inputs come on, named as image_transport names them.

A remapping renames one exact name. image_transport therefore resolves the *base* topic
first (namespace and remappings applied) and only then appends the transport:
``-r image:=/camera/color/image_raw`` with the compressed transport reads
``/camera/color/image_raw/compressed``, where subscribing to the relative name
``image/compressed`` would read ``/image/compressed``, which no remapping named. Its
CameraSubscriber takes camera_info from beside the image (``getCameraInfoTopic``: the
image topic's sibling ``camera_info``), so remapping the image brings its camera_info
along. depth_image_proc chooses a transport by the ``image_transport`` and
``depth_image_transport`` parameters. The node does all three; a camera_info remapped on
its own still wins. No rclpy here: the node hands in its name resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

RAW = "raw"
COMPRESSED = "compressed"
COMPRESSED_DEPTH = "compressedDepth"
IMAGE_TRANSPORTS = (RAW, COMPRESSED)  # what the node decodes for the colour image
DEPTH_TRANSPORTS = (RAW, COMPRESSED_DEPTH)  # and for the depth image


def camera_topic(camera_name: str, name: str) -> str:
    """Return the relative name of ``camera_name``'s topic ``name``: "left/image", or "image" for the single camera."""
    return f"{camera_name}/{name}" if camera_name else name


def transport_topic(base: str, transport: str) -> str:
    """Return the topic of ``transport`` for the resolved ``base`` topic: itself for raw, else ``base/transport``."""
    return base if transport == RAW else f"{base.rstrip('/')}/{transport}"


def camera_info_topic(image_topic: str) -> str:
    """Return the camera_info beside a resolved image topic, as image_transport names it (``/a/camera_info``)."""
    parent = image_topic.rstrip("/").rsplit("/", 1)[0]
    return f"{parent}/camera_info"


@dataclass(frozen=True)
class CameraInputs:
    """The fully qualified topics one camera's subscriptions read."""

    image: str
    depth: str
    camera_info: str


def camera_inputs(resolve: Callable[[str], str], expand: Callable[[str], str], *, image: str, depth: str,
                  camera_info: str, image_transport: str, depth_transport: str) -> CameraInputs:
    """
    Return the topics for a camera whose relative names are ``image``, ``depth`` and ``camera_info``.

    ``resolve`` expands and remaps a name (rclpy's ``resolve_topic_name``), ``expand`` only
    expands it (``only_expand=True``): where the two agree, ``camera_info`` was not
    remapped, and the image's sibling is read instead.
    """
    image_base = resolve(image)
    info = resolve(camera_info)
    if info == expand(camera_info):
        info = camera_info_topic(image_base)
    return CameraInputs(image=transport_topic(image_base, image_transport),
                        depth=transport_topic(resolve(depth), depth_transport), camera_info=info)
