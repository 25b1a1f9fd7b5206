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
The camera model (m2sa_core.geometry.camera_model).

Raw pixels against OpenCV's forward model, what is refused, and the target geometry
through a distorted lens.

image_geometry itself is the reference in tests/ros/test_camera_model_image_geometry.py;
here OpenCV's projection (cv2.projectPoints, cv2.fisheye.projectPoints: the definition
of each distortion model) checks that a raw pixel's ray projects back onto that pixel,
to the corners of a strong lens.
"""

from __future__ import annotations

import cv2
from m2sa_core.camera import Intrinsics
from m2sa_core.geometry.camera_model import as_camera_model, PinholeCameraModel
from m2sa_core.geometry.registered_depth import register_depth
from m2sa_core.geometry.target import GeometryParams, target_geometry
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

K = [525.0, 0.0, 320.5, 0.0, 530.0, 238.0, 0.0, 0.0, 1.0]
P = [500.0, 0.0, 315.0, -30.0, 0.0, 505.0, 240.0, 0.0, 0.0, 0.0, 1.0, 0.0]
R = Rotation.from_rotvec([0.004, 0.012, 0.015]).as_matrix()
LENSES = {
    "plumb_bob": [-0.28, 0.09, 0.001, -0.0005, -0.01],  # a wide webcam
    "rational_polynomial": [0.35, -0.05, 0.0008, -0.0003, 0.002, 0.7, 0.02, 0.01],
    "equidistant": [0.05, -0.01, 0.003, -0.001],
}


def _raw(model: str, r=None) -> PinholeCameraModel:
    return PinholeCameraModel.from_camera_info(k=K, p=P, d=LENSES[model], r=None if r is None else r.ravel(),
                                               distortion_model=model, width=640, height=480, rectified=False)


def _grid() -> tuple[np.ndarray, np.ndarray]:
    u, v = np.meshgrid(np.linspace(0, 639, 17), np.linspace(0, 479, 13))
    return u.ravel(), v.ravel()


def _project(model: str, points: np.ndarray) -> np.ndarray:
    """(N, 2) raw pixels of camera-frame points (N, 3) by OpenCV's forward model."""
    k, d = np.array(K).reshape(3, 3), np.array(LENSES[model])
    zero = np.zeros(3)
    if model == "equidistant":
        pixels, _ = cv2.fisheye.projectPoints(points.reshape(-1, 1, 3), zero, zero, k, d)
    else:
        pixels, _ = cv2.projectPoints(points.reshape(-1, 1, 3), zero, zero, k, d)
    return pixels.reshape(-1, 2)


@pytest.mark.parametrize("model", list(LENSES))
def test_a_raw_pixel_ray_projects_back_onto_the_pixel(model):
    camera = _raw(model)
    u, v = _grid()
    points = camera.back_project(u, v, np.full(u.size, 1.3))
    assert np.allclose(points[:, 2], 1.3)  # depth along the optical axis, as a depth image holds it
    np.testing.assert_allclose(_project(model, points), np.column_stack([u, v]), rtol=0, atol=1e-6)
    # the lens matters: K alone puts the corners' points elsewhere
    pinhole = PinholeCameraModel.from_camera_info(k=K, width=640, height=480, rectified=False)
    assert np.abs(pinhole.back_project(u, v, np.full(u.size, 1.3)) - points).max() > 0.01


def test_a_raw_pixel_of_a_stereo_camera_is_turned_by_r_into_the_rectified_frame():
    camera = _raw("plumb_bob", r=R)
    u, v = _grid()
    points = camera.back_project(u, v, np.full(u.size, 1.0))
    in_camera = points @ R  # R^T p: back in the raw camera's own frame
    np.testing.assert_allclose(in_camera[:, 2], 1.0, atol=1e-12)
    np.testing.assert_allclose(_project("plumb_bob", in_camera), np.column_stack([u, v]), rtol=0, atol=1e-6)


def test_unknown_or_malformed_distortion_is_refused_in_one_line():
    with pytest.raises(ValueError) as refused:
        PinholeCameraModel.from_camera_info(k=K, p=P, d=[0.1, 0.0, 0.0, 0.0], distortion_model="kannala_brandt",
                                            width=640, height=480, rectified=False)
    assert "distortion_model 'kannala_brandt' is not supported" in str(refused.value)
    assert "plumb_bob, rational_polynomial, equidistant" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="D has 5 coefficients, but equidistant takes 4"):
        PinholeCameraModel.from_camera_info(k=K, d=[0.1, 0, 0, 0, 0], distortion_model="equidistant", width=640,
                                            height=480, rectified=False)
    with pytest.raises(ValueError, match="not calibrated"):
        PinholeCameraModel.from_camera_info(k=[0.0] * 9, width=640, height=480)
    with pytest.raises(ValueError, match="K has a non-positive focal length"):  # a raw image reads K
        PinholeCameraModel.from_camera_info(k=[0.0] * 9, p=P, width=640, height=480, rectified=False)
    with pytest.raises(ValueError, match="P must have 12 elements"):
        PinholeCameraModel.from_camera_info(k=K, p=[1.0] * 9, width=640, height=480)
    # D describes the raw image: a rectified one never reads it, so its model is not checked,
    # nor are coefficients that are all zero (no distortion, whatever the name)
    rectified = PinholeCameraModel.from_camera_info(k=K, p=P, d=[0.1], distortion_model="kannala_brandt",
                                                    width=640, height=480)
    assert rectified.intrinsics.fx == 500.0
    assert not PinholeCameraModel.from_camera_info(k=K, d=[0.0] * 5, distortion_model="", width=640, height=480,
                                                   rectified=False).distorted


