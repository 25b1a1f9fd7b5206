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
scripts/planted_bugs.py still fits the code, and scripts/plant_bugs.py always puts the code back.

Planting takes minutes (a pytest run per bug), so it is not part of the suite; what can go
stale without it is checked here in milliseconds, without a child process: each bug's
original text is in its file exactly once (a moved or reworded line would otherwise plant
nothing, or plant the slip somewhere else), the planted file still parses, and every test
it names exists, so a renamed test cannot turn a catch into "no test selected". The list
covers the node and its pipeline, the geometry, the conversions, the launch file and the
CLI tools. The planting itself runs on a temporary file with a stand-in for pytest: the
bytes and the modification time come back after a failure inside the block, and a verdict
follows pytest's exit status.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # By this name plant_bugs imports the list, and dataclasses look their module up.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


planted_bugs = _load("planted_bugs")
plant_bugs = _load("plant_bugs")
BUGS = planted_bugs.BUGS
IDS = [bug.bug_id for bug in BUGS]

# The area a file belongs to, the first pattern that matches (the node: the rest of m2sa_ros).
AREA_PATTERNS = (
    (planted_bugs.CONVERSION, r"m2sa_ros/messages/\w+_conversion\.py|m2sa_ros/messages/mask_encoding\.py"
     r"|m2sa_core/label_image\.py|m2sa_core/inference/absence\.py"),
    (planted_bugs.GEOMETRY, r"m2sa_core/geometry/\w+\.py|m2sa_ros/depth/\w+\.py"),
    (planted_bugs.CLI, r"m2sa_ros/bag/\w+\.py|m2sa_ros/tools/desk_camera\.py|m2sa_ros/main\.py|training/\w+\.py"
     r"|m2sa_core/evaluation/\w+\.py"),
    (planted_bugs.LAUNCH, r"launch/[\w.]+\.launch\.py"),
    (planted_bugs.NODE, r"m2sa_ros/(\w+/)?\w+\.py"),
)


def _area_of(path: str) -> str | None:
    return next((area for area, pattern in AREA_PATTERNS if re.fullmatch(pattern, path)), None)


