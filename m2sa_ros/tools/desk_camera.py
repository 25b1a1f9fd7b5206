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
``m2sa-camera``: a camera at your desk, for trying the node without a robot or a bag.

The node needs a colour stream, and for 3-D geometry a registered depth image and a
camera_info with the same header; ``ros2 bag play`` and image_publisher are not in the
venv, so a newcomer would otherwise write a publisher before seeing a single answer.
This tool publishes all three, at a rate, on the node's default topic names (``image``,
``depth``, ``camera_info``, relative, so ``--namespace`` puts them where a namespaced
node listens), from one of:

* **the synthetic world** (``--synthetic``): scene ``--scene`` of the world drawn with
  ``--seed`` (by default 2026, the demo's seed, which the shipped model never saw), with
  its registered depth and intrinsics (``m2sa_core.data.synthetic.dataset_depth``) and
  sensor artefacts redrawn on every frame as a real depth camera's are
  (``--depth-artefacts``, the bag recorder's levels, m2sa_ros.bag.depth_recording);
* **an image file, a folder of images or a video** (anything OpenCV reads): colour and
  camera_info, plus depth when ``--depth`` gives it (a file for an image, a folder of
  files named like the images for a folder: 16-bit PNG/TIFF in millimetres, 32-bit
  float TIFF or ``.npy`` in metres). A folder and a video play in a loop.

Intrinsics come from ``--camera-info`` (a camera_calibration YAML, as camera_info_manager
writes it) or from ``--fov`` (horizontal field of view, principal point at the centre),
the synthetic world's from the world itself. Every tick gives one stamp (the node's
clock) and one frame id to all three messages, camera_info and depth first, so the node
has the depth of a frame when its image arrives. Publishers are reliable (depth 5),
which both a best-effort subscriber (the node's default image QoS) and a reliable one
match.

Bad input (a missing or unreadable file, a folder without images, a depth of another
size) is one line on stderr and exit status 2, before anything is published; SIGINT and
SIGTERM end it with exit status 0.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
import os
from pathlib import Path
import signal
import sys
import threading
from typing import Any

from m2sa_core.camera import Intrinsics
from m2sa_core.cli_errors import cli_entry
from m2sa_ros.rclpy_support.signal_event import SignalSafeEvent
import numpy as np

PROG = "m2sa-camera"
DEFAULT_RATE_HZ = 5.0
DEFAULT_FRAME_ID = "camera_color_optical_frame"  # the bag recorder's and the RViz config's
DEFAULT_SEED = 2026  # the demo's world (m2sa_ros.bag.demo): scenes the shipped model was not trained on
DEFAULT_FOV_DEG = 60.0
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
TOPICS = ("image", "depth", "camera_info")  # the node's default names (m2sa_ros.cameras.camera_state.Camera.topic)


class CameraError(ValueError):
    """Bad input to the camera; the message is the one line the user sees."""


@dataclass(frozen=True)
class Frame:
    """One tick's picture: rgb (H, W, 3) uint8, depth (H, W) float32 metres (NaN = none) or None."""

    rgb: np.ndarray
    depth: np.ndarray | None


@dataclass(frozen=True)
class CameraModel:
    """What goes into camera_info: intrinsics and, from a calibration file, distortion and P."""

    intrinsics: Intrinsics
    distortion_model: str = "plumb_bob"
    d: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)
    p: tuple[float, ...] | None = None  # row-major 3x4; None: [K | 0]

    def projection(self) -> list[float]:
        if self.p is not None:
            return list(self.p)
        k = self.intrinsics.k
        return [k[0], k[1], k[2], 0.0, k[3], k[4], k[5], 0.0, 0.0, 0.0, 1.0, 0.0]


# --------------------------------------------------------------------------- reading files
def read_rgb(path: Path) -> np.ndarray:
    """Return an image file -> RGB uint8 (H, W, 3); 16-bit pictures are scaled to 8 bits, alpha dropped."""
    import cv2

    if not path.is_file():
        raise CameraError(f"{path}: no such file")
    bgr = cv2.imread(str(path), cv2.IMREAD_COLOR)  # always 3-channel 8-bit BGR
    if bgr is None:
        raise CameraError(f"{path}: OpenCV cannot read it as an image")
    return np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))


