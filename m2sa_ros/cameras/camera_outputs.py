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
One camera's outputs: the narrow object the pipeline delivers a result on.

The node creates a camera's publishers at configure and hands them over in a
:class:`CameraOutputs`; the pipeline publishes through its two methods and never sees a
publisher, a topic or the node. What goes out, in order:

* :meth:`CameraOutputs.publish_result`: the SegmentationResult, then its vision_msgs
  detections (successful results only: an empty array would tell a tracker the objects
  had gone);
* :meth:`CameraOutputs.publish_views`: what goes beside a successful result, each only
  while someone listens - the label image (for grasp stacks), the RViz overlay, markers
  and the targets' merged points.

A publish that fails (the context going down, a message that does not convert) loses that
message only, never the request's answer to its caller: the result's failure is logged as
an error, a view's once per cause. An empty ``CameraOutputs()`` (an unconfigured camera)
publishes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from m2sa_core.label_image import paint_labels
from m2sa_core.visualize import overlay_targets
from m2sa_ros.cameras.latest_frame import Frame
from m2sa_ros.messages.detection_conversion import to_detection2d_array, to_detection3d_array
from m2sa_ros.messages.geometry_conversion import merged_cloud
from m2sa_ros.messages.image_conversion import labels_to_msg, rgb_to_msg
from m2sa_ros.messages.markers import target_markers


def _ignore(*_args: Any) -> None:
    """Report nothing: an empty CameraOutputs has nothing to fail."""


@dataclass(eq=False)
class CameraOutputs:
    """
    A camera's result, detection and view publishers, and how a failed publish is reported.

    A publisher left None (vision_msgs missing, ``publish_detections`` off, an
    unconfigured camera) is skipped. ``log_error(text)`` reports a result that did not go
    out; ``warn_once(key, text)`` a view or detection array that did not, once per ``key``.
    """

    result: Any = None
    labels: Any = None  # one mono16 instance-label image per successful result
    overlay: Any = None
    markers: Any = None
    points: Any = None  # target_points: the result's target clouds merged, for RViz
    detections_2d: Any = None  # vision_msgs Detection2DArray / Detection3DArray
    detections_3d: Any = None
    log_error: Callable[[str], None] = _ignore
    warn_once: Callable[[str, str], None] = _ignore

    def publishers(self) -> list[Any]:
        """Return the publishers it holds, for the node to destroy at cleanup."""
        return [pub for pub in (self.result, self.labels, self.overlay, self.markers, self.points,
                                self.detections_2d, self.detections_3d) if pub is not None]

    def publish_result(self, msg: Any, what: str) -> None:
        """Publish ``msg`` and, when it succeeded, its detections; ``what`` names it in the log."""
        if self.result is not None:
            try:
                self.result.publish(msg)
            except Exception as exc:  # noqa: BLE001 - e.g. the context went down meanwhile
                self.log_error(f"could not publish {what}: {exc}")
        if not msg.success:
            return
        for pub, convert in ((self.detections_2d, to_detection2d_array), (self.detections_3d, to_detection3d_array)):
            if pub is None:
                continue
            try:
                pub.publish(convert(msg))
            except Exception as exc:  # noqa: BLE001 - the result itself went out; e.g. the context went down
                self.warn_once(f"detections:{type(exc).__name__}", f"detections not published: {exc}")

    def publish_views(self, frame: Frame, result: Any, msg: Any, *, publish_overlay: bool) -> None:
        """
        Publish the views of a successful ``result`` on ``frame`` (``msg`` its SegmentationResult).

        The label image carries the colour image's header and size, so that a synchronizer
        pairs it with colour and depth; the overlay goes out only with ``publish_overlay``.
        """
        views: list[tuple[str, Any, Callable[[], Any]]] = [
            ("labels", self.labels, lambda: labels_to_msg(
                paint_labels([t.mask for t in result.targets], (frame.height, frame.width)), frame.header)),
            ("overlay", self.overlay if publish_overlay else None,
             lambda: rgb_to_msg(overlay_targets(frame.rgb, result.targets), frame.header)),
            ("markers", self.markers, lambda: target_markers(msg)),
            # RViz cannot show the clouds nested in the result: merged here.
            ("target_points", self.points, lambda: merged_cloud(msg)),
        ]
        for name, pub, build in views:
            if pub is None or pub.get_subscription_count() == 0:
                continue
            try:
                pub.publish(build())
            except Exception as exc:  # noqa: BLE001 - a view, never fatal: the result itself went out
                self.warn_once(f"{name}:{type(exc).__name__}", f"{name} not published: {exc}")
