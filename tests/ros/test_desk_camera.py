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
``m2sa-camera``: what it reads, what it publishes over DDS, and how it fails and stops.

* The sources: the synthetic world's scene is the demo world's picture with its own
  registered depth and intrinsics (artefacts redrawn every frame); an image file with a
  16-bit depth file; a folder in name order with same-named depth files; a video in a
  loop; a camera_calibration YAML.
* Bad input is one line naming the file and exit status 2, before anything is published.
* Over DDS, as a user runs it (the installed entry point, a process of its own): image,
  depth and camera_info arrive under the namespace with one stamp and one frame id per
  frame; the perception node (shipped model) answers a command on those frames with 3-D
  geometry; SIGINT ends the camera with exit status 0.
"""

from __future__ import annotations

import os
from pathlib import Path
import signal
import subprocess
import sys
import time

import cv2
from m2sa_core.data.synthetic.dataset_depth import Generator, scene_depth
from m2sa_ros.tools import desk_camera
from m2sa_ros.tools.desk_camera import CameraError, FolderSource, fov_camera, StillSource, SyntheticSource, VideoSource
from node_process import ctrl_c
import numpy as np
import pytest

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
SURFACES = "Which surfaces here light up with pictures?"  # scene 0 of seed 2026: a TV and a laptop


def _fov(width: int, height: int):
    return fov_camera(width, height, 60.0)


def _write_rgb(path: Path, rgb: np.ndarray) -> None:
    assert cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))


def _picture(seed: int, height: int = 24, width: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


# --------------------------------------------------------------------------- sources
def test_synthetic_source_is_the_demo_worlds_scene_with_its_depth_and_camera():
    scene, truth = scene_depth(Generator(2026, 256), 0)
    clean = SyntheticSource(2026, 0, 256, "none")
    frame = clean.next_frame()
    assert np.array_equal(frame.rgb, scene.image)  # the picture the demo's bag holds as image 0
    np.testing.assert_array_equal(frame.depth, truth.depth)
    assert clean.camera.intrinsics == truth.camera and clean.has_depth
    assert "television_set_1" in clean.description and "laptop_computer_1" in clean.description

    mild = SyntheticSource(2026, 0, 256, "mild")
    first, second = mild.next_frame().depth, mild.next_frame().depth
    assert np.isnan(first).mean() == pytest.approx(0.02, abs=0.01)  # the bag recorder's mild level
    assert not np.array_equal(first, second, equal_nan=True)  # a sensor's noise changes per frame
    both = np.isfinite(first) & np.isfinite(truth.depth)
    assert np.median(np.abs(first[both] - truth.depth[both])) < 0.005
    with pytest.raises(CameraError, match="none, mild, strong"):
        SyntheticSource(2026, 0, 256, "heavy")


def test_image_file_with_a_16_bit_depth_file(tmp_path):
    rgb = _picture(1)
    _write_rgb(tmp_path / "desk.png", rgb)
    mm = np.full((24, 32), 750, np.uint16)
    mm[0, 0] = 0  # no depth there
    assert cv2.imwrite(str(tmp_path / "desk_depth.png"), mm)
    source = StillSource(tmp_path / "desk.png", tmp_path / "desk_depth.png", _fov)
    frame = source.next_frame()
    assert np.array_equal(frame.rgb, rgb) and source.has_depth
    assert np.isnan(frame.depth[0, 0]) and np.allclose(frame.depth[1:, 1:], 0.75)
    k = source.camera.intrinsics
    assert (k.width, k.height, k.cx, k.cy) == (32, 24, 15.5, 11.5)
    assert k.fx == pytest.approx(16 / np.tan(np.deg2rad(30)))
    assert np.array_equal(source.next_frame().rgb, rgb)  # the same picture every tick


def test_folder_plays_in_name_order_in_a_loop_with_same_named_depth(tmp_path):
    images, depth = tmp_path / "images", tmp_path / "depth"
    images.mkdir()
    depth.mkdir()
    pictures = {name: _picture(i) for i, name in enumerate(["b.png", "a.png", "c.bmp"])}
    for i, (name, rgb) in enumerate(pictures.items()):
        _write_rgb(images / name, rgb)
        np.save(depth / f"{Path(name).stem}.npy", np.full((24, 32), 0.5 + i, np.float32))
    (images / "notes.txt").write_text("not a picture")
    source = FolderSource(images, depth, _fov)
    order = sorted(pictures)
    got = [source.next_frame() for _ in range(4)]
    for frame, name in zip(got, [*order, order[0]]):
        assert np.array_equal(frame.rgb, pictures[name]), name
        assert np.allclose(frame.depth, 0.5 + list(pictures).index(name))


def test_video_plays_in_a_loop(tmp_path):
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (32, 24))
    colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]  # RGB
    for colour in colours:
        writer.write(np.full((24, 32, 3), colour[::-1], np.uint8))
    writer.release()
    source = VideoSource(path, _fov)
    try:
        got = [source.next_frame().rgb.reshape(-1, 3).mean(axis=0) for _ in range(5)]
    finally:
        source.close()
    for mean, colour in zip(got, [*colours, *colours[:2]]):
        assert np.allclose(mean, colour, atol=12), (mean, colour)
    assert not source.has_depth and source.camera.intrinsics.width == 32


def test_camera_calibration_yaml(tmp_path):
    yaml_file = tmp_path / "cam.yaml"
    yaml_file.write_text(
        "image_width: 32\nimage_height: 24\ncamera_name: desk\n"
        "camera_matrix: {rows: 3, cols: 3, data: [30.0, 0, 16.0, 0, 31.0, 12.0, 0, 0, 1]}\n"
        "distortion_model: plumb_bob\n"
        "distortion_coefficients: {rows: 1, cols: 5, data: [0.1, -0.05, 0, 0, 0]}\n"
        "projection_matrix: {rows: 3, cols: 4, data: [29.0, 0, 16.0, 0, 0, 30.0, 12.0, 0, 0, 0, 1, 0]}\n")
    model = desk_camera.read_camera_info(yaml_file)
    assert model.intrinsics.k == [30.0, 0.0, 16.0, 0.0, 31.0, 12.0, 0.0, 0.0, 1.0]
    assert model.d == (0.1, -0.05, 0.0, 0.0, 0.0) and model.projection()[0] == 29.0
    assert fov_camera(32, 24, 60.0).projection()[:3] == fov_camera(32, 24, 60.0).intrinsics.k[:3]


# --------------------------------------------------------------------------- bad input
def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "broken.png").write_bytes(b"not a png at all")
    (tmp / "broken.mp4").write_bytes(b"not a video either")
    (tmp / "empty").mkdir()
    _write_rgb(tmp / "ok.png", _picture(3))
    assert cv2.imwrite(str(tmp / "small_depth.png"), np.ones((12, 16), np.uint16))
    assert cv2.imwrite(str(tmp / "grey_depth.png"), np.ones((24, 32), np.uint8))
    (tmp / "wrong.yaml").write_text("image_width: 64\nimage_height: 48\ncamera_matrix: {data: [1,0,0,0,1,0,0,0,1]}\n")
    return {
        "missing file": ([str(tmp / "missing.png")], "missing.png"),
        "unreadable image": ([str(tmp / "broken.png")], "broken.png"),
        "unreadable video": ([str(tmp / "broken.mp4")], "broken.mp4"),
        "empty folder": ([str(tmp / "empty")], "empty"),
        "missing depth": ([str(tmp / "ok.png"), "--depth", str(tmp / "nodepth.png")], "nodepth.png"),
        "depth of another size": ([str(tmp / "ok.png"), "--depth", str(tmp / "small_depth.png")], "small_depth.png"),
        "8-bit depth": ([str(tmp / "ok.png"), "--depth", str(tmp / "grey_depth.png")], "grey_depth.png"),
        "calibration of another size": ([str(tmp / "ok.png"), "--camera-info", str(tmp / "wrong.yaml")], "wrong.yaml"),
        "nothing to publish": ([], "--synthetic"),
        "bad rate": (["--synthetic", "--rate", "0"], "--rate"),
    }


CASES = ["missing file", "unreadable image", "unreadable video", "empty folder", "missing depth",
         "depth of another size", "8-bit depth", "calibration of another size", "nothing to publish", "bad rate"]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_naming_it(case, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("M2SA_DEBUG", raising=False)
    argv, name = _bad_inputs(tmp_path)[case]
    status = desk_camera.main(argv)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert status == 2
    assert len(err) == 1 and err[0].startswith("m2sa-camera: error: ") and name in err[0], err


# --------------------------------------------------------------------------- over DDS
@pytest.mark.ros
def test_depth_to_msg_is_depth_to_metres_inverse():
    from m2sa_ros.messages.image_conversion import depth_to_metres, depth_to_msg, ImageConversionError

    depth = np.array([[0.5, np.nan], [1.25, 0.0]], np.float32)
    for encoding in ("32FC1", "16UC1"):
        back = depth_to_metres(depth_to_msg(depth, encoding=encoding))
        np.testing.assert_allclose(back, [[0.5, np.nan], [1.25, np.nan]], equal_nan=True)
    with pytest.raises(ImageConversionError, match="32FC1 or 16UC1"):
        depth_to_msg(depth, encoding="mono8")


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


@pytest.mark.ros
def test_camera_over_dds_feeds_the_node_and_stops_on_ctrl_c(ros_context):
    from diagnostic_msgs.msg import DiagnosticArray
    from m2sa_ros.action import Segment
    from m2sa_ros.messages.image_conversion import depth_to_metres, image_to_rgb
    from node_harness import action_client, spinning, wait_until
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CameraInfo, Image

    ns = f"/desk_{os.getpid()}"
    scene, truth = scene_depth(Generator(2026, 256), 0)
    camera = _start([str(BIN / "m2sa-camera"), "--synthetic", "--namespace", ns, "--rate", "10"])
    node_proc = None
    listener = Node("desk_listener", context=ros_context)
    got: dict[str, dict[tuple[int, int], object]] = {"image": {}, "depth": {}, "camera_info": {}}

    image_stamps: list[tuple[int, int]] = []

    def keep(topic: str):
        def on(msg) -> None:
            stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
            got[topic].setdefault(stamp, msg)
            if topic == "image":
                image_stamps.append(stamp)
        return on

    for topic, kind in (("image", Image), ("depth", Image), ("camera_info", CameraInfo)):
        listener.create_subscription(kind, f"{ns}/{topic}", keep(topic), qos_profile_sensor_data)
    diagnostics: list[dict[str, str]] = []  # the node's camera values, from each /diagnostics message
    health: dict[str, tuple[bytes, str]] = {}  # the newest level and message of each of the node's statuses

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith(f"{ns}/"):
                health[status.name.rsplit(": ", 1)[-1]] = (status.level, status.message)
        diagnostics.extend({kv.key: kv.value for kv in status.values} for status in msg.status
                           if any(kv.key == "depth_age_ms" for kv in status.values))

    listener.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    client = action_client(listener, Segment, f"{ns}/segment")
    try:
        with spinning(ros_context, listener):
            wait_until(lambda: len(set(got["image"]) & set(got["depth"]) & set(got["camera_info"])) >= 3
                       or camera.poll() is not None, 60, "three frames of image, depth and camera_info")
            assert camera.poll() is None, ctrl_c(camera)
            stamps = sorted(set(got["image"]) & set(got["depth"]) & set(got["camera_info"]))
            for stamp in stamps[:3]:
                image, depth, info = (got[t][stamp] for t in ("image", "depth", "camera_info"))
                assert image.header.frame_id == depth.header.frame_id == info.header.frame_id \
                    == "camera_color_optical_frame"
                assert np.array_equal(image_to_rgb(image), scene.image)
                metres = depth_to_metres(depth)
                both = np.isfinite(metres)
                assert both.mean() > 0.95 and np.median(np.abs(metres[both] - truth.depth[both])) < 0.005
                assert list(info.k) == pytest.approx(truth.camera.k) and (info.width, info.height) == (256, 256)
            assert len(set(image_stamps)) == len(image_stamps) >= 3  # a new stamp every tick

            # The node's image subscription matches the camera's publisher some time after its
            # action server is up: the goal waits for the first frame (the node's own
            # wait_for_image) instead of racing it.
            node_proc = _start([str(BIN / "m2sa-perception"), "--ros-args", "-r", f"__ns:={ns}",
                                "-p", "wait_for_image:=60.0"])
            assert client.wait_for_server(timeout_sec=120), ctrl_c(node_proc)[1]
            # The node's three subscriptions each match the camera's publisher on their own
            # time: a first image whose depth was published before the depth subscription
            # matched is answered without 3-D, rightly. So the goal goes once the node says
            # (its /diagnostics) that depth and camera_info reach it, as an operator would check.
            wait_until(lambda: diagnostics and all(diagnostics[-1].get(key, "none received") != "none received"
                                                   for key in ("image_age_ms", "depth_age_ms", "camera_info_age_ms")),
                       120, f"the node's /diagnostics to show image, depth and camera_info {diagnostics[-1:]}")
            sent = client.send_goal_async(Segment.Goal(command=SURFACES, request_id="desk-1"))
            handle = wait_until(lambda: sent.done() and sent.result(), 60, "goal accepted")
            assert handle.accepted
            future = handle.get_result_async()
            result = wait_until(lambda: future.done() and future.result(), 120, "the result").result.result
            assert result.success, result.error
            stamp = (result.header.stamp.sec, result.header.stamp.nanosec)
            assert stamp in got["image"] and result.header.frame_id == "camera_color_optical_frame"
            labels = [t.label for t in result.targets]
            assert labels == ["television_set_1's screen", "laptop_computer_1's screen"], result.answer
            assert all(t.has_centroid and t.has_pose for t in result.targets)  # the depth was bound
            # A live camera is healthy; the shipped tiny model is what an operator is warned of.
            wait_until(lambda: health.get("image rate", (None,))[0] == b"\x00", 30, f"the camera's rate OK {health}")
            assert health["image rate"][1].endswith(f" Hz on {ns}/image"), health
            assert health["m2sa perception"] == (b"\x01", "running the shipped tiny model: it knows only the "
                                                          "synthetic test scenes (set model_path)"), health
            client.destroy()
    finally:
        listener.destroy_node()
        code, out = ctrl_c(camera)
        if node_proc is not None:
            ctrl_c(node_proc)
    assert code == 0, out
    assert "Traceback" not in out and f"{ns}/image, {ns}/depth, {ns}/camera_info" in out, out


@pytest.mark.ros
def test_count_ends_the_camera_with_status_0_and_sigterm_too(tmp_path):
    _write_rgb(tmp_path / "desk.png", _picture(5))
    done = subprocess.run([str(BIN / "m2sa-camera"), str(tmp_path / "desk.png"), "--count", "2", "--rate", "20"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "no depth" in done.stdout  # says why the node will give no 3-D geometry
    running = _start([str(BIN / "m2sa-camera"), "--synthetic"])
    seen = _read_until(running, "publishing", 60)
    running.send_signal(signal.SIGTERM)
    code, out = ctrl_c(running)
    assert code == 0 and "Traceback" not in out, seen + out


def _read_until(proc: subprocess.Popen, text: str, timeout: float) -> str:
    """Return what ``proc`` printed up to the first line with ``text`` (or its end, or ``timeout``)."""
    seen, start = [], time.monotonic()
    while proc.poll() is None and time.monotonic() - start < timeout:
        seen.append(proc.stdout.readline())
        if text in seen[-1]:
            break
    return "".join(seen) + f"[{time.monotonic() - start:.1f} s to '{text}']\n"


# m2sa-camera with a middleware that does not let go: destroying the node blocks forever.
STUCK_TEARDOWN = """
import sys, threading
from m2sa_ros.tools import desk_camera
desk_camera.TEARDOWN_GRACE_S = 1.0
desk_camera.DeskCamera.close = lambda self: threading.Event().wait()
sys.exit(desk_camera.main(sys.argv[1:]))
"""


@pytest.mark.ros
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_teardown_that_blocks_cannot_keep_a_signalled_camera_running(signum):
    """The caller's signal ends the camera within the grace, saying the middleware held it, exit 0."""
    running = _start([sys.executable, "-c", STUCK_TEARDOWN, "--synthetic", "--rate", "20"])
    seen = _read_until(running, "publishing", 60)
    sent = time.monotonic()
    running.send_signal(signum)
    try:
        out, _ = running.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        running.kill()
        raise AssertionError(f"still running 30 s after {signum.name}:\n{seen}{running.communicate()[0]}")
    assert running.returncode == 0, seen + out
    assert "did not finish its teardown within 1 s of the signal; exiting without it" in out, seen + out
    assert "Traceback" not in out and time.monotonic() - sent < 20, seen + out
