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
A target's points (N, 3 float32) <-> sensor_msgs/PointCloud2, without sensor_msgs_py.

Grasp planners (GPD, Contact-GraspNet, MoveIt grasp generators) take a PointCloud2, so
each target's visible points go out as one: an unorganised cloud (height 1, width N)
with the fields x, y, z as FLOAT32 at offsets 0, 4, 8, point_step 12, little-endian,
``is_dense`` true (the geometry never emits a NaN point). The layout is the one
``sensor_msgs_py.point_cloud2.create_cloud_xyz32`` writes, so every ROS reader accepts
it; this module does not depend on sensor_msgs_py because the venv has no such wheel.

:func:`cloud_to_points` reads x, y, z back from any cloud (other point steps, extra
fields, organised clouds, big-endian, FLOAT64 coordinates), so a client can read what
another driver published too. It reads the message fields only, so it works on any
object shaped like PointCloud2; only :func:`points_to_cloud` imports sensor_msgs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# sensor_msgs/PointField datatype constants -> numpy element type.
_DATATYPES: dict[int, str] = {1: "i1", 2: "u1", 3: "i2", 4: "u2", 5: "i4", 6: "u4", 7: "f4", 8: "f8"}
FLOAT32 = 7
POINT_STEP = 12


class CloudConversionError(ValueError):
    """A PointCloud2 that cannot be read as x, y, z points; the text says which field is wrong."""


def points_to_cloud(points: np.ndarray, header: Any = None):
    """(N, 3) points (metres) -> sensor_msgs/PointCloud2 x, y, z FLOAT32 (N may be 0)."""
    from sensor_msgs.msg import PointCloud2, PointField

    points = np.asarray(points)
    if points.ndim != 2 or points.shape[1] != 3:
        raise CloudConversionError(f"points_to_cloud: expected an (N, 3) array, got shape {points.shape}")
    data = np.ascontiguousarray(points, dtype="<f4")
    if not np.isfinite(data).all():
        raise CloudConversionError("points_to_cloud: points must be finite (the cloud is sent is_dense)")
    fields = [PointField(name=name, offset=4 * i, datatype=FLOAT32, count=1) for i, name in enumerate("xyz")]
    msg = PointCloud2(height=1, width=int(data.shape[0]), fields=fields, is_bigendian=False,
                      point_step=POINT_STEP, row_step=POINT_STEP * int(data.shape[0]), is_dense=True)
    if header is not None:
        msg.header = header
    msg.data = data.tobytes()
    return msg


def cloud_to_points(msg: Any, what: str = "points", skip_nans: bool = True) -> np.ndarray:
    """
    PointCloud2 -> (N, 3) float32 x, y, z in the cloud's row-major order.

    ``skip_nans`` drops points with a non-finite coordinate (what a non-dense cloud uses
    for "no return"). Missing x/y/z fields, a field beyond the point step, a count other
    than 1 or a data length that does not match ``row_step * height`` raise
    :class:`CloudConversionError`.
    """
    height, width = int(msg.height), int(msg.width)
    point_step, row_step = int(msg.point_step), int(msg.row_step)
    by_name = {str(f.name): f for f in msg.fields}
    missing = [n for n in "xyz" if n not in by_name]
    if missing:
        raise CloudConversionError(f"{what}: no field {', '.join(missing)} (fields: {sorted(by_name)})")
    if height * width == 0:
        return np.empty((0, 3), np.float32)
    data = bytes(msg.data)
    if _own_layout(msg, by_name, len(data)):  # what points_to_cloud writes: one view, no record dtype
        points = np.frombuffer(data, "<f4").reshape(-1, 3).astype(np.float32)
        return points[np.isfinite(points).all(axis=1)] if skip_nans else points
    if row_step < width * point_step:
        raise CloudConversionError(f"{what}: row_step {row_step} < width {width} x point_step {point_step}")
    if len(data) != row_step * height:
        raise CloudConversionError(f"{what}: data has {len(data)} bytes, expected row_step {row_step} x "
                                   f"height {height} = {row_step * height}")
    order = ">" if msg.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for n in "xyz":
        f = by_name[n]
        if int(f.datatype) not in _DATATYPES:
            raise CloudConversionError(f"{what}: field {n} has unknown datatype {f.datatype}")
        if int(f.count) != 1:
            raise CloudConversionError(f"{what}: field {n} has count {f.count}, expected 1")
        size = np.dtype(_DATATYPES[int(f.datatype)]).itemsize
        if int(f.offset) + size > point_step:
            raise CloudConversionError(f"{what}: field {n} (offset {f.offset}, {size} bytes) lies beyond "
                                       f"point_step {point_step}")
        names.append(n)
        formats.append(order + _DATATYPES[int(f.datatype)])
        offsets.append(int(f.offset))
    point = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": point_step})
    rows = np.frombuffer(data, np.uint8).reshape(height, row_step)[:, :width * point_step]
    records = np.ascontiguousarray(rows).view(point).reshape(-1)
    points = np.stack([records[n].astype(np.float32) for n in "xyz"], axis=1)
    if skip_nans:
        points = points[np.isfinite(points).all(axis=1)]
    return points


def _own_layout(msg: Any, by_name: dict[str, Any], size: int) -> bool:
    """Return the cloud is x, y, z little-endian FLOAT32 at offsets 0, 4, 8, packed (points_to_cloud's)."""
    return (int(msg.point_step) == POINT_STEP and not msg.is_bigendian and len(by_name) == 3
            and all(int(by_name[n].offset) == 4 * i and int(by_name[n].datatype) == FLOAT32
                    and int(by_name[n].count) == 1 for i, n in enumerate("xyz"))
            and int(msg.row_step) == POINT_STEP * int(msg.width) and size == int(msg.row_step) * int(msg.height))


def transform_cloud(msg: Any, transform: Any, frame_id: str):
    """
    Return a PointCloud2's x, y, z moved by ``transform`` (m2sa_core RigidTransform) into ``frame_id``.

    The result is this module's x, y, z FLOAT32 layout (an empty cloud stays empty and
    well-formed) under a header of its own: ``frame_id`` and the cloud's stamp, copied,
    because a result's targets share the image's header object and that one must keep
    the optical frame (the masks are in it). The arithmetic is float64 (RigidTransform).
    """
    from builtin_interfaces.msg import Time
    from std_msgs.msg import Header

    stamp = msg.header.stamp
    header = Header(stamp=Time(sec=int(stamp.sec), nanosec=int(stamp.nanosec)), frame_id=frame_id)
    points = cloud_to_points(msg, what="target points")
    return points_to_cloud(transform.apply(points) if len(points) else points, header)
