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
The pipeline's own lifecycle, without a node: ``open(worker)`` / ``close(reason)``.

The node's activate opens the pipeline on a new worker; deactivate, shutdown and error
close it (pipeline.py). Every command still gets exactly one answer: a queued one from
the stopping worker, a later one from ``accept``, both with the close's reason; a second
close is harmless and an open after a close takes commands again. ``load`` / ``listen``
/ ``unload`` start and stop tf2's listener with the model (configure, cleanup).
"""

from __future__ import annotations

from collections import Counter
import threading
from types import SimpleNamespace
from typing import Any

from m2sa_ros.cameras.camera_state import Camera
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.msg import SegmentationResult
from m2sa_ros.params.node_params import PARAMETERS, validate
from m2sa_ros.pipeline import CommandPipeline, Request
from m2sa_ros.tracking.tracks import Track, TrackSettings
from m2sa_ros.worker import CommandWorker, Job
import pytest

DEFAULTS = {spec.name: spec.default for spec in PARAMETERS}


class _Logger:

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, text: str) -> None:
        self.errors.append(text)

    def warning(self, text: str) -> None:
        self.warnings.append(text)


class _Worker:
    """A worker that keeps what it is given: the jobs, and the reason it was stopped with."""

    def __init__(self, stops_in_time: bool = True) -> None:
        self.jobs: list[Job] = []
        self.stopped: list[str] = []
        self.max_queue = 4
        self.depth = 0
        self._stops_in_time = stops_in_time

    def submit(self, job: Job) -> bool:
        self.jobs.append(job)
        return True

    def stop(self, reason: str) -> bool:
        self.stopped.append(reason)
        return self._stops_in_time


class _Frames:
    """ResultFrames' listen / close, counted."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def listen(self, node: Any) -> None:
        self.calls.append(("listen", node))

    def close(self) -> None:
        self.calls.append("close")


def _pipeline(**params: Any) -> tuple[CommandPipeline, _Logger]:
    logger = _Logger()
    pipeline = CommandPipeline(logger, NodeStats(), Counter(), topic_name=lambda name: name,
                               warn_once=lambda key, text: None)
    pipeline.load(SimpleNamespace(), validate({**DEFAULTS, "heap_trim_period": 0.0, **params}))
    return pipeline, logger


def _request(camera: Camera, name: str, answers: list[tuple[str, SegmentationResult]]) -> Request:
    return Request(request_id=name, command="the red mug", source="topic", received_ns=0, camera=camera,
                   on_done=lambda msg: answers.append((name, msg)))


def _errors(answers: list[tuple[str, SegmentationResult]]) -> dict[str, str]:
    return {name: msg.error for name, msg in answers}


@pytest.fixture
def camera() -> Camera:
    return Camera(name="", key_prefix="test")


def test_a_pipeline_never_opened_answers_not_active(camera):
    pipeline, _ = _pipeline()
    answers: list[tuple[str, SegmentationResult]] = []
    assert not pipeline.active and pipeline.worker is None and pipeline.closed_reason is None
    pipeline.accept(_request(camera, "r1", answers))
    assert _errors(answers) == {"r1": "node is not active"}


def test_open_then_accept_queues_the_command_on_the_worker_handed_to_open(camera):
    pipeline, _ = _pipeline()
    worker = _Worker()
    pipeline.open(worker)
    assert pipeline.active and pipeline.worker is worker and pipeline.closed_reason is None
    answers: list[tuple[str, SegmentationResult]] = []
    req = _request(camera, "r1", answers)
    pipeline.accept(req)
    assert [job.payload for job in worker.jobs] == [req] and worker.jobs[0].handler is pipeline
    assert worker.jobs[0].lane == camera.lane
    assert answers == [] and not req.finished  # the worker answers it
    other = Job(payload="a tracked frame", handler=SimpleNamespace(), bounded=False)
    assert pipeline.submit(other) and worker.jobs[-1] is other


def test_state_is_read_only_from_outside():
    pipeline, _ = _pipeline()
    for name, value in (("active", True), ("closed_reason", None), ("worker", _Worker())):
        with pytest.raises(AttributeError):
            setattr(pipeline, name, value)