def _test_names(path: Path) -> set[str]:
    """Return the tests a file defines: ``name`` for a function, ``Class::name`` for a method."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{item.name}" for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def test_at_least_twenty_bugs_with_unique_ids_and_known_areas():
    assert len(BUGS) >= 20, f"only {len(BUGS)} planted bugs"
    assert len(set(IDS)) == len(IDS), sorted({i for i in IDS if IDS.count(i) > 1})
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i) for i in IDS), IDS
    assert {bug.area for bug in BUGS} <= set(planted_bugs.AREAS)


def test_the_bugs_cover_the_node_the_geometry_the_conversions_the_launch_file_and_the_cli_tools():
    assert {bug.area for bug in BUGS} == set(planted_bugs.AREAS)
    for bug in BUGS:
        assert _area_of(bug.path) == bug.area, f"{bug.bug_id}: {bug.path} is not in area {bug.area!r}"
    # The examples are in the list.
    for example in ("request-id-not-echoed", "tf-at-latest", "raw-distortion-ignored", "goal-answered-twice",
                    "unknown-parameter-unnamed"):
        assert example in IDS


@pytest.mark.parametrize("bug", BUGS, ids=IDS)
def test_the_original_is_in_its_file_exactly_once_and_the_planted_file_parses(bug):
    path = ROOT / bug.path
    assert path.is_file(), f"{bug.bug_id}: no file {bug.path}"
    text = path.read_text(encoding="utf-8")
    assert text.count(bug.original) == 1, f"{bug.bug_id}: {bug.original!r} occurs {text.count(bug.original)} times"
    assert bug.replacement != bug.original and bug.original.strip()
    assert "\n" not in bug.original and "\n" not in bug.replacement, f"{bug.bug_id}: a bug is one line"
    assert bug.breaks and "\n" not in bug.breaks
    ast.parse(plant_bugs.planted_text(text, bug), filename=bug.path)  # a slip, not a syntax error


@pytest.mark.parametrize("bug", BUGS, ids=IDS)
def test_every_selection_names_an_existing_test(bug):
    assert bug.caught_by, f"{bug.bug_id}: no test named"
    for selection in bug.caught_by:
        file, _, name = selection.partition("::")
        path = ROOT / file
        assert path.is_file() and path.name.startswith("test_") and file.startswith("tests/"), selection
        if name:
            assert re.sub(r"\[.*\]$", "", name) in _test_names(path), f"{bug.bug_id}: no test {selection}"


# --------------------------------------------------------------------------- planting, without pytest
SOURCE = "def speed(distance, seconds):\n    return distance / seconds\n"


def _bug(**fields):
    values = {"bug_id": "divides-the-wrong-way", "area": planted_bugs.NODE, "breaks": "speed is upside down",
              "path": "pkg/speed.py", "original": "distance / seconds", "replacement": "seconds / distance",
              "caught_by": ("tests/test_speed.py::test_speed",)}
    return planted_bugs.PlantedBug(**{**values, **fields})


@pytest.fixture
def checkout(tmp_path) -> Path:
    """Return a tiny checkout whose one source file has an old modification time."""
    source = tmp_path / "pkg" / "speed.py"
    source.parent.mkdir()
    source.write_text(SOURCE, encoding="utf-8")
    os.utime(source, ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    return tmp_path


@pytest.mark.parametrize("failure", [RuntimeError("the tests crashed"), KeyboardInterrupt()],
                         ids=["exception", "ctrl-c"])
def test_the_file_comes_back_byte_for_byte_with_its_mtime_after_a_failure(checkout, failure):
    source = checkout / "pkg" / "speed.py"
    before, mtime = source.read_bytes(), source.stat().st_mtime_ns
    with pytest.raises(type(failure)):
        with plant_bugs.planted(_bug(), checkout) as path:
            assert path == source
            assert source.read_text(encoding="utf-8") == SOURCE.replace("distance / seconds", "seconds / distance")
            raise failure
    assert source.read_bytes() == before and source.stat().st_mtime_ns == mtime


@pytest.mark.parametrize("returncode, verdict", [(1, "caught"), (0, "missed"), (2, "error"), (5, "error")])
def test_the_verdict_is_pytests_exit_status_and_the_tests_run_on_the_planted_code(checkout, returncode, verdict):
    source = checkout / "pkg" / "speed.py"
    seen = []

    def fake_pytest(command, **kwargs):
        seen.append((command, kwargs["cwd"], source.read_text(encoding="utf-8"), kwargs["env"]))
        return subprocess.CompletedProcess(command, returncode, stdout="1 failed" if returncode else "1 passed")

    outcome = plant_bugs.try_bug(_bug(), checkout, runner=fake_pytest)
    assert outcome.result == verdict and (outcome.detail == "") == (verdict == "caught")
    ((command, cwd, planted, env),) = seen
    assert command[:3] == [sys.executable, "-m", "pytest"] and command[-1] == "tests/test_speed.py::test_speed"
    assert {"-x", "no:randomly", "no:cacheprovider"} <= set(command)
    assert cwd == checkout and "seconds / distance" in planted and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert source.read_text(encoding="utf-8") == SOURCE


def test_a_run_past_its_timeout_is_an_error_and_the_code_comes_back(checkout):
    def hanging_pytest(command, **kwargs):
        raise subprocess.TimeoutExpired(command, kwargs["timeout"], output="collected 1 item")

    outcome = plant_bugs.try_bug(_bug(), checkout, timeout_s=3.0, runner=hanging_pytest)
    assert outcome.result == "error" and "killed after 3 s" in outcome.detail
    assert (checkout / "pkg" / "speed.py").read_text(encoding="utf-8") == SOURCE


@pytest.mark.parametrize("original, says", [("distance * seconds", "not found"), ("s", "found")])
def test_a_bug_that_does_not_fit_the_code_is_refused_before_anything_is_planted(checkout, original, says):
    bug = _bug(original=original)
    problems = plant_bugs.check_fits([bug], checkout)
    assert list(problems) == [bug.bug_id] and says in problems[bug.bug_id] and "exactly once" in problems[bug.bug_id]
    with pytest.raises(plant_bugs.PlantError):
        with plant_bugs.planted(bug, checkout):
            pass
    assert (checkout / "pkg" / "speed.py").read_text(encoding="utf-8") == SOURCE


def test_an_unknown_id_is_one_line_and_exit_status_2(capsys):
    assert plant_bugs.main(["--only", "tf-at-latest", "no-such-bug"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == [
        "plant_bugs: error: unknown bug id 'no-such-bug' (see --list)"]


def test_list_names_every_bug_and_plants_nothing(capsys):
    assert plant_bugs.main(["--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == IDS


def test_the_table_has_a_row_per_bug_and_escapes_pipes():
    table = plant_bugs.markdown_table([plant_bugs.Outcome(_bug(breaks="a | b"), "caught", 3.0),
                                       plant_bugs.Outcome(_bug(bug_id="other"), "missed", 4.0)])
    lines = table.splitlines()
    assert lines[0] == "| id | what breaks | file | caught by | result | seconds |"
    assert lines[2] == ("| `divides-the-wrong-way` | a \\| b | `pkg/speed.py` | `tests/test_speed.py::test_speed` "
                        "| caught | 3.0 |")
    assert lines[3].startswith("| `other` |") and lines[3].endswith("| missed | 4.0 |")
    assert lines[-1] == "1 of 2 planted bugs caught in 7 s."
