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
Depth faults are loud: the node over DDS says why a target has no 3-D, in the log and on /diagnostics.

A camera_info from another camera is refused with one warning; missing depth (none
received, stamped outside depth_tolerance) is said once it has been missing for
``depth_missing_frames`` frames in a row, a refusal (another size, another frame) at its
first frame, each once per episode; /diagnostics counts bound / missing / refused frames
with the last reason and the depth's age. compressedDepth (16UC1 and 32FC1, PNG and RVL)
is decoded and gives the 3-D; a corrupt payload is refused in one line and the node
answers the next command. Every message goes over DDS to a node in this process; the
model is a double answering one box, so every number here is the depth's.
"""

from __future__ import annotations

import threading

from fake_models import BoxSegmenter
from node_harness import now_ns, wait_until
import numpy as np
import pytest
from scenes import H, random_scene, stamped_image, W

pytestmark = [pytest.mark.ros, pytest.mark.integration]

FRAME = "camera_color_optical_frame"
K = [80.0, 0.0, 31.5, 0.0, 80.0, 23.5, 0.0, 0.0, 1.0]
BOX = (20, 16, 16, 12)  # x, y, w, h of the double's one target
A, B = 10100.0, -1009.0  # the compressedDepth publisher's default inverse-depth parameters


def _stamped(msg, stamp_ns: int, frame_id: str):
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
    msg.header.frame_id = frame_id
    return msg


def _depth(metres: float, stamp_ns: int, frame_id: str = FRAME, shape: tuple[int, int] = (H, W)):
    from sensor_msgs.msg import Image

    msg = Image(height=shape[0], width=shape[1], encoding="32FC1", step=shape[1] * 4)
    msg.data = np.full(shape, metres, "<f4").tobytes()
    return _stamped(msg, stamp_ns, frame_id)


def _compressed(image: np.ndarray, encoding: str, codec: str, stamp_ns: int, data: bytes | None = None):
    from m2sa_ros.depth.compressed_depth import encode_compressed_depth
    from sensor_msgs.msg import CompressedImage

    fmt, payload = encode_compressed_depth(image, encoding, codec)
    return _stamped(CompressedImage(format=fmt, data=payload if data is None else data), stamp_ns, FRAME)


def _info(stamp_ns: int, frame_id: str = FRAME):
    from sensor_msgs.msg import CameraInfo

    return _stamped(CameraInfo(width=W, height=H, k=K), stamp_ns, frame_id)


class Rig:
    """A started node answering one box, and the client's publishers and collectors."""

    def __init__(self, graph, compressed: bool = False, **params) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from m2sa_ros.msg import SegmentationResult
        from sensor_msgs.msg import CameraInfo, CompressedImage, Image
        from std_msgs.msg import String

        self.graph = graph
        params = {"depth_tolerance": 0.05, "depth_missing_frames": 3, "diagnostics_period": 0.1,
                  "centroid_erosion_px": 0, **params}
        self.node = graph.add_node(BoxSegmenter(box=BOX), use_compressed_depth=compressed, **params)
        graph.start(self.node)
        self.results = graph.collect(SegmentationResult, "result")
        self.diagnostics = graph.collect(DiagnosticArray, "/diagnostics", 10)
        self.images = graph.publisher(Image, "image", 1)
        # The node subscribes to depth/compressedDepth, not depth, with use_compressed_depth:
        # the publisher waits for a subscriber on the one it names.
        self.depth_pub = graph.publisher(CompressedImage if compressed else Image,
                                         "depth/compressedDepth" if compressed else "depth", 5)
        self.info_pub = graph.publisher(CameraInfo, "camera_info", 5)
        self.commands = graph.publisher(String, "command")
        self.stamp = now_ns(self.node) - 10 * 10**9  # frames 0.2 s apart, in the past: the depth's age is positive

    def frame(self, depth=None, info=None):
        """
        Send one frame and return the command's one result.

        The frame's camera_info and depth (callables of the frame's stamp; None: not sent),
        the colour image, a command.
        """
        from std_msgs.msg import String

        self.stamp += 200_000_000
        stamp, camera = self.stamp, self.node.camera()
        if info is not None:
            msg = info(stamp)
            self.info_pub.publish(msg)
            wait_until(lambda: camera.camera_info.newest_stamp() == _ns(msg), 10, "the camera_info")
        if depth is not None:
            msg = depth(stamp)
            self.depth_pub.publish(msg)
            wait_until(lambda: camera.depth.newest_stamp() == _ns(msg), 10, "the depth")
        self.graph.publish_frame(self.node, self.images, stamped_image(random_scene(), stamp, frame_id=FRAME))
        n = len(self.results)
        self.commands.publish(String(data="what can I drink from?"))
        result = wait_until(lambda: len(self.results) > n and self.results[n], 30, "a result")
        assert result.success and len(result.targets) == 1, result.error
        return result.targets[0]

    def good(self, metres: float = 1.0):
        return self.frame(depth=lambda s: _depth(metres, s), info=_info)

    def status(self, **expected):
        """Return the newest /diagnostics values once they show ``expected`` (str-compared)."""
        def values():
            if not self.diagnostics:
                return None
            found = {kv.key: kv.value for kv in self.diagnostics[-1].status[0].values}
            return found if all(found.get(k) == str(v) for k, v in expected.items()) else None

        return wait_until(values, 10, f"/diagnostics showing {expected}")