def test_close_ends_tracks_then_stops_the_worker_and_every_command_gets_its_reason_once(camera):
    """Inactive first, the tracks ended, then the worker stopped: queued and later commands answered once."""
    pipeline, logger = _pipeline()
    seen_at_cancel: list[tuple[bool, str]] = []
    started, release = threading.Event(), threading.Event()
    track = Track("t1", "the mug", TrackSettings(), 0.0)
    camera.tracks.add(track)

    class Blocker:
        """The job running when the close comes: it waits for its cancel."""

        def run(self, job: Job) -> None:
            started.set()
            while not job.should_stop() and not release.wait(0.01):
                pass
            seen_at_cancel.append((pipeline.active, track.reason))

        def reject(self, job: Job, reason: str) -> None:
            raise AssertionError("the running job is cancelled, not rejected")

        def crashed(self, job: Job, exc: BaseException) -> None:
            raise AssertionError(f"crashed: {exc}")

    worker = CommandWorker(max_queue=4, lanes=(camera.lane,))
    pipeline.open(worker)
    try:
        assert worker.submit(Job(payload="running", handler=Blocker(), lane=camera.lane))
        assert started.wait(10)
        answers: list[tuple[str, SegmentationResult]] = []
        queued = [_request(camera, f"q{n}", answers) for n in range(3)]
        for req in queued:
            pipeline.accept(req)
        assert worker.depth == 3 and answers == []

        assert pipeline.close("node deactivated", [camera])
    finally:
        release.set()
        worker.stop("test over")
    assert seen_at_cancel == [(False, "node deactivated")]  # the track ended before the worker stopped
    assert not pipeline.active and pipeline.worker is None
    assert pipeline.closed_reason == "cancelled: node deactivated"
    assert sorted(name for name, _ in answers) == ["q0", "q1", "q2"]  # each once
    assert set(_errors(answers).values()) == {"cancelled: node deactivated"}

    late: list[tuple[str, SegmentationResult]] = []
    pipeline.accept(_request(camera, "late", late))  # e.g. a goal accepted just before the close
    assert _errors(late) == {"late": "cancelled: node deactivated"} and len(late) == 1
    assert not pipeline.submit(Job(payload="a tracked frame", handler=SimpleNamespace(), bounded=False))
    assert not any("answered twice" in line for line in logger.errors)


def test_close_twice_is_harmless_and_the_last_reason_answers(camera):
    pipeline, logger = _pipeline()
    worker = _Worker()
    pipeline.open(worker)
    assert pipeline.close("node shutting down (SIGINT)", [camera])
    assert pipeline.close("node shutting down", [camera])
    assert worker.stopped == ["cancelled: node shutting down (SIGINT)"]  # the worker is stopped once
    assert pipeline.worker is None and not pipeline.active and logger.errors == []
    answers: list[tuple[str, SegmentationResult]] = []
    pipeline.accept(_request(camera, "r1", answers))
    assert _errors(answers) == {"r1": "cancelled: node shutting down"}


def test_close_before_any_open_is_harmless(camera):
    pipeline, logger = _pipeline()
    assert pipeline.close("node shutting down", [camera])
    assert pipeline.closed_reason == "cancelled: node shutting down" and logger.errors == []


def test_open_after_close_takes_commands_again_on_the_new_worker(camera):
    pipeline, _ = _pipeline()
    first, second = _Worker(), _Worker()
    pipeline.open(first)
    pipeline.close("node deactivated", [camera])
    pipeline.open(second)
    assert pipeline.active and pipeline.worker is second and pipeline.closed_reason is None
    answers: list[tuple[str, SegmentationResult]] = []
    req = _request(camera, "r1", answers)
    pipeline.accept(req)
    assert [job.payload for job in second.jobs] == [req] and first.jobs == [] and answers == []
    pipeline.close("node deactivated", [camera])
    assert second.stopped == ["cancelled: node deactivated"] and pipeline.worker is None


def test_a_worker_that_does_not_stop_in_time_is_said_and_still_taken_away(camera):
    pipeline, logger = _pipeline()
    pipeline.open(_Worker(stops_in_time=False))
    assert not pipeline.close("node deactivated", [camera])
    assert pipeline.worker is None and not pipeline.active
    assert logger.errors == ["the worker did not stop within 30 s (model ignored cancel)"]


def test_tf_listener_follows_target_frame_and_stops_at_unload():
    node = object()
    pipeline, _ = _pipeline()
    pipeline.frames = frames = _Frames()
    pipeline.listen(node)  # no target_frame: no listener
    assert frames.calls == []
    pipeline.update_params({"target_frame": "base_link"})
    pipeline.listen(node)
    assert frames.calls == [("listen", node)]
    assert pipeline.unload()
    assert frames.calls == [("listen", node), "close"]
    pipeline.listen(node)  # unloaded: nothing to listen for
    assert frames.calls == [("listen", node), "close"]

    targeted, _ = _pipeline(target_frame="map")
    targeted.frames = frames = _Frames()
    targeted.listen(node)
    assert frames.calls == [("listen", node)]