def read_depth(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """
    Return a depth file -> float32 metres (H, W), NaN = none.

    ``.npy`` in metres, an image file of 16-bit unsigned millimetres (REP 118's 16UC1, 0
    = none) or 32-bit float metres.
    """
    import cv2

    if not path.is_file():
        raise CameraError(f"{path}: no such depth file")
    if path.suffix.lower() == ".npy":
        try:
            raw = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CameraError(f"{path}: cannot read it as a numpy depth array ({exc})") from None
        metres = np.asarray(raw, dtype=np.float32)
    else:
        raw = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        if raw is None:
            raise CameraError(f"{path}: OpenCV cannot read it as a depth image")
        if raw.dtype == np.uint16:
            metres = raw.astype(np.float32) / 1000.0
            metres[raw == 0] = np.nan
        elif raw.dtype == np.float32:
            metres = raw.copy()
        else:
            raise CameraError(f"{path}: a depth image must be 16-bit millimetres or 32-bit float metres, "
                              f"got {raw.dtype} (an 8-bit picture is no depth)")
    if metres.ndim != 2:
        raise CameraError(f"{path}: depth must have one channel, got shape {metres.shape}")
    if metres.shape != shape:
        raise CameraError(f"{path}: depth is {metres.shape[1]}x{metres.shape[0]} but the colour image is "
                          f"{shape[1]}x{shape[0]}; registered depth has the colour image's size")
    metres[~np.isfinite(metres) | (metres <= 0)] = np.nan
    return metres


def read_camera_info(path: Path) -> CameraModel:
    """
    Read a camera_calibration YAML into a CameraModel.

    The YAML's ``image_width``, ``image_height``, ``camera_matrix``, ``distortion_model``,
    ``distortion_coefficients`` and ``projection_matrix``.
    """
    import yaml

    if not path.is_file():
        raise CameraError(f"{path}: no such camera info file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        width, height = int(data["image_width"]), int(data["image_height"])
        k = [float(v) for v in data["camera_matrix"]["data"]]
        d = tuple(float(v) for v in (data.get("distortion_coefficients") or {}).get("data", [0.0] * 5))
        p_data = (data.get("projection_matrix") or {}).get("data")
        p = tuple(float(v) for v in p_data) if p_data else None
        model = str(data.get("distortion_model", "plumb_bob"))
    except (OSError, yaml.YAMLError, TypeError, KeyError, ValueError, AttributeError) as exc:
        raise CameraError(f"{path}: not a camera calibration YAML (image_width, image_height, camera_matrix.data): "
                          f"{' '.join(str(exc).split())}") from None
    if len(k) != 9 or (p is not None and len(p) != 12):
        raise CameraError(f"{path}: camera_matrix needs 9 values and projection_matrix 12")
    try:
        intrinsics = Intrinsics.from_k(k, width, height)
    except ValueError as exc:
        raise CameraError(f"{path}: {exc}") from None
    return CameraModel(intrinsics, model, d, p)


def fov_camera(width: int, height: int, fov_deg: float) -> CameraModel:
    """Square pixels, principal point at the image centre, horizontal field of view ``fov_deg``."""
    f = (width / 2.0) / np.tan(np.deg2rad(fov_deg) / 2.0)
    return CameraModel(Intrinsics(float(f), float(f), (width - 1) / 2.0, (height - 1) / 2.0, width, height))


# --------------------------------------------------------------------------- sources
class Source:
    """Gives one Frame per tick; ``camera`` is fixed from the start."""

    camera: CameraModel
    description: str
    has_depth: bool = False

    def next_frame(self) -> Frame:
        raise NotImplementedError

    def close(self) -> None:
        pass


class StillSource(Source):
    """One image file (and its depth), the same picture every tick."""

    def __init__(self, path: Path, depth: Path | None, camera: Callable[[int, int], CameraModel]) -> None:
        self._rgb = read_rgb(path)
        height, width = self._rgb.shape[:2]
        self._depth = None if depth is None else read_depth(depth, (height, width))
        self.camera = camera(width, height)
        self.has_depth = depth is not None
        self.description = f"{path} ({width}x{height}{', with depth' if depth else ''})"

    def next_frame(self) -> Frame:
        return Frame(self._rgb, self._depth)


class FolderSource(Source):
    """The images of a folder in name order, in a loop; depth from a folder of same-named files."""

    def __init__(self, folder: Path, depth: Path | None, camera: Callable[[int, int], CameraModel]) -> None:
        self._files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not self._files:
            raise CameraError(f"{folder}: no image files ({', '.join(IMAGE_SUFFIXES)}) in this folder")
        if depth is not None and not depth.is_dir():
            raise CameraError(f"{depth}: --depth with a folder of images must be a folder of depth files")
        self._depth_dir = depth
        self.has_depth = depth is not None
        first = read_rgb(self._files[0])  # a bad first file fails before anything is published
        self._shape = first.shape[:2]
        self.camera = camera(self._shape[1], self._shape[0])
        self._index = 0
        self.description = (f"{folder} ({len(self._files)} images, {self._shape[1]}x{self._shape[0]}"
                            f"{', with depth' if depth else ''}, in a loop)")

    def _depth_of(self, image: Path) -> np.ndarray | None:
        if self._depth_dir is None:
            return None
        for suffix in (".npy", ".png", ".tif", ".tiff"):
            candidate = self._depth_dir / (image.stem + suffix)
            if candidate.is_file():
                return read_depth(candidate, self._shape)
        raise CameraError(f"{self._depth_dir}: no depth file named {image.stem}.npy/.png/.tif(f) for {image.name}")

    def next_frame(self) -> Frame:
        path = self._files[self._index % len(self._files)]
        self._index += 1
        rgb = read_rgb(path)
        if rgb.shape[:2] != self._shape:
            raise CameraError(f"{path}: {rgb.shape[1]}x{rgb.shape[0]}, but the folder's first image is "
                              f"{self._shape[1]}x{self._shape[0]}; one camera has one image size")
        return Frame(rgb, self._depth_of(path))


class VideoSource(Source):
    """A video file (anything OpenCV's VideoCapture opens), one frame per tick, in a loop."""

    def __init__(self, path: Path, camera: Callable[[int, int], CameraModel]) -> None:
        import cv2

        # FFmpeg's own complaint about a file it cannot open would come before our one line.
        os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
        self._path = path
        self._capture = cv2.VideoCapture(str(path))
        ok, bgr = self._capture.read() if self._capture.isOpened() else (False, None)
        if not ok or bgr is None:
            self._capture.release()
            raise CameraError(f"{path}: OpenCV cannot read it as an image or a video")
        self._first = bgr
        height, width = bgr.shape[:2]
        self.camera = camera(width, height)
        self.description = f"{path} (video, {width}x{height}, in a loop)"

    def next_frame(self) -> Frame:
        import cv2

        if self._first is not None:
            bgr, self._first = self._first, None
        else:
            ok, bgr = self._capture.read()
            if not ok:  # the end: start again
                self._capture.set(cv2.CAP_PROP_POS_FRAMES, 0)
                ok, bgr = self._capture.read()
                if not ok:
                    raise CameraError(f"{self._path}: the video cannot be read again from its start")
        return Frame(np.ascontiguousarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)), None)

    def close(self) -> None:
        self._capture.release()


