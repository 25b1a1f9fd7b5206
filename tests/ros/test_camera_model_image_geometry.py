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
The camera model (m2sa_core.geometry.camera_model) against image_geometry's own Python model.

image_geometry's PinholeCameraModel is how ROS reads a CameraInfo (depth_image_proc
back-projects through it), so the rays a pixel gets here must be its rays: for a
rectified pixel ``projectPixelTo3dRay``, for a raw one ``rectifyPoint`` then the ray. The
camera_infos have P != K (a stereo pair's second camera, Tx != 0), non-zero D for
plumb_bob and rational_polynomial, a rectification R, binning and an ROI. The raw rays
agree to 1e-6 over the whole image for calibrations like a RealSense's or a webcam's;
with a strong lens image_geometry's ``rectifyPoint`` (OpenCV's default of 5 iterations)
is off by up to a pixel at the corners, so there the interior is compared and the
corners are checked against OpenCV's forward model in tests/core/test_camera_model.py.
For ``equidistant`` the Python model's ``rectifyPoint`` reads D as plumb_bob's (only its
C++ model calls cv2.fisheye), so its rectified rays are compared here and the raw fisheye
path is checked against cv2.fisheye.projectPoints there.
"""

from __future__ import annotations

import image_geometry
from m2sa_core.geometry.camera_model import PinholeCameraModel
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from sensor_msgs.msg import CameraInfo, RegionOfInterest

# image_geometry builds its matrices as numpy.matrix, which numpy asks it not to.
pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")]

K = (525.0, 0.0, 320.5, 0.0, 530.0, 238.0, 0.0, 0.0, 1.0)
P = (500.0, 0.0, 315.0, -30.0, 0.0, 505.0, 240.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # Tx = -fx * 6 cm
R = tuple(Rotation.from_rotvec([0.004, 0.012, 0.015]).as_matrix().ravel())  # a stereo pair's rectification


def _info(model: str, d, *, r=None, p=P, k=K, width=640, height=480, binning=(0, 0), roi=(0, 0, 0, 0)) -> CameraInfo:
    msg = CameraInfo(width=width, height=height, distortion_model=model, d=[float(x) for x in d],
                     k=[float(x) for x in k], p=[float(x) for x in p],
                     r=[float(x) for x in (np.eye(3).ravel() if r is None else r)],
                     binning_x=binning[0], binning_y=binning[1])
    msg.roi = RegionOfInterest(x_offset=roi[0], y_offset=roi[1], width=roi[2], height=roi[3])
    return msg


CALIBRATIONS = {
    "plumb_bob": _info("plumb_bob", [-0.1, 0.02, 0.001, -0.0005, 0.0]),
    "plumb_bob_stereo": _info("plumb_bob", [-0.05, 0.01, 0.0005, 0.0002, 0.0], r=R),
    "rational_polynomial": _info("rational_polynomial", [0.1, -0.02, 0.0008, -0.0003, 0.001, 0.05, -0.01, 0.002]),
    "equidistant": _info("equidistant", [0.05, -0.01, 0.003, -0.001]),
    "binned_roi": _info("plumb_bob", [-0.08, 0.015, 0.0, 0.0, 0.0], width=1280, height=960, binning=(2, 2),
                        roi=(64, 32, 1024, 768), k=(1050.0, 0.0, 641.0, 0.0, 1060.0, 476.0, 0.0, 0.0, 1.0),
                        p=(1000.0, 0.0, 630.0, 0.0, 0.0, 1010.0, 480.0, 0.0, 0.0, 0.0, 1.0, 0.0)),
}


def _reference(msg: CameraInfo) -> image_geometry.PinholeCameraModel:
    model = image_geometry.PinholeCameraModel()
    model.fromCameraInfo(msg)
    return model


def _pixels(model: PinholeCameraModel, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Return a 9 x 7 grid over the image the model describes (corners included at margin 0)."""
    u, v = np.meshgrid(np.linspace(margin * model.width, (1 - margin) * (model.width - 1), 9),
                       np.linspace(margin * model.height, (1 - margin) * (model.height - 1), 7))
    return u.ravel(), v.ravel()


