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
A result's 3-D values in the robot's frame (``target_frame``): tf2 at the image's stamp.

A grasp or press planner works in ``base_link`` or ``odom``; the geometry is measured in
the colour camera's optical frame. With ``target_frame`` set, every target's centroid,
pose and points (and so the markers and the merged ``target_points`` cloud, built from
the result) are moved into it with the transform tf2 gives **at the image's stamp**,
never "the latest" (``Time()``): on a moving robot the latest transform is the pose of a
later instant and moves every box by the distance travelled since the image was taken.
Masks, boxes and the image size stay in image space, under the image's header. The
result says which frame its 3-D values are in (``geometry_frame_id``) and, when they are
not in the requested one, why (``transform_error``); the values then stay in the optical
frame, exactly as without ``target_frame``, so a result always goes out.

The wait is bounded by ``tf_timeout`` and happens on the worker thread, after the model
ran (so it overlaps what the model took: the sample after the image's stamp has usually
arrived by then). It is event-driven, on tf2_ros's ``wait_for_transform_async`` (woken by
the listener's callback on the executor, whose own callback group lets it run beside
everything else), with a hard deadline: tf2_ros's blocking ``can_transform`` polls every
20 ms and may overrun its timeout by as much.

:func:`move_result` is the message side (no tf2: a RigidTransform from m2sa_core does the
arithmetic); :class:`ResultFrames` holds the tf2 Buffer and TransformListener and does
the lookups. tf2_ros is imported only when a ``target_frame`` is first set, so a node
without one subscribes to nothing more and needs no tf2 at all.
"""

from __future__ import annotations

from dataclasses import dataclass
import threading
import time
from typing import Any, Callable

from m2sa_core.geometry.rigid_transform import RigidTransform
from m2sa_ros.messages.cloud_conversion import transform_cloud
import numpy as np

# The transform at an image's stamp is looked up after the model ran on that image: on a
# CPU a command takes seconds, so tf2's default 10 s cache could have dropped it already.
TF_CACHE_S = 60.0


@dataclass(frozen=True)
class Lookup:
    """
    One lookup's outcome: ``transform``, or None with the error and its cause.

    Without a transform, ``error`` (the result's ``transform_error``) and ``cause`` (what the
    one warning is keyed by: a kind of failure, never its changing numbers).
    """

    transform: RigidTransform | None
    error: str = ""
    cause: str = ""


def transform_from_msg(transform: Any) -> RigidTransform:
    """geometry_msgs/Transform (or a TransformStamped's ``transform``) -> RigidTransform."""
    t, q = transform.translation, transform.rotation
    return RigidTransform.from_quaternion((t.x, t.y, t.z), (q.x, q.y, q.z, q.w))


def transform_msg(parent: str, child: str, stamp_ns: int, translation: Any, quaternion: Any) -> Any:
    """
    Build the geometry_msgs/TransformStamped ``parent`` <- ``child`` at ``stamp_ns``, as tf2 carries it.

    ``translation`` (3,) and ``quaternion`` (x, y, z, w), the form scipy's Rotation gives:
    what a Buffer is filled with or a broadcaster sends (the tests and benchmarks fill
    theirs with it); :func:`transform_from_msg` reads its ``transform`` back.
    """
    from geometry_msgs.msg import TransformStamped

    msg = TransformStamped()
    msg.header.frame_id, msg.child_frame_id = parent, child
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(int(stamp_ns), 10**9)
    t, q = msg.transform.translation, msg.transform.rotation
    t.x, t.y, t.z = (float(v) for v in translation)
    q.x, q.y, q.z, q.w = (float(v) for v in quaternion)
    return msg


def move_result(msg: Any, transform: RigidTransform, frame_id: str) -> None:
    """
    Move ``msg`` (an m2sa_ros/SegmentationResult in its optical frame) into ``frame_id``, in place.

    Per target: the centroid (when set), the pose (centre and axes, when set) and the
    points, whose cloud header takes ``frame_id`` (the stamp stays the image's). Sizes
    stay: a box's extents lie along its own axes, which turn with it. Masks and the bbox
    are image-space and untouched. Sets ``geometry_frame_id``; ``transform_error`` empty.
    """
    for target in msg.targets:
        if target.has_centroid:
            c = target.centroid
            c.x, c.y, c.z = (float(v) for v in transform.apply(np.array([c.x, c.y, c.z])))
        if target.has_pose:
            p, o = target.pose.position, target.pose.orientation
            position, quaternion = transform.apply_pose(np.array([p.x, p.y, p.z]), np.array([o.x, o.y, o.z, o.w]))
            p.x, p.y, p.z = (float(v) for v in position)
            o.x, o.y, o.z, o.w = (float(v) for v in quaternion)
        target.points = transform_cloud(target.points, transform, frame_id)
    msg.geometry_frame_id = frame_id
    msg.transform_error = ""


def _stamp_s(stamp: Any) -> float:
    return int(stamp.sec) + int(stamp.nanosec) * 1e-9


class ResultFrames:
    """
    tf2 lookups at each result's image stamp, within ``tf_timeout``; thread-safe.

    ``listen(node)`` (on the executor's thread: configure or a parameter change) creates
    the Buffer and the TransformListener on the node the first time a ``target_frame`` is
    set; ``apply`` (the worker) moves a result or says why not; ``close`` drops the
    listener's subscriptions (cleanup). ``buffer`` may be handed in directly (tests, the
    benchmark: a Buffer filled by hand, no node). ``warn_once(key, text)`` is the node's.
    """

    def __init__(self, warn_once: Callable[[str, str], None], buffer: Any = None) -> None:
        self._warn_once = warn_once
        self._buffer = buffer
        self._listener: Any = None
        self._unavailable = ""  # why tf2_ros could not be used (not installed)
        self._lock = threading.Lock()

    @property
    def buffer(self) -> Any:
        """Return the tf2_ros Buffer (None until ``listen`` or without tf2_ros)."""
        return self._buffer

    def listen(self, node: Any) -> None:
        """
        Start listening to /tf and /tf_static on ``node``, once.

        The listener's subscriptions are in a reentrant group of their own
        (tf2_ros's), so they are served while the worker waits and while other
        callbacks block.
        """
        with self._lock:
            if self._listener is not None:
                return
            try:
                from rclpy.duration import Duration
                from tf2_ros.buffer import Buffer
                from tf2_ros.transform_listener import TransformListener
            except ImportError as exc:
                self._unavailable = f"tf2_ros is not installed ({exc})"
                self._warn_once("tf:unavailable", f"target_frame needs tf2_ros: {self._unavailable}; "
                                                  "3-D values stay in the optical frame")
                return
            if self._buffer is None:
                self._buffer = Buffer(cache_time=Duration(seconds=TF_CACHE_S))
            self._listener = TransformListener(self._buffer, node)

    def close(self) -> None:
        """Drop the listener's subscriptions (the node's cleanup); ``listen`` starts them again."""
        with self._lock:
            listener, self._listener = self._listener, None
            self._buffer = None
        if listener is not None:
            try:
                listener.unregister()
            except Exception:  # noqa: BLE001 - the node is being destroyed anyway
                pass

    def lookup(self, target_frame: str, source_frame: str, stamp: Any, timeout_s: float) -> Lookup:
        """
        Return the transform taking ``source_frame`` coordinates to ``target_frame`` at ``stamp``.

        ``stamp`` is a builtin_interfaces/Time; the lookup waits at most ``timeout_s`` seconds.
        """
        buffer = self._buffer
        when = _stamp_s(stamp)
        where = f"from {source_frame or '(empty frame_id)'} to {target_frame} at {when:.3f} s"
        if buffer is None:
            why = self._unavailable or "no tf listener (target_frame set before configure?)"
            return Lookup(None, f"no transform {where}: {why}", "unavailable")
        if int(stamp.sec) == 0 and int(stamp.nanosec) == 0:
            # tf2 reads time 0 as "the latest": never the pose of the image's instant.
            return Lookup(None, f"no transform {where}: the image has no stamp, and tf2 would give the "
                                "latest transform, not the one of the image's time", "unstamped")
        from rclpy.time import Time
        import tf2_py

        time_ = Time.from_msg(stamp)
        ok, _reason = buffer.can_transform_core(target_frame, source_frame, time_)
        if not ok and timeout_s > 0:
            self._wait(buffer, target_frame, source_frame, time_, timeout_s)
        try:
            found = buffer.lookup_transform_core(target_frame, source_frame, time_)
        except (tf2_py.LookupException, tf2_py.ConnectivityException, tf2_py.ExtrapolationException,
                tf2_py.InvalidArgumentException, tf2_py.TransformException) as exc:
            reason = " ".join(str(exc).split())
            cause = type(exc).__name__
            if isinstance(exc, tf2_py.ExtrapolationException):  # late (future) or already dropped (past)
                cause += ":future" if "future" in reason else ":past" if "past" in reason else ""
            return Lookup(None, f"no transform {where} within {timeout_s:g} s: {reason}", cause)
        return Lookup(transform_from_msg(found.transform))

    @staticmethod
    def _wait(buffer: Any, target_frame: str, source_frame: str, time_: Any, timeout_s: float) -> None:
        """Block until tf2 can give the transform or ``timeout_s`` passed, whichever is first."""
        arrived = threading.Event()
        future = buffer.wait_for_transform_async(target_frame, source_frame, time_)
        future.add_done_callback(lambda _f: arrived.set())
        try:
            # A sample set between the check above and the registration would wake nobody:
            # look once more now that the callback is in.
            deadline = time.monotonic() + timeout_s
            if not buffer.can_transform_core(target_frame, source_frame, time_)[0]:
                arrived.wait(max(0.0, deadline - time.monotonic()))
        finally:
            if not future.done():
                future.cancel()  # removes its callback from the buffer

    def apply(self, msg: Any, target_frame: str, timeout_s: float, where: str = "") -> Lookup | None:
        """
        Move ``msg`` into ``target_frame`` or leave it in its optical frame saying why.

        None when there is nothing to do (no ``target_frame``, or an error result, which has
        no targets); else the lookup (``transform`` None: ``msg.transform_error`` says why,
        and the failure's cause was warned about once per camera, frame pair and cause). A
        result without targets is looked up too, so ``geometry_frame_id`` says the same
        thing whatever the answer named.
        """
        msg.geometry_frame_id = msg.header.frame_id
        msg.transform_error = ""
        if not target_frame or not msg.success:
            return None
        source = msg.header.frame_id
        found = self.lookup(target_frame, source, msg.header.stamp, timeout_s)
        if found.transform is None:
            msg.transform_error = found.error
            camera = f"camera {where}: " if where else ""
            self._warn_once(f"tf:{where}:{source}->{target_frame}:{found.cause}",
                            f"{camera}3-D values stay in {source or 'the optical frame'}: {found.error} "
                            f"(said once per cause; each result's transform_error says it too)")
            return found
        move_result(msg, found.transform, target_frame)
        return found
