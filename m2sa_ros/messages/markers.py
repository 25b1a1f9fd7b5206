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
Targets as visualization_msgs/MarkerArray, for RViz: centroid, label, oriented box, approach arrow.

A planner reads the geometry from SegmentationResult; a person debugging the robot wants
to see it in 3-D next to the point cloud. Each result becomes one array: a DELETEALL
first (so targets of the previous command vanish), then per target with a centroid a
sphere and a text label (its label and score), and per target with a pose its oriented
box (a translucent CUBE with the target's pose and size) and its approach direction (an
ARROW from the box centre along the box's z axis, the surface normal pointing towards
the camera). All in the frame of the result's 3-D values (``geometry_frame_id``: the
colour camera's optical frame, or ``target_frame`` when the node moved them there) and
stamped with the image's stamp; one colour per target, the same on all its markers. The
label floats above its sphere: -y in an optical frame (y points down in the image), +z
in any other frame (REP 103: base_link, odom and map have z up). Pure message building,
no node state.
"""

from __future__ import annotations

from typing import Any

CENTROID_NS = "m2sa_centroids"
LABEL_NS = "m2sa_labels"
BOX_NS = "m2sa_boxes"
NORMAL_NS = "m2sa_normals"
SPHERE_DIAMETER_M = 0.05
LABEL_HEIGHT_M = 0.04
ARROW_LENGTH_M = 0.10
ARROW_SHAFT_M = 0.008
MIN_BOX_M = 0.002  # a flat target's box is 0 thick; RViz draws nothing (and warns) for a zero scale
BOX_ALPHA = 0.35  # see the points and the surface through it
# Per-target colours (RGB 0..1), cycled; close to the overlay's palette order.
PALETTE = ((0.90, 0.10, 0.29), (0.24, 0.71, 0.29), (0.00, 0.51, 0.78), (0.96, 0.51, 0.19),
           (0.57, 0.12, 0.71), (0.27, 0.94, 0.94), (0.94, 0.20, 0.90), (0.82, 0.96, 0.24))


def target_markers(result: Any) -> Any:
    """
    Turn an m2sa_ros/SegmentationResult into a MarkerArray.

    DELETEALL, then per target a sphere and a label when it has a centroid, and a box and
    an arrow when it has a pose.
    """
    from m2sa_ros.messages.geometry_conversion import approach, geometry_header
    from visualization_msgs.msg import Marker, MarkerArray

    header = geometry_header(result)
    optical = header.frame_id == result.header.frame_id
    array = MarkerArray()
    clear = Marker(action=Marker.DELETEALL)
    clear.header = header
    array.markers.append(clear)
    for i, target in enumerate(result.targets):
        r, g, b = PALETTE[i % len(PALETTE)]

        def marker(ns: str, kind: int, alpha: float, **fields: Any) -> Any:
            m = Marker(ns=ns, id=i, type=kind, action=Marker.ADD, **fields)
            m.header = header
            m.pose.orientation.w = 1.0
            m.color.r, m.color.g, m.color.b, m.color.a = r, g, b, alpha
            return m

        if target.has_centroid:
            sphere = marker(CENTROID_NS, Marker.SPHERE, 0.9)
            sphere.pose.position = target.centroid
            sphere.scale.x = sphere.scale.y = sphere.scale.z = SPHERE_DIAMETER_M
            label = marker(LABEL_NS, Marker.TEXT_VIEW_FACING, 1.0, text=f"{target.label} {target.score:.2f}")
            label.pose.position.x = target.centroid.x
            label.pose.position.y = target.centroid.y - (SPHERE_DIAMETER_M if optical else 0.0)  # y down
            label.pose.position.z = target.centroid.z + (0.0 if optical else SPHERE_DIAMETER_M)  # z up
            label.scale.z = LABEL_HEIGHT_M
            array.markers.extend([sphere, label])
        if target.has_pose:
            box = marker(BOX_NS, Marker.CUBE, BOX_ALPHA)
            box.pose = target.pose
            box.scale.x, box.scale.y, box.scale.z = (max(float(v), MIN_BOX_M)
                                                     for v in (target.size.x, target.size.y, target.size.z))
            arrow = marker(NORMAL_NS, Marker.ARROW, 1.0)
            _point, z = approach(target)
            start = target.pose.position
            arrow.points = [type(start)(x=start.x, y=start.y, z=start.z),
                            type(start)(x=start.x + ARROW_LENGTH_M * z[0], y=start.y + ARROW_LENGTH_M * z[1],
                                        z=start.z + ARROW_LENGTH_M * z[2])]
            arrow.scale.x, arrow.scale.y, arrow.scale.z = ARROW_SHAFT_M, 2 * ARROW_SHAFT_M, 0.03
            array.markers.extend([box, arrow])
    return array


# The name of the centroid-only markers before the 3-D geometry (interfaces v2).
centroid_markers = target_markers