class SyntheticSource(Source):
    """
    Scene ``index`` of the synthetic world ``seed``.

    Its picture, and its registered depth with fresh sensor artefacts every tick (the clean
    depth when ``artefacts`` is ``none``).
    """

    def __init__(self, seed: int, index: int, size: int, artefacts: str) -> None:
        from m2sa_core.data.synthetic.dataset_depth import ARTEFACT_STREAM, Generator, scene_depth
        from m2sa_ros.bag.depth_recording import ARTEFACT_LEVELS

        if artefacts not in ARTEFACT_LEVELS:
            raise CameraError(f"--depth-artefacts must be one of {', '.join(ARTEFACT_LEVELS)}, got {artefacts!r}")
        self._scene, depth = scene_depth(Generator(seed, size), index)
        self._clean = depth.depth
        self._artefacts = ARTEFACT_LEVELS[artefacts]
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, index, ARTEFACT_STREAM]))
        self.camera = CameraModel(depth.camera)
        self.has_depth = True
        things = ", ".join(f"{o.category}_{o.instance}" for o in self._scene.objects)
        self.description = (f"synthetic scene {index} of seed {seed} ({size}x{size}, depth with {artefacts} "
                            f"artefacts): {things}")

    def next_frame(self) -> Frame:
        from m2sa_ros.bag.depth_recording import sensor_depth

        return Frame(self._scene.image, sensor_depth(self._scene, self._clean, self._artefacts, self._rng))


