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
The depth step's settings: every depth parameter's value, by the parameter table's names.

:class:`DepthSettings` holds the values of the depth parameters of
m2sa_ros/params/node_params.py's ``PARAMETERS`` under the same names, and the 3-D fit's
constants (m2sa_core.geometry.target.GeometryParams) built from them once. The pipeline
builds it at configure and again when a runtime parameter change touches one of its
values (params/parameter_group.py's ``reads``), and hands it whole to the depth step
(depth_binding.bind_depth, depth_health.DepthHealth.record): a new depth parameter is a
field here and its use, never a keyword through every signature on the way. Units are
converted where a value is used (``depth_tolerance`` in seconds, compared in ns there).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from m2sa_core.geometry.plane_fit import DepthNoise
from m2sa_core.geometry.target import GeometryParams
from m2sa_ros.params.parameter_group import ParameterGroup


@dataclass(frozen=True)
class DepthSettings(ParameterGroup):
    """
    The depth parameters' values (each field is the parameter of that name) and ``geometry``, built once from them.

    ``geometry``: the 3-D fit's constants - the sensor's noise model (``depth_noise_sigma_1m``,
    ``depth_noise_floor``), the band's sigmas and floor (``plane_inlier_sigmas``,
    ``plane_band_floor``), the points' voxel (``target_points_voxel``; 0, no downsampling,
    when ``target_points`` is off: the cloud is not sent) - the rest m2sa_core's defaults.
    """

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
    geometry: GeometryParams = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        geometry = GeometryParams(voxel_m=float(self.target_points_voxel) if self.target_points else 0.0,
                                  noise=DepthNoise(float(self.depth_noise_sigma_1m), float(self.depth_noise_floor)),
                                  inlier_sigmas=float(self.plane_inlier_sigmas),
                                  band_floor_m=float(self.plane_band_floor))
        object.__setattr__(self, "geometry", geometry)