def test_a_p_of_zeros_stands_for_k_only_without_distortion():
    """
    image_geometry uses an all-zero P as it is (every ray NaN).

    K is the projection when nothing is distorted, and a distorted image cannot be
    rectified without P.
    """
    plain = PinholeCameraModel.from_camera_info(k=K, p=[0.0] * 12, d=[0.0] * 5, distortion_model="plumb_bob",
                                                width=640, height=480)
    assert (plain.intrinsics.fx, plain.intrinsics.cx, plain.intrinsics.fy, plain.intrinsics.cy) == \
        (525.0, 320.5, 530.0, 238.0)
    with pytest.raises(ValueError, match="P is all zeros while D is not.*image_rectified:=false"):
        PinholeCameraModel.from_camera_info(k=K, p=[0.0] * 12, d=LENSES["plumb_bob"], distortion_model="plumb_bob",
                                            width=640, height=480)
    raw = PinholeCameraModel.from_camera_info(k=K, p=[0.0] * 12, d=LENSES["plumb_bob"],
                                              distortion_model="plumb_bob", width=640, height=480, rectified=False)
    assert np.isfinite(raw.rays(*_grid())).all()  # a raw image never reads P
    assert PinholeCameraModel.from_camera_info(k=K, r=[0.0] * 9, width=640, height=480,
                                               rectified=False).rotation is None  # R unset = identity


def test_a_rectified_image_with_a_valid_p_needs_no_k():
    """A driver that fills only P (K all zeros) still gives a rectified image's rays, from P."""
    only_p = PinholeCameraModel.from_camera_info(k=[0.0] * 9, p=P, width=640, height=480)
    with_k = PinholeCameraModel.from_camera_info(k=K, p=P, width=640, height=480)
    np.testing.assert_array_equal(only_p.rays(*_grid()), with_k.rays(*_grid()))
    assert only_p.intrinsics == with_k.intrinsics


def test_intrinsics_are_a_rectified_pinhole():
    k = Intrinsics(fx=500.0, fy=510.0, cx=319.5, cy=239.5, width=640, height=480)
    model = as_camera_model(k)
    assert model.intrinsics == k and model.rectified and not model.distorted and model.rotation is None
    u, v = np.array([0.0, 319.5, 639.0]), np.array([0.0, 239.5, 479.0])
    np.testing.assert_allclose(model.back_project(u, v, np.array([2.0, 2.0, 2.0])),
                               np.column_stack([(u - 319.5) / 500 * 2, (v - 239.5) / 510 * 2, [2.0] * 3]))
    assert as_camera_model(model) is model


def test_the_target_geometry_of_a_raw_image_goes_through_the_lens():
    """
    A plane seen through a strong lens, its depth rendered per raw pixel by OpenCV's rays.

    Declared raw, the fit finds the plane; read as rectified through K alone, it does not.
    """
    camera = _raw("plumb_bob")
    u, v = np.meshgrid(np.arange(640.0), np.arange(480.0))
    rays = cv2.undistortPoints(np.stack([u.ravel(), v.ravel()], 1).reshape(-1, 1, 2), np.array(K).reshape(3, 3),
                               np.array(LENSES["plumb_bob"]),
                               criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 100, 1e-12)).reshape(-1, 2)
    normal = np.array([0.5, -0.2, -1.0]) / np.linalg.norm([0.5, -0.2, -1.0])
    depth = ((normal @ [0.0, 0.0, 1.0]) / (np.column_stack([rays, np.ones(len(rays))]) @ normal)).reshape(480, 640)
    mask = np.zeros((480, 640), bool)
    mask[20:140, 20:200] = True  # near a corner, where the lens bends most
    g = target_geometry(mask, register_depth(depth.astype(np.float32), camera, mask.shape), GeometryParams(voxel_m=0))
    assert g.has_pose and np.degrees(np.arccos(np.clip(g.normal @ normal, -1.0, 1.0))) < 0.1
    vs, us = np.nonzero(mask)
    np.testing.assert_allclose(g.points, camera.back_project(us, vs, depth[vs, us].astype(np.float32)), atol=1e-6)
    as_pinhole = PinholeCameraModel.from_camera_info(k=K, width=640, height=480, rectified=False)
    wrong = target_geometry(mask, register_depth(depth.astype(np.float32), as_pinhole, mask.shape))
    assert not wrong.has_pose or np.degrees(np.arccos(np.clip(wrong.normal @ normal, -1.0, 1.0))) > 1.0
