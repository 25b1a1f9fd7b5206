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
The depth step's settings without ROS: one object, the parameter table's names, built once.

DepthSettings holds every depth parameter by its name in PARAMETERS, its 3-D fit's
constants built once from them and shared by every frame; the pipeline builds it at
configure and again when a runtime change touches one of its values, so a new
``target_points_voxel`` or ``depth_noise_floor`` reaches the next frame's geometry.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from m2sa_core.geometry.plane_fit import DepthNoise
from m2sa_core.geometry.target import GeometryParams
from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.cameras.transport_names import CameraInputs
from m2sa_ros.depth import depth_settings
from m2sa_ros.depth.depth_binding import bind_depth, DepthSource
from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.depth.stamped_buffer import StampedBuffer
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.params.node_params import PARAMETER_NAMES, PARAMETERS, SPECS, validate
from m2sa_ros.pipeline import CommandPipeline
import numpy as np

W, H = 32, 24
FRAME = "camera_color_optical_frame"
STAMP_NS = 1_000_000_000
DEFAULTS = {spec.name: spec.default for spec in PARAMETERS}
CHANGED = {"depth_tolerance": 0.02, "depth_wait": 0.3, "depth_missing_frames": 7, "centroid_erosion_px": 1,
           "image_rectified": False, "allow_depth_frame_mismatch": True, "target_points": True,
           "target_points_voxel": 0.01, "depth_noise_sigma_1m": 0.004, "depth_noise_floor": 0.002,
           "plane_inlier_sigmas": 3, "plane_band_floor": 0.008}


def _header():
    return SimpleNamespace(frame_id=FRAME, stamp=SimpleNamespace(sec=STAMP_NS // 10**9, nanosec=STAMP_NS % 10**9))


def _frame(n: int = 1):
    return SimpleNamespace(stamp_ns=STAMP_NS, header=_header(), height=H, width=W, key=f"camera:{n}:{STAMP_NS}")


def _fill(depth: StampedBuffer, camera_info: StampedBuffer) -> None:
    """Push one 1.2 m depth image and its camera_info, stamped as :func:`_frame`."""
    depth.push(STAMP_NS, SimpleNamespace(header=_header(), height=H, width=W, encoding="32FC1", is_bigendian=0,
                                         step=W * 4, data=np.full((H, W), 1.2, np.float32).tobytes()))
    camera_info.push(STAMP_NS, SimpleNamespace(
        header=_header(), width=W, height=H, k=[30.0, 0.0, 15.5, 0.0, 30.0, 11.5, 0.0, 0.0, 1.0],
        p=[30.0, 0.0, 15.5, 0.0, 0.0, 30.0, 11.5, 0.0, 0.0, 0.0, 1.0, 0.0], d=[0.0] * 5,
        r=[1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], distortion_model="plumb_bob", binning_x=0, binning_y=0,
        roi=SimpleNamespace(x_offset=0, y_offset=0, width=0, height=0, do_rectify=False)))


def test_the_settings_hold_each_depth_parameter_by_the_tables_name():
    params = validate({**DEFAULTS, **CHANGED})
    settings = DepthSettings.from_params(params)
    assert DepthSettings.names() == tuple(CHANGED)
    assert DepthSettings.names() == tuple(name for name in PARAMETER_NAMES if name in CHANGED)  # the table's order
    assert all(SPECS[name].runtime for name in DepthSettings.names())
    for name in DepthSettings.names():
        assert getattr(settings, name) == getattr(params, name), name
    # A new depth or plane parameter belongs here (the transports are the subscriptions', read at configure).
    depth_like = {name for name in PARAMETER_NAMES
                  if name.startswith(("depth_", "plane_", "target_points", "centroid_"))} - {"depth_image_transport"}
    assert depth_like <= set(DepthSettings.names())


def test_the_geometry_is_built_from_the_settings_values():
    settings = DepthSettings.from_params(validate({**DEFAULTS, **CHANGED}))
    assert settings.geometry == GeometryParams(voxel_m=0.01, noise=DepthNoise(0.004, 0.002), inlier_sigmas=3.0,
                                               band_floor_m=0.008)
    without_points = DepthSettings.from_params(validate({**DEFAULTS, **CHANGED, "target_points": False}))
    assert without_points.geometry.voxel_m == 0.0  # no cloud is sent: it is not downsampled either
    defaults = DepthSettings.from_params(validate(DEFAULTS))
    assert defaults.geometry == GeometryParams()  # the table's defaults are m2sa_core's


def test_the_geometry_is_built_once_and_every_frame_shares_it(monkeypatch):
    built: list[GeometryParams] = []

    def counting(*args, **kwargs) -> GeometryParams:
        built.append(GeometryParams(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(depth_settings, "GeometryParams", counting)
    settings = DepthSettings.from_params(validate(DEFAULTS))
    assert built == [settings.geometry]
    source = DepthSource(StampedBuffer(), StampedBuffer(), "/depth", "/camera_info", where="camera")
    _fill(source.depth, source.camera_info)
    measures = [bind_depth(_frame(n), source, settings, lambda key, text: None) for n in range(3)]
    assert [state for _, state in measures] == ["bound"] * 3
    assert all(measure is not None and measure.geometry_params is settings.geometry for measure, _ in measures)
    assert len(built) == 1


def test_a_runtime_change_rebuilds_the_settings_and_reaches_the_next_frames_geometry():
    pipeline = CommandPipeline(SimpleNamespace(), NodeStats(), Counter(), topic_name=lambda name: name,
                               warn_once=lambda key, text: None)
    pipeline.load(SimpleNamespace(), validate({**DEFAULTS, "heap_trim_period": 0.0}))  # no malloc_trim looked up
    camera = Camera(name="", key_prefix="test")
    camera.inputs = CameraInputs("/image", "/depth", "/camera_info")
    _fill(camera.depth, camera.camera_info)
    loaded = pipeline.depth_settings
    assert loaded == DepthSettings.from_params(pipeline.params)
    measure, state = pipeline.bind_depth(_frame(), camera)
    assert state == "bound" and measure.geometry_params is loaded.geometry

    pipeline.update_params({"mask_threshold": 0.6})  # not a depth parameter: the same settings
    assert pipeline.depth_settings is loaded

    pipeline.update_params({"target_points_voxel": 0.01})
    measure, _ = pipeline.bind_depth(_frame(2), camera)
    assert pipeline.depth_settings.target_points_voxel == 0.01
    assert measure.geometry_params is pipeline.depth_settings.geometry and measure.geometry_params.voxel_m == 0.01

    pipeline.update_params({"depth_noise_floor": 0.001})
    measure, _ = pipeline.bind_depth(_frame(3), camera)
    assert measure.geometry_params.noise == DepthNoise(DEFAULTS["depth_noise_sigma_1m"], 0.001)
    assert measure.geometry_params.voxel_m == 0.01  # the earlier change stays

    pipeline.unload()
    assert pipeline.depth_settings is None
