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
The depth step reads the camera as ROS defines it, and measures with the node's noise model.

``image_rectified`` picks P (rectified, the default, what depth_image_proc assumes) or K
and D (raw), and a camera_info whose distortion a raw image cannot be undistorted with is
refused with one warning. The depth noise model and the plane band's parameters reach the
3-D fit.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from m2sa_core.geometry.camera_model import PinholeCameraModel
from m2sa_core.geometry.plane_fit import BandRule, DepthNoise
from m2sa_ros.depth.depth_binding import bind_depth, DepthSource
from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.depth.stamped_buffer import StampedBuffer
from m2sa_ros.params.node_params import PARAMETERS, validate
import numpy as np
import pytest

W, H = 64, 48
K = [60.0, 0.0, 31.5, 0.0, 61.0, 23.5, 0.0, 0.0, 1.0]
P = [55.0, 0.0, 30.0, 0.0, 0.0, 56.0, 24.0, 0.0, 0.0, 0.0, 1.0, 0.0]
D = [-0.2, 0.05, 0.001, 0.0, 0.0]
FRAME = "camera_color_optical_frame"


def _header(stamp_ns: int = 1_000_000_000):
    return SimpleNamespace(frame_id=FRAME, stamp=SimpleNamespace(sec=stamp_ns // 10**9, nanosec=stamp_ns % 10**9))


def _buffers(distortion_model: str = "plumb_bob"):
    depth = np.full((H, W), 1.2, np.float32)
    depth_msg = SimpleNamespace(header=_header(), height=H, width=W, encoding="32FC1", is_bigendian=0, step=W * 4,
                                data=depth.tobytes())
    info = SimpleNamespace(header=_header(), width=W, height=H, k=K, p=P, d=D, r=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0],
                           distortion_model=distortion_model, binning_x=0, binning_y=0,
                           roi=SimpleNamespace(x_offset=0, y_offset=0, width=0, height=0, do_rectify=False))
    depth_buffer, info_buffer = StampedBuffer(), StampedBuffer()
    depth_buffer.push(1_000_000_000, depth_msg)
    info_buffer.push(1_000_000_000, info)
    return depth_buffer, info_buffer, info


def _settings(**changes) -> DepthSettings:
    """Return the depth settings of the table's defaults with ``changes`` (parameter names), validated."""
    defaults = {spec.name: spec.default for spec in PARAMETERS}
    return DepthSettings.from_params(validate({**defaults, **changes}))


def _bind(rectified: bool, distortion_model: str = "plumb_bob", settings: DepthSettings | None = None):
    depth_buffer, info_buffer, info = _buffers(distortion_model)
    frame = SimpleNamespace(stamp_ns=1_000_000_000, header=_header(), height=H, width=W, key=(FRAME, 1))
    warnings: list[str] = []
    if settings is None:
        settings = _settings(centroid_erosion_px=0, target_points_voxel=0.0)
    settings = dataclasses.replace(settings, image_rectified=rectified)
    source = DepthSource(depth_buffer, info_buffer, "/depth", where="camera")
    measure, state = bind_depth(frame, source, settings, lambda key, text: warnings.append(text))
    return measure, state, warnings, info


@pytest.mark.parametrize("rectified", [True, False])
def test_the_bound_camera_is_the_camera_info_read_as_declared(rectified):
    measure, state, warnings, info = _bind(rectified)
    assert state == "bound" and not warnings
    camera = measure.depth.camera
    expected = PinholeCameraModel.from_msg(info, rectified=rectified)
    assert camera.rectified is rectified
    mask = np.zeros((H, W), bool)
    mask[2:10, 3:15] = True  # near a corner, where K and D differ most from P
    vs, us = np.nonzero(mask)
    np.testing.assert_allclose(measure.geometry(mask).points, expected.back_project(us, vs, np.full(us.size, 1.2)),
                               atol=1e-6)
    centroid = expected.back_project(np.array([us.mean()]), np.array([vs.mean()]), np.array([1.2]))[0]
    np.testing.assert_allclose(measure.centroid(mask), centroid, atol=1e-9)
    other = PinholeCameraModel.from_msg(info, rectified=not rectified)
    assert np.abs(other.back_project(us, vs, np.full(us.size, 1.2)) - measure.geometry(mask).points).max() > 1e-3


def test_a_raw_image_with_an_unknown_distortion_model_is_refused_in_one_line():
    measure, state, warnings, _ = _bind(False, distortion_model="kannala_brandt")
    assert measure is None and state == "refused"
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert "distortion_model 'kannala_brandt' is not supported" in warnings[0]
    measure, state, warnings, _ = _bind(True, distortion_model="kannala_brandt")  # rectified: D is not read
    assert state == "bound" and not warnings


def test_the_noise_model_and_the_band_reach_the_fit():
    assert _settings().geometry.band_rule == BandRule()  # the defaults are m2sa_core's
    settings = _settings(depth_noise_sigma_1m=0.004, depth_noise_floor=0.002, plane_inlier_sigmas=3,
                         plane_band_floor=0.008, target_points_voxel=0.0)
    geometry = settings.geometry
    assert geometry.band_rule == BandRule(DepthNoise(sigma_1m=0.004, floor_m=0.002), sigmas=3.0, floor_m=0.008)
    measure, state, _, _ = _bind(True, settings=settings)
    assert state == "bound"
    assert measure.geometry_params.band_rule == geometry.band_rule and measure.geometry_params.voxel_m == 0.0
    np.testing.assert_allclose(measure.geometry_params.band_rule.band(np.array([2.0]), 0.0), [0.008])
