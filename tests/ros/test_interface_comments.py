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
The comments of msg/, srv/ and action/ survive rosidl as written.

rosidl reads a bracketed word in a field's comment as the field's unit: "answer text,
[SEG] markers removed" became the unit "SEG" and the comment "answer text, markers
removed", which is what `ros2 interface show` and every generated .idl then carried.
Checked with rosidl's own parser (the sources as they are now) and on the .idl files
the build generated (what ros2cli and the generated code see).
"""

from __future__ import annotations

from pathlib import Path
import re

import pytest

ROOT = Path(__file__).resolve().parents[2]
INTERFACES = sorted(p for d in ("msg", "srv", "action") for p in (ROOT / d).iterdir()
                    if p.suffix in (".msg", ".srv", ".action"))


def _source_comments(path: Path) -> list[str]:
    """Every comment's text in an interface file, stripped, in order."""
    comments = []
    for line in path.read_text().splitlines():
        if "#" in line and line.split("#", 1)[1].strip():
            comments.append(line.split("#", 1)[1].strip())
    return comments


def _specs(path: Path) -> list:
    """Return the message specifications rosidl parses from one interface file."""
    parser = pytest.importorskip("rosidl_adapter.parser")
    text, name = path.read_text(), path.stem
    if path.suffix == ".msg":
        return [parser.parse_message_string("m2sa_ros", name, text)]
    if path.suffix == ".srv":
        srv = parser.parse_service_string("m2sa_ros", name, text)
        return [srv.request, srv.response]
    action = parser.parse_action_string("m2sa_ros", name, text)
    return [action.goal, action.result, action.feedback]


def test_interfaces_are_found():
    assert {p.name for p in INTERFACES} >= {"SegmentationResult.msg", "Target.msg", "Command.msg",
                                            "Segment.srv", "Segment.action", "Track.action"}


@pytest.mark.parametrize("path", INTERFACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rosidl_parser_keeps_every_comment_whole(path: Path):
    """No comment reads as a unit, and each comment's text is in what rosidl parsed."""
    parsed: list[str] = []
    for spec in _specs(path):
        for item in [spec, *spec.fields, *spec.constants]:
            assert "unit" not in item.annotations, f"{path.name}: {item} has unit {item.annotations['unit']!r}"
            parsed.extend(line.strip() for line in item.annotations.get("comment", []))
    text = "\n".join(parsed)
    for comment in _source_comments(path):
        assert comment in text, f"{path.name}: rosidl changed the comment {comment!r}"


def _generated_idl() -> list[Path]:
    """Return the .idl files of the current build: the venv's share/ (make setup) or build/ros/."""
    import sys

    for base in (Path(sys.prefix) / "share" / "m2sa_ros", ROOT / "build" / "ros" / "rosidl_adapter" / "m2sa_ros"):
        found = sorted(base.glob("*/*.idl"))
        if found:
            return found
    return []


def test_generated_idl_has_no_units_and_the_answer_comment_whole():
    idl = _generated_idl()
    if not idl:
        pytest.skip("no generated .idl (run `make setup`)")
    assert {p.stem for p in idl} >= {"SegmentationResult", "Segment", "Track"}
    for path in idl:
        text = path.read_text()
        assert "@unit" not in text, f"{path}: a comment was read as a unit (rebuild with `make setup`?)"
    result = next(p for p in idl if p.name == "SegmentationResult.idl").read_text()
    source = [c for c in _source_comments(ROOT / "msg" / "SegmentationResult.msg") if c.startswith("answer text")]
    assert source and re.search(r'"' + re.escape(source[0]) + r'"', result), result
