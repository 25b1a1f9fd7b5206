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
The docs agree with the code and with each other, where a newcomer once found they did not.

* Every preset the code builds and every device the node accepts is listed wherever the
  choices are spelt out: the parameter's description, docs/ROS_INTERFACE.md's table, the
  launch argument's help and config/perception.yaml.
* The labels a broken answer gets (``target_N``) are the ones docs/ROS_INTERFACE.md
  describes.
* The venv's ``ros2 launch`` is not called uninstallable or unverified any more, and the
  sentence saying what works in the venv is in both README.md and docs/ROS_INTERFACE.md.
* BAG_REPLAY.md's cross-reference for the depth options points to the section that has them.
"""

from __future__ import annotations

from pathlib import Path
import re

from m2sa_core.inference.answer import parse_targets
from m2sa_core.model.presets import PRESETS
from m2sa_ros.params.node_params import _DEVICE_RE, PARAMETERS
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROS_INTERFACE = (ROOT / "docs" / "ROS_INTERFACE.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
BAG_REPLAY = (ROOT / "docs" / "BAG_REPLAY.md").read_text(encoding="utf-8")
LAUNCH = (ROOT / "launch" / "perception.launch.py").read_text(encoding="utf-8")
CONFIG = (ROOT / "config" / "perception.yaml").read_text(encoding="utf-8")


def device_forms() -> list[str]:
    """Return the device spellings _DEVICE_RE accepts, as the docs write them: cpu, cuda, cuda:N, ..."""
    body = _DEVICE_RE.pattern.removeprefix("^(").removesuffix(")$")
    forms = []
    for alternative in body.split("|"):
        name = re.match(r"[a-z]+", alternative).group(0)
        forms.append(name)
        if alternative != name:
            assert alternative == name + r"(:\d+)?", f"a device form the test does not know: {alternative}"
            forms.append(f"{name}:N")
    return forms


def _spec(name: str):
    return next(spec for spec in PARAMETERS if spec.name == name)


def _table_row(name: str) -> str:
    return next(line for line in ROS_INTERFACE.splitlines() if line.startswith(f"| `{name}` |"))


def _launch_help(name: str) -> str:
    return re.search(rf'\("{name}", "[^"]*", "([^"]*)"\)', LAUNCH).group(1)


def _listed(text: str, names: list[str]) -> list[str]:
    """Return the names ``text`` does not list as a word of its own."""
    return [n for n in names if not re.search(rf"(?<![\w:-]){re.escape(n)}(?![\w:-])", text)]


def test_every_preset_is_listed_wherever_presets_are():
    presets = sorted(PRESETS)
    assert "tiny-authors" in presets
    for where, text in (("node_params", _spec("preset").description), ("ROS_INTERFACE.md", _table_row("preset")),
                        ("launch file", _launch_help("preset"))):
        assert not _listed(text, presets), f"{where} lacks {_listed(text, presets)}: {text}"


def test_every_device_form_is_listed_wherever_devices_are():
    forms = device_forms()
    assert {"cpu", "cuda", "cuda:N", "mps", "xpu", "xpu:N"} <= set(forms)
    check = _spec("device").check
    for form in forms:
        assert check(form.replace(":N", ":1")) is None, form
    comment = next(line for line in CONFIG.splitlines() if line.strip().startswith("device:")).split("#", 1)[1]
    for where, text in (("node_params", _spec("device").description), ("ROS_INTERFACE.md", _table_row("device")),
                        ("launch file", _launch_help("device")), ("config/perception.yaml", comment)):
        assert not _listed(text, forms), f"{where} lacks {_listed(text, forms)}: {text}"
    assert yaml.safe_load(CONFIG)["/**"]["ros__parameters"]["device"] == "cpu"


def test_the_label_of_a_broken_answer_is_the_documented_one():
    # A [SEG] right after punctuation, then one after another [SEG]: no text to name them.
    assert [t.label for t in parse_targets(". [SEG] [SEG]")] == ["target_1", "target_2"]
    assert [t.label for t in parse_targets("Here, the red one [SEG]")] == ["red one"]  # its last clause
    assert [t.label for t in parse_targets("the mug_1 and its handle [SEG] [SEG]")][1] == "target_2"
    labels = " ".join(ROS_INTERFACE.split("**Labels.**", 1)[1].split("\n\n", 1)[0].split())
    assert "`target_N`" in labels and "counting from 1" in labels and "last clause" in labels


def test_the_venv_is_described_as_it_is():
    assert "not installable" not in ROS_INTERFACE
    assert not re.search(r"Not verified\s+here:\*\*\s+`ros2 launch`", ROS_INTERFACE)
    for text in (README, ROS_INTERFACE):
        sentence = " ".join(text.split("**What works in the venv, and what needs a ROS 2 install:**", 1)[1]
                            .split("\n\n", 1)[0].split())
        assert "`ros2 launch`" in sentence and "`ros2` CLI" in sentence and "scripts/build_ros_src.sh" in sentence
        assert "need a ROS 2 install" in sentence
    assert "-DBUILD_TESTING=OFF" in ROS_INTERFACE
    assert "-DBUILD_TESTING=OFF" in (ROOT / "scripts" / "build_ros_src.sh").read_text(encoding="utf-8")


def _anchor(heading: str) -> str:
    """Return GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_bag_replay_points_to_the_section_with_the_depth_options():
    anchor = re.search(r"`--depth-artefacts` as for commands bags, section \[[\d.]+\]\(#([\w-]+)\)",
                       BAG_REPLAY).group(1)
    headings = list(re.finditer(r"^#+ (.+)$", BAG_REPLAY, re.M))
    at = next((i for i, m in enumerate(headings) if _anchor(m.group(1)) == anchor), None)
    assert at is not None, (anchor, [_anchor(m.group(1)) for m in headings])
    end = headings[at + 1].start() if at + 1 < len(headings) else len(BAG_REPLAY)
    assert "--depth-artefacts" in BAG_REPLAY[headings[at].end():end]