def _ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def _warnings(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


# --------------------------------------------------------------------------- camera_info's frame
def test_a_camera_info_from_another_camera_is_refused_with_one_warning(graph, capfd):
    from rclpy.parameter import Parameter

    rig = Rig(graph)
    foreign = lambda s: _info(s, "camera_depth_optical_frame")  # noqa: E731
    for _ in range(4):  # more frames than depth_missing_frames: still the one warning
        target = rig.frame(depth=lambda s: _depth(1.0, s), info=foreign)
        assert not target.has_centroid and not target.has_pose and target.points.width == 0
    values = rig.status(depth_refused=4, depth_bound=0, depth_last_state="refused")
    assert "camera_info on /camera_info refused: it is in frame 'camera_depth_optical_frame'" in \
        values["depth_last_reason"]
    lines = _warnings(capfd.readouterr().err, "camera_info on /camera_info refused")
    assert len(lines) == 1, lines
    assert f"but the colour image is in '{FRAME}'" in lines[0] and "allow_depth_frame_mismatch" in lines[0]
    assert "WARN" in lines[0]

    # The one parameter covers camera_info too: set, it is used at once (runtime).
    assert rig.node.set_parameters([Parameter("allow_depth_frame_mismatch", value=True)])[0].successful
    target = rig.frame(depth=lambda s: _depth(1.0, s), info=foreign)
    assert target.has_centroid and target.centroid.z == pytest.approx(1.0) and target.has_pose
    rig.status(depth_refused=4, depth_bound=1, depth_last_state="bound")


# --------------------------------------------------------------------------- /diagnostics
def test_diagnostics_count_bound_missing_refused_frames_with_the_last_reason_and_the_age(graph):
    rig = Rig(graph)
    values = rig.status(depth_bound=0, depth_missing=0, depth_refused=0, depth_last_state="none")
    assert values["depth_age_ms"] == "none received" and values["camera_info_age_ms"] == "none received"
    assert values["image_age_ms"] == "none received"  # what "no image yet" answers are read against
    # The rig's result collector, matched by the node's own publisher; a second reader counts too.
    assert values["result_subscribers"] == "1"
    from m2sa_ros.msg import SegmentationResult

    rig.graph.collect(SegmentationResult, "result")
    rig.status(result_subscribers=2)

    assert rig.good().has_centroid
    assert rig.good().has_centroid
    assert not rig.frame(depth=None, info=_info).has_centroid  # no new depth: the last is 0.2 s off
    assert not rig.frame(depth=lambda s: _depth(1.0, s, shape=(H // 2, W // 2)), info=_info).has_centroid
    values = rig.status(depth_bound=2, depth_missing=1, depth_refused=1, depth_last_state="refused")
    assert values["depth_last_reason"].startswith("depth on /depth refused: depth image is 32x24 but the colour "
                                                  "image is 64x48")
    # Ages on the node's clock: the newest depth was stamped with the last frame, 10 s - 4 x 0.2 s ago.
    age = float(values["depth_age_ms"])
    assert 9_200.0 <= age < 60_000.0, values
    assert 9_200.0 <= float(values["image_age_ms"]) <= age, values  # every frame had its colour image
    status = rig.diagnostics[-1].status[0]
    assert status.level == b"\x01" and status.message.startswith("depth refused: depth on /depth refused")

    assert rig.good().has_centroid
    values = rig.status(depth_bound=3, depth_missing=1, depth_refused=1, depth_last_state="bound",
                        depth_frames_without=0)
    assert values["depth_last_reason"].startswith("depth on /depth refused")  # the last problem stays readable
    assert rig.diagnostics[-1].status[0].level == b"\x00"


# --------------------------------------------------------------------------- late depth: waited for
def test_a_frames_depth_that_comes_after_the_models_answer_is_waited_for(graph, monkeypatch):
    from m2sa_ros.depth.stamped_buffer import StampedBuffer
    from std_msgs.msg import String

    rig = Rig(graph, depth_wait=10.0)  # its largest: the depth is sent once the worker waits
    assert rig.good().has_centroid  # the depth stream runs; from now on it is behind the next frame
    depth_buffer = rig.node.camera().depth
    waiting = threading.Event()
    wait_near = StampedBuffer.wait_near

    def seen_waiting(buffer, *args, **kwargs):
        if buffer is depth_buffer:
            waiting.set()
        return wait_near(buffer, *args, **kwargs)

    monkeypatch.setattr(StampedBuffer, "wait_near", seen_waiting)
    rig.stamp += 200_000_000
    stamp, camera = rig.stamp, rig.node.camera()
    rig.info_pub.publish(_info(stamp))
    wait_until(lambda: camera.camera_info.newest_stamp() == stamp, 10, "the camera_info")
    rig.graph.publish_frame(rig.node, rig.images, stamped_image(random_scene(), stamp, frame_id=FRAME))
    n = len(rig.results)
    rig.commands.publish(String(data="what can I drink from?"))
    assert waiting.wait(30), "the worker never waited for the frame's depth"
    assert len(rig.results) == n  # the model has answered; the result waits for the depth
    rig.depth_pub.publish(_depth(1.0, stamp))
    result = wait_until(lambda: len(rig.results) > n and rig.results[n], 30, "a result")
    assert result.success and result.header.stamp.nanosec == stamp % 10**9
    target = result.targets[0]
    assert target.has_centroid and target.centroid.z == pytest.approx(1.0)
    rig.status(depth_bound=2, depth_missing=0)


# --------------------------------------------------------------------------- missing: said after N frames
@pytest.mark.parametrize("cause", ["none_received", "stamps_outside_the_tolerance"])
def test_missing_depth_is_said_once_after_several_frames_naming_the_cause(graph, capfd, cause):
    rig = Rig(graph)
    if cause == "none_received":
        send, needle = None, "no depth received on /depth"
    else:  # stamped 120 ms before its image, depth_tolerance 50 ms
        send, needle = (lambda s: _depth(1.0, s - 120_000_000)), \
            "the depth on /depth nearest the colour image is stamped 120 ms before it, 70 ms outside " \
            "depth_tolerance (50 ms)"
    for n in range(1, 6):
        assert not rig.frame(depth=send, info=_info).has_centroid
        lines = _warnings(capfd.readouterr().err, "frames in a row")
        if n < 3:
            assert lines == [], f"frame {n}: said before depth_missing_frames (3): {lines}"
        elif n == 3:
            assert len(lines) == 1 and "no 3-D for 3 frames in a row: " + needle in lines[0], lines
        else:
            assert lines == [], f"frame {n}: said again within the episode"
    values = rig.status(depth_missing=5, depth_frames_without=5)
    assert needle in values["depth_last_reason"]


def test_missing_camera_info_is_named_too(graph, capfd):
    rig = Rig(graph, depth_missing_frames=1)
    assert not rig.frame(depth=lambda s: _depth(1.0, s), info=None).has_centroid
    lines = _warnings(capfd.readouterr().err, "frames in a row")
    assert len(lines) == 1 and "no camera_info received on /camera_info" in lines[0], lines


# --------------------------------------------------------------------------- refused: said at once, per episode
@pytest.mark.parametrize("fault, needle", [
    ("size", "depth image is 32x24 but the colour image is 64x48"),
    ("frame", "depth is in frame 'camera_depth_optical_frame' but the colour image is in"),
])
def test_a_refusal_is_said_at_its_first_frame_and_again_after_a_recovery(graph, capfd, fault, needle):
    rig = Rig(graph, depth_missing_frames=2)

    def bad(stamp):
        if fault == "size":
            return _depth(1.0, stamp, shape=(H // 2, W // 2))
        return _depth(1.0, stamp, frame_id="camera_depth_optical_frame")

    assert not rig.frame(depth=bad, info=_info).has_centroid
    assert len(_warnings(capfd.readouterr().err, needle)) == 1  # the first frame
    assert not rig.frame(depth=bad, info=_info).has_centroid
    assert not rig.frame(depth=bad, info=_info).has_centroid
    assert _warnings(capfd.readouterr().err, needle) == []  # once per episode
    assert rig.good().has_centroid and rig.good().has_centroid  # depth_missing_frames bound: the episode ends
    assert not rig.frame(depth=bad, info=_info).has_centroid
    assert len(_warnings(capfd.readouterr().err, needle)) == 1  # a new episode says it again
    rig.status(depth_refused=4, depth_bound=2)


# --------------------------------------------------------------------------- compressedDepth
@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
@pytest.mark.parametrize("codec", ["png", "rvl"])
def test_compressed_depth_is_decoded_and_gives_the_3d(graph, encoding, codec):
    metres = 1.3
    if encoding == "16UC1":
        image, expected = np.full((H, W), 1300, np.uint16), 1.3
        image[0, :5] = 0  # holes stay holes
    else:
        image = np.full((H, W), metres, np.float32)
        image[0, :5] = np.nan
        # The plugin's quantisation, worked out: q = trunc(10100 / 1.3 - 1009) = 6760, read back 10100 / 7769.
        q = int(np.float32(A) / np.float32(metres) + np.float32(B))
        assert q == 6760
        expected = float(np.float32(A) / (np.float32(q) - np.float32(B)))
        assert expected != pytest.approx(metres, abs=1e-5)  # quantised: not the sent value itself
    rig = Rig(graph, compressed=True)
    target = rig.frame(depth=lambda s: _compressed(image, encoding, codec, s), info=_info)
    assert target.has_centroid and target.has_pose, target
    assert target.centroid.z == pytest.approx(expected, abs=1e-6)
    x, y, w, h = BOX
    assert target.centroid.x == pytest.approx(((x + (w - 1) / 2) - K[2]) * expected / K[0], abs=1e-6)
    assert target.pose.position.z == pytest.approx(expected, abs=1e-6)
    assert target.size.z == pytest.approx(0.0, abs=1e-6)  # a flat plane facing the camera
    assert target.points.width > 0
    rig.status(depth_bound=1, depth_refused=0)


def test_a_corrupt_compressed_depth_is_refused_in_one_line_and_the_node_answers_the_next(graph, capfd):
    from m2sa_ros.depth.compressed_depth import encode_compressed_depth
    from sensor_msgs.msg import CompressedImage

    rig = Rig(graph, compressed=True)
    image = np.full((H, W), 1200, np.uint16)
    _, good = encode_compressed_depth(image, "16UC1", "png")
    cut = good[:len(good) // 2]
    target = rig.frame(depth=lambda s: _compressed(image, "16UC1", "png", s, data=cut), info=_info)
    assert not target.has_centroid and not target.has_pose
    lines = _warnings(capfd.readouterr().err, "refused")
    assert len(lines) == 1, lines
    assert f"depth on /depth/compressedDepth refused: /depth/compressedDepth: could not decode {len(cut) - 12} " \
           "bytes as a PNG" in lines[0]
    values = rig.status(depth_refused=1, depth_last_state="refused")
    assert "could not decode" in values["depth_last_reason"]
    # An unknown codec, in the same episode: another cause, its own one line.
    target = rig.frame(depth=lambda s: _stamped(CompressedImage(format="16UC1; compressedDepth zstd", data=good), s,
                                                FRAME), info=_info)
    assert not target.has_centroid
    lines = _warnings(capfd.readouterr().err, "refused")
    assert len(lines) == 1 and "unsupported compressedDepth codec 'zstd'" in lines[0], lines
    # The node goes on: the next good payload is used.
    target = rig.frame(depth=lambda s: _compressed(image, "16UC1", "png", s), info=_info)
    assert target.has_centroid and target.centroid.z == pytest.approx(1.2)
    rig.status(depth_refused=2, depth_bound=1, depth_last_state="bound")
