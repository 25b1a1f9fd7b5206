"""Target centroids as visualization_msgs/MarkerArray, for RViz.

A planner reads centroids from SegmentationResult; a person debugging the robot wants
to see them in 3-D next to the point cloud. Each result becomes one array: a DELETEALL
first (so targets of the previous command vanish), then per target with a centroid a
sphere and a text label, in the source image's frame (the colour camera's optical
frame) and stamped with its stamp. Pure message building, no node state.
"""

from __future__ import annotations

from typing import Any

CENTROID_NS = "m2sa_centroids"
LABEL_NS = "m2sa_labels"
SPHERE_DIAMETER_M = 0.05
LABEL_HEIGHT_M = 0.04
# Per-target colours (RGB 0..1), cycled; close to the overlay's palette order.
PALETTE = ((0.90, 0.10, 0.29), (0.24, 0.71, 0.29), (0.00, 0.51, 0.78), (0.96, 0.51, 0.19),
           (0.57, 0.12, 0.71), (0.27, 0.94, 0.94), (0.94, 0.20, 0.90), (0.82, 0.96, 0.24))


def centroid_markers(result: Any) -> Any:
    """m2sa_ros/SegmentationResult -> visualization_msgs/MarkerArray (DELETEALL + 2 per centroid)."""
    from visualization_msgs.msg import Marker, MarkerArray

    array = MarkerArray()
    clear = Marker(action=Marker.DELETEALL)
    clear.header = result.header
    array.markers.append(clear)
    for i, target in enumerate(result.targets):
        if not target.has_centroid:
            continue
        r, g, b = PALETTE[i % len(PALETTE)]
        sphere = Marker(ns=CENTROID_NS, id=i, type=Marker.SPHERE, action=Marker.ADD)
        sphere.header = result.header
        sphere.pose.position = target.centroid
        sphere.pose.orientation.w = 1.0
        sphere.scale.x = sphere.scale.y = sphere.scale.z = SPHERE_DIAMETER_M
        sphere.color.r, sphere.color.g, sphere.color.b, sphere.color.a = r, g, b, 0.9
        label = Marker(ns=LABEL_NS, id=i, type=Marker.TEXT_VIEW_FACING, action=Marker.ADD,
                       text=f"{target.label} {target.score:.2f}")
        label.header = result.header
        label.pose.position.x = target.centroid.x
        label.pose.position.y = target.centroid.y - SPHERE_DIAMETER_M  # optical frame: y down = above
        label.pose.position.z = target.centroid.z
        label.pose.orientation.w = 1.0
        label.scale.z = LABEL_HEIGHT_M
        label.color.r, label.color.g, label.color.b, label.color.a = r, g, b, 1.0
        array.markers.extend([sphere, label])
    return array