@pytest.mark.parametrize("name", list(CALIBRATIONS))
def test_rectified_pixels_get_image_geometry_rays_through_p(name):
    msg = CALIBRATIONS[name]
    ours, reference = PinholeCameraModel.from_msg(msg), _reference(msg)
    u, v = _pixels(ours)
    expected = np.array([reference.projectPixelTo3dRay((a, b)) for a, b in zip(u, v)], dtype=np.float64)
    np.testing.assert_allclose(ours.rays(u, v), expected, rtol=0, atol=1e-12)
    # P, not K: the same pixels through K would be other rays
    through_k = PinholeCameraModel.from_camera_info(k=msg.k, p=[0.0] * 12, width=msg.width, height=msg.height,
                                                    binning_x=msg.binning_x, binning_y=msg.binning_y,
                                                    roi=(msg.roi.x_offset, msg.roi.y_offset, msg.roi.width,
                                                         msg.roi.height))
    assert np.abs(through_k.rays(u, v) - expected).max() > 1e-3


def test_a_rectified_image_whose_camera_info_has_only_p_gets_image_geometry_rays():
    """K all zeros, as some drivers of rectified or simulated cameras publish it: P alone is read."""
    msg = _info("", [], k=[0.0] * 9)
    ours, reference = PinholeCameraModel.from_msg(msg), _reference(msg)
    u, v = _pixels(ours)
    expected = np.array([reference.projectPixelTo3dRay((a, b)) for a, b in zip(u, v)], dtype=np.float64)
    np.testing.assert_allclose(ours.rays(u, v), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["plumb_bob", "plumb_bob_stereo", "rational_polynomial", "binned_roi"])
def test_raw_pixels_get_image_geometry_rays_through_k_and_d(name):
    msg = CALIBRATIONS[name]
    ours, reference = PinholeCameraModel.from_msg(msg, rectified=False), _reference(msg)
    u, v = _pixels(ours)
    expected = np.array([reference.projectPixelTo3dRay(reference.rectifyPoint((a, b))) for a, b in zip(u, v)],
                        dtype=np.float64)
    np.testing.assert_allclose(ours.rays(u, v), expected, rtol=0, atol=1e-6)
    assert np.abs(PinholeCameraModel.from_msg(msg).rays(u, v) - expected).max() > 1e-3  # D and K matter


def test_a_strong_lens_agrees_where_image_geometry_converges():
    """
    k1 = -0.28 (a wide webcam).

    Image_geometry's 5 OpenCV iterations converge inside the central 50 % of the image;
    there the rays agree.
    """
    msg = _info("plumb_bob", [-0.28, 0.09, 0.001, -0.0005, -0.01])
    ours, reference = PinholeCameraModel.from_msg(msg, rectified=False), _reference(msg)
    u, v = _pixels(ours, margin=0.25)
    expected = np.array([reference.projectPixelTo3dRay(reference.rectifyPoint((a, b))) for a, b in zip(u, v)],
                        dtype=np.float64)
    np.testing.assert_allclose(ours.rays(u, v), expected, rtol=0, atol=1e-6)


def test_the_message_reader_matches_the_fields():
    msg = CALIBRATIONS["binned_roi"]
    from_msg = PinholeCameraModel.from_msg(msg, rectified=False)
    from_fields = PinholeCameraModel.from_camera_info(
        k=msg.k, p=msg.p, d=msg.d, r=msg.r, distortion_model=msg.distortion_model, width=msg.width,
        height=msg.height, binning_x=2, binning_y=2, roi=(64, 32, 1024, 768), rectified=False)
    assert (from_msg.width, from_msg.height) == (512, 384)  # the ROI, binned: the image it describes
    for name in ("k", "p", "r", "d"):
        np.testing.assert_array_equal(getattr(from_msg, name), getattr(from_fields, name))
    np.testing.assert_allclose(from_msg.k, np.asarray(_reference(msg).intrinsicMatrix()), atol=1e-12)
    np.testing.assert_allclose(from_msg.p, np.asarray(_reference(msg).projectionMatrix()), atol=1e-12)
    unsized = CameraInfo(k=list(K), p=list(P), distortion_model="plumb_bob")  # width and height 0
    assert (PinholeCameraModel.from_msg(unsized, size=(640, 480)).width,
            PinholeCameraModel.from_msg(unsized, size=(640, 480)).height) == (640, 480)
