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
camera_health.py and the node status's new levels, without a node: times are given, not waited for.

The node over DDS, with a camera that stops, is test_node_camera_health.py.
"""

from __future__ import annotations

from m2sa_ros.diagnostics.camera_health import camera_health, CameraHealthSettings, ImageArrivals
from m2sa_ros.diagnostics.node_status import ERROR, NodeStats, OK, status_level, WARN
from m2sa_ros.model.model_source import resolve_model_source
import pytest

S = 1_000_000_000  # ns
LIMITS = CameraHealthSettings(image_min_rate=5.0, image_timeout=2.0, max_image_age=0.5, window_s=1.0)


def _judge(arrivals: ImageArrivals, newest: int | None, now: int, active: bool = True) -> dict[str, tuple]:
    statuses = camera_health("node: m2sa perception", "/cam/image", arrivals, newest, now, LIMITS, active,
                             "active" if active else "inactive")
    return {name.rsplit(": ", 1)[1]: (level, message, values) for name, level, message, values in statuses}


def _camera(hz: float, start: int, until: int) -> ImageArrivals:
    arrivals = ImageArrivals()
    arrivals.start(start)
    t = start
    while t <= until:
        arrivals.tick(t)
        t += int(S / hz)
    return arrivals


def test_a_camera_at_its_rate_with_fresh_stamps_is_ok():
    arrivals = _camera(10.0, 0, 3 * S)
    got = _judge(arrivals, newest=3 * S - S // 100, now=3 * S + S // 50)
    assert got["image rate"][:2] == (OK, "10.0 Hz on /cam/image"), got
    assert got["image stamp"][0] == OK and got["image stamp"][2]["image_age_s"] == pytest.approx(0.03)
    assert got["image rate"][2]["images_received"] == 31


def test_a_slow_camera_warns_below_the_floor():
    got = _judge(_camera(2.0, 0, 3 * S), newest=3 * S, now=3 * S)
    assert got["image rate"][:2] == (WARN, "2.0 Hz on /cam/image, below image_min_rate 5 Hz"), got


def test_a_camera_that_stopped_warns_on_its_stamp_then_errors_on_its_silence():
    arrivals = _camera(10.0, 0, 3 * S)
    after = _judge(arrivals, newest=3 * S, now=3 * S + S)  # 1 s of silence: stale, not yet dead
    assert after["image stamp"][:2] == (WARN, "newest image on /cam/image is 1.00 s old, over max_image_age 0.5 s: "
                                              "commands are refused")
    assert after["image rate"][:2] == (WARN, "0.0 Hz on /cam/image, below image_min_rate 5 Hz")
    dead = _judge(arrivals, newest=3 * S, now=5 * S + S // 2)
    assert dead["image rate"][:2] == (ERROR, "no image on /cam/image for 2.5 s"), dead


def test_a_camera_that_never_sent_waits_then_errors_counting_from_activation():
    arrivals = ImageArrivals()
    arrivals.start(10 * S)
    soon = _judge(arrivals, None, 11 * S)
    assert soon["image rate"][:2] == (WARN, "waiting for the first image on /cam/image")
    assert soon["image stamp"][:2] == (WARN, "no image stamp yet on /cam/image")
    late = _judge(arrivals, None, 13 * S)
    assert late["image rate"][:2] == (ERROR, "no image on /cam/image in the 3.0 s since the node became active")


def test_a_stamp_from_the_future_warns_of_two_clocks():
    got = _judge(_camera(10.0, 0, 3 * S), newest=5 * S, now=3 * S)
    assert got["image stamp"][0] == WARN and "stamped 2.00 s in the future" in got["image stamp"][1]


def test_an_inactive_node_reports_no_subscription_at_level_ok():
    got = _judge(ImageArrivals(), None, 100 * S, active=False)
    assert {k: v[:2] for k, v in got.items()} == {
        "image rate": (OK, "not subscribed to /cam/image: the node is inactive"),
        "image stamp": (OK, "not subscribed to /cam/image: the node is inactive")}


def test_results_failing_in_a_row_raise_the_node_to_error_and_one_success_clears_it():
    stats = NodeStats()
    for _ in range(3):
        stats.record(False, 0.0, "image too old: 4.00 s > max_image_age 1.00 s")
    snap = stats.snapshot()
    level = status_level("active", False, 0, 4, toy=False, failed_in_a_row=snap["failed_in_a_row"],
                         failed_commands_error=3, last_error=snap["last_error"])
    assert level == (ERROR, "the last 3 results failed, the last with: image too old: 4.00 s > max_image_age 1.00 s")
    assert status_level("active", False, 0, 4, failed_in_a_row=3, failed_commands_error=0)[0] == OK  # 0: never
    stats.record(True, 5.0)
    assert stats.snapshot()["failed_in_a_row"] == 0


def test_the_shipped_tiny_model_warns_by_path_or_by_default(tmp_path):
    shipped = tmp_path / "models" / "m2sa-tiny-synth"
    shipped.mkdir(parents=True)
    (shipped / "config.json").write_text("{}")
    other = tmp_path / "mine"
    other.mkdir()
    assert resolve_model_source("", "", candidates=[shipped]).is_shipped
    assert resolve_model_source(str(tmp_path / "models" / ".." / "models" / "m2sa-tiny-synth"), "",
                                candidates=[shipped]).is_shipped
    assert not resolve_model_source(str(other), "", candidates=[shipped]).is_shipped
    level, message = status_level("active", False, 0, 4, toy=True)
    assert level == WARN and "shipped tiny model" in message and "(set model_path)" in message
    # A refused depth says more than the model's name: it comes first.
    assert status_level("active", False, 0, 4, toy=True, depth_refused="depth on /depth refused: 16UC1 scale") == \
        (WARN, "depth refused: depth on /depth refused: 16UC1 scale")
