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
TargetGeometry -> a Target's v3 fields (pose, size, has_pose, points), and the merged cloud.

Kept apart from result_conversion (the v2 mapping) and from m2sa_core.geometry.target
(the numpy side, no ROS), like yolo_ros's detection-to-message helpers: one small place that says
how the oriented box becomes a geometry_msgs/Pose (the box centre, the box axes as the
orientation, so the pose's z axis is the surface normal towards the camera) and a
Vector3 of extents, and when the points travel.

``points`` is always a well-formed x, y, z FLOAT32 cloud with the result's header, even
when empty (width 0): a client reading it with any PointCloud2 reader (or
cloud_conversion.cloud_to_points) needs the fields to be there. It holds points only
when the target has a pose and ``target_points`` is on: without a pose the valid points
are too few or failed the plane fit, and are not a cloud to grasp from.
"""

from __future__ import annotations

from typing import Any, TYPE_CHECKING

from m2sa_ros.messages.cloud_conversion import cloud_to_points, FLOAT32, points_to_cloud
import numpy as np

if TYPE_CHECKING:  # the numpy side (OpenCV, SciPy) is not needed to read a message
    from m2sa_core.geometry.target import TargetGeometry

_NO_POINTS = np.empty((0, 3), np.float32)


def fill_geometry(msg: Any, geometry: "TargetGeometry | None", header: Any, with_points: bool) -> None:
    """
    Set ``msg`` (an m2sa_ros/Target)'s pose, size, has_pose and points from ``geometry``.

    ``geometry`` None (no registered depth bound) or without a pose leaves pose and
    size at their defaults, has_pose false, pose_inlier_fraction 0 and the cloud empty.
    The cloud is in the optical frame of ``header``; frame_transform.py moves it.
    """
    has_pose = geometry is not None and geometry.has_pose
    if has_pose:
        centre, quaternion, extents = geometry.centre, geometry.quaternion, geometry.extents
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(c) for c in centre)
        o = msg.pose.orientation
        o.x, o.y, o.z, o.w = (float(q) for q in quaternion)
        msg.size.x, msg.size.y, msg.size.z = (float(e) for e in extents)
        msg.has_pose = True
        # v4: the robust fit's support of the pose (NaN from a fit that does not measure it).
        msg.pose_inlier_fraction = float(getattr(geometry, "inlier_fraction", float("nan")))
    points = geometry.points if has_pose and with_points else _NO_POINTS
    msg.points = points_to_cloud(points, header)


def merged_cloud(result: Any) -> Any:
    """
    All targets' points of a SegmentationResult in one PointCloud2, for RViz.

    RViz displays a PointCloud2 topic, not one nested in a message, so the node
    publishes this on ``target_points``, in the result's ``geometry_frame_id`` with the
    image's stamp (:func:`geometry_header`). Fields x, y, z and ``intensity`` = the target's
    index in ``result.targets`` (FLOAT32): RViz's Intensity colour transformer then
    gives each target its own colour.
    """
    from sensor_msgs.msg import PointCloud2, PointField

    parts = [np.column_stack([cloud_to_points(t.points, what=f"target {i} points"),
                              np.full(int(t.points.width) * int(t.points.height), float(i), np.float32)])
             for i, t in enumerate(result.targets) if int(t.points.width) * int(t.points.height) > 0]
    data = np.ascontiguousarray(np.concatenate(parts) if parts else np.empty((0, 4)), dtype="<f4")
    fields = [PointField(name=name, offset=4 * i, datatype=FLOAT32, count=1)
              for i, name in enumerate(("x", "y", "z", "intensity"))]
    msg = PointCloud2(height=1, width=int(data.shape[0]), fields=fields, is_bigendian=False, point_step=16,
                      row_step=16 * int(data.shape[0]), is_dense=True)
    msg.header = geometry_header(result)
    msg.data = data.tobytes()
    return msg


def geometry_header(result: Any) -> Any:
    """
    Return the header of a SegmentationResult's 3-D views (markers, merged cloud).

    The image's stamp, in the frame its 3-D values are in (``geometry_frame_id``, v4; the
    image's frame for a result without one). A header of its own: the result's stays the
    image's.
    """
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    stamp = result.header.stamp
    frame = getattr(result, "geometry_frame_id", "") or result.header.frame_id
    return Header(stamp=Time(sec=int(stamp.sec), nanosec=int(stamp.nanosec)), frame_id=frame)


def approach(target: Any) -> tuple[tuple[float, float, float], tuple[float, float, float]] | None:
    """
    (press / grasp point, unit approach direction) of an m2sa_ros/Target, or None without a pose.

    The direction is the pose's z axis: the visible surface's normal, pointing towards
    the camera, so a tool comes in along its reverse. The point is the centre of the
    box's face on that side (the box centre moved by half the z extent along z): the
    first thing a tool pressing a raised button touches, and the visible surface's
    middle for a flat target. What a press or grasp planner reads first;
    examples/planner_client.py prints it.
    """
    if not target.has_pose:
        return None
    o, p = target.pose.orientation, target.pose.position
    # The rotation matrix's third column, from the unit quaternion (x, y, z, w).
    z = (2.0 * (o.x * o.z + o.w * o.y), 2.0 * (o.y * o.z - o.w * o.x), 1.0 - 2.0 * (o.x * o.x + o.y * o.y))
    half = target.size.z / 2.0
    return (p.x + half * z[0], p.y + half * z[1], p.z + half * z[2]), z