def open_source(args: argparse.Namespace) -> Source:
    """Return the source the arguments name; CameraError (one line) for anything that cannot be read."""
    if args.synthetic:
        if args.source is not None:
            raise CameraError("give either a file/folder/video or --synthetic, not both")
        return SyntheticSource(args.seed, args.scene, args.size, args.depth_artefacts)
    if args.source is None:
        raise CameraError("nothing to publish: give an image file, a folder of images or a video, or --synthetic")
    path = Path(args.source).expanduser()
    given = None if args.camera_info is None else read_camera_info(Path(args.camera_info).expanduser())

    def camera(width: int, height: int) -> CameraModel:
        if given is None:
            return fov_camera(width, height, args.fov)
        if (given.intrinsics.width, given.intrinsics.height) != (width, height):
            raise CameraError(f"{args.camera_info}: calibrated for {given.intrinsics.width}x{given.intrinsics.height} "
                              f"but the images are {width}x{height}")
        return given

    depth = None if args.depth is None else Path(args.depth).expanduser()
    if path.is_dir():
        return FolderSource(path, depth, camera)
    if not path.exists():
        raise CameraError(f"{path}: no such file or folder")
    if path.suffix.lower() in IMAGE_SUFFIXES:
        return StillSource(path, depth, camera)
    if depth is not None:
        raise CameraError("--depth goes with an image file or a folder of images, not a video")
    return VideoSource(path, camera)


# --------------------------------------------------------------------------- ROS
def camera_info_msg(model: CameraModel, header: Any) -> Any:
    """sensor_msgs/CameraInfo of ``model`` with ``header`` (R = identity: a monocular camera)."""
    from sensor_msgs.msg import CameraInfo

    intrinsics = model.intrinsics
    return CameraInfo(header=header, height=intrinsics.height, width=intrinsics.width,
                      distortion_model=model.distortion_model, d=list(model.d), k=intrinsics.k,
                      r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], p=model.projection())


class DeskCamera:
    """The publishing side: a node with the three publishers and a timer at ``rate_hz``."""

    def __init__(self, source: Source, rate_hz: float, frame_id: str, depth_encoding: str,
                 count: int = 0, context: Any = None, namespace: str = "") -> None:
        from rclpy.node import Node
        from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import CameraInfo, Image

        self.source = source
        self.frame_id = frame_id
        self.depth_encoding = depth_encoding
        self.count = count
        self.sent = 0
        self.error: str | None = None
        self.done = threading.Event()  # set after `count` frames, or on a source error
        self.node = Node("m2sa_camera", namespace=namespace, context=context)
        qos = QoSProfile(depth=5, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
        self.image_pub = self.node.create_publisher(Image, TOPICS[0], qos)
        self.depth_pub = self.node.create_publisher(Image, TOPICS[1], qos)
        self.info_pub = self.node.create_publisher(CameraInfo, TOPICS[2], qos)
        self.timer = self.node.create_timer(1.0 / rate_hz, self.tick)

    def topics(self) -> list[str]:
        return [pub.topic_name for pub in (self.image_pub, self.depth_pub, self.info_pub)]

    def tick(self) -> None:
        """Publish one frame: camera_info, depth (when the source has it), then the image."""
        from m2sa_ros.messages.image_conversion import depth_to_msg, rgb_to_msg
        from std_msgs.msg import Header

        if self.done.is_set():
            return
        try:
            frame = self.source.next_frame()
        except CameraError as exc:
            self.error = str(exc)
            self.done.set()
            return
        header = Header(stamp=self.node.get_clock().now().to_msg(), frame_id=self.frame_id)
        self.info_pub.publish(camera_info_msg(self.source.camera, header))
        if frame.depth is not None:
            self.depth_pub.publish(depth_to_msg(frame.depth, header, self.depth_encoding))
        self.image_pub.publish(rgb_to_msg(frame.rgb, header))
        self.sent += 1
        if self.count and self.sent >= self.count:
            self.done.set()

    def wait_for_delivery(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) until reliable subscribers acknowledged what was published."""
        from rclpy.duration import Duration

        for pub in (self.info_pub, self.depth_pub, self.image_pub):
            pub.wait_for_all_acked(Duration(seconds=timeout_s))

    def close(self) -> None:
        self.timer.cancel()
        self.node.destroy_node()
        self.source.close()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Publish colour, registered depth and camera_info at a rate, on the perception "
                               "node's default topics (image, depth, camera_info), from an image file, a folder "
                               "of images, a video or the synthetic world.",
        epilog="Examples: m2sa-camera --synthetic | m2sa-camera desk.jpg --fov 69 | "
               "m2sa-camera clip.mp4 --namespace /front_camera. ROS arguments go after --ros-args.")
    parser.add_argument("source", nargs="?", help="an image file, a folder of images or a video file")
    parser.add_argument("--synthetic", action="store_true",
                        help="publish a scene of the synthetic world with its registered depth")
    parser.add_argument("--scene", type=int, default=0, help="--synthetic: the scene's index (default 0)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"--synthetic: the world's seed (default {DEFAULT_SEED}, the demo's, unseen in training)")
    parser.add_argument("--size", type=int, default=256, help="--synthetic: image size in pixels (default 256)")
    parser.add_argument("--depth-artefacts", default="mild",
                        help="--synthetic: none, mild (default) or strong sensor artefacts, redrawn every frame")
    parser.add_argument("--depth", help="registered depth for an image (a file) or a folder (same-named files): "
                                        "16-bit PNG/TIFF millimetres, 32-bit float TIFF or .npy metres")
    parser.add_argument("--depth-encoding", choices=("32FC1", "16UC1"), default="32FC1",
                        help="the published depth: 32FC1 metres (default) or 16UC1 millimetres")
    parser.add_argument("--camera-info", help="camera calibration YAML (camera_calibration / camera_info_manager)")
    parser.add_argument("--fov", type=float, default=DEFAULT_FOV_DEG,
                        help=f"horizontal field of view in degrees without --camera-info (default {DEFAULT_FOV_DEG:g})")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE_HZ,
                        help=f"frames per second (default {DEFAULT_RATE_HZ:g})")
    parser.add_argument("--namespace", default="", help="namespace of the topics, e.g. /front_camera (default: none)")
    parser.add_argument("--frame-id", default=DEFAULT_FRAME_ID, help=f"header frame_id (default {DEFAULT_FRAME_ID})")
    parser.add_argument("--count", type=int, default=0, help="stop after this many frames (default 0: until Ctrl-C)")
    return parser


def _check(args: argparse.Namespace) -> None:
    if not args.rate > 0:
        raise CameraError(f"--rate must be > 0 frames per second, got {args.rate}")
    if not 1.0 <= args.fov < 179.0:
        raise CameraError(f"--fov must be within [1, 179) degrees, got {args.fov}")
    if args.count < 0:
        raise CameraError(f"--count must be >= 0, got {args.count}")
    if args.size < 64:
        raise CameraError(f"--size must be at least 64 pixels, got {args.size}")
    if args.scene < 0:
        raise CameraError(f"--scene must be >= 0, got {args.scene}")
    if args.synthetic and (args.depth or args.camera_info):
        raise CameraError("--synthetic has its own depth and camera; --depth and --camera-info are for files")


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point ``m2sa-camera``: bad input is one line and exit 2 (m2sa_core.cli_errors)."""
    raw = list(sys.argv[1:] if argv is None else argv)
    ros_args: list[str] = []
    if "--ros-args" in raw:
        at = raw.index("--ros-args")
        raw, ros_args = raw[:at], raw[at:]
    args = build_parser().parse_args(raw)
    _check(args)
    return _run(open_source(args), args, ros_args)


# How long the camera waits, after SIGINT / SIGTERM, for its ROS teardown before it
# exits without it: a DDS writer or participant that does not let go must not keep a
# stopped camera running until the caller kills it.
TEARDOWN_GRACE_S = 10.0


def _run(source: Source, args: argparse.Namespace, ros_args: list[str]) -> int:
    """
    Publish until SIGINT / SIGTERM (exit 0), ``--count`` frames (0) or a source error (2).

    The ROS side runs on a thread of its own and the main thread only waits: Python runs
    signal handlers on the main thread alone, so a middleware call that blocks (creating
    the participant, destroying a writer) cannot keep a signal from ending the camera.
    """
    stop = SignalSafeEvent()  # threading.Event.set() can deadlock in a signal handler (signal_event.py)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    outcome: dict[str, Any] = {}
    publishing = threading.Thread(target=_publish, args=(source, args, ros_args, stop, outcome),
                                  name="m2sa-camera-ros", daemon=True)
    publishing.start()
    while publishing.is_alive() and not stop.wait(0.1):
        pass
    publishing.join(TEARDOWN_GRACE_S if stop.is_set() else None)
    for signum in previous:  # a second Ctrl-C from here on must not turn exit 0 into -2
        signal.signal(signum, signal.SIG_IGN)
    if publishing.is_alive():
        print(f"{PROG}: the ROS middleware did not finish its teardown within {TEARDOWN_GRACE_S:g} s of the "
              "signal; exiting without it", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)  # the stuck thread holds the interpreter's exit; nothing of ours is left to do
    if "exception" in outcome:
        raise outcome["exception"]
    return 0


def _publish(source: Source, args: argparse.Namespace, ros_args: list[str], stop: SignalSafeEvent,
             outcome: dict[str, Any]) -> None:
    """Run the ROS side of :func:`_run`, handing its exception, if any, to the main thread."""
    try:
        _publish_until(source, args, ros_args, stop)
    except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
        outcome["exception"] = exc


def _publish_until(source: Source, args: argparse.Namespace, ros_args: list[str], stop: SignalSafeEvent) -> None:
    """Publish until ``stop``, ``--count`` frames or a source error, then tear the ROS side down."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(args=[PROG, *ros_args], context=context, signal_handler_options=SignalHandlerOptions.NO)
    camera: DeskCamera | None = None
    try:
        camera = DeskCamera(source, args.rate, args.frame_id, args.depth_encoding, args.count,
                            context=context, namespace=args.namespace)
        print(f"{PROG}: publishing {source.description} at {args.rate:g} Hz on {', '.join(camera.topics())} "
              f"(frame {args.frame_id})", flush=True)
        if not source.has_depth:
            print(f"{PROG}: no depth: the node answers with masks and boxes but no 3-D geometry "
                  "(give --depth, or use --synthetic)", flush=True)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(camera.node)
        while not stop.is_set() and not camera.done.is_set() and context.ok():
            executor.spin_once(timeout_sec=0.1)
        if camera.done.is_set() and camera.error is None:
            camera.wait_for_delivery()  # --count's last frame must reach the subscribers
        executor.shutdown()
    finally:
        if camera is not None:
            camera.close()
        rclpy.try_shutdown(context=context)
    if camera is not None and camera.error:
        raise CameraError(camera.error)  # a file of a folder that went bad while playing


if __name__ == "__main__":
    sys.exit(main())
