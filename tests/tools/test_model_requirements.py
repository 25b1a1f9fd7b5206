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
requirements-model.txt for every robot Python: how scripts/model_requirements.py merges the resolutions.

The resolutions themselves need the package index; CI runs them on the committed file
(``make check-model-requirements``). Here: the merge, and that the committed file gives
each of 3.10, 3.11 and 3.12 exactly one pin of every package it names.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHONS = ("3.10", "3.11", "3.12")


def _script():
    spec = importlib.util.spec_from_file_location("model_requirements", ROOT / "scripts" / "model_requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pins_for(lines: list[str], python: str) -> dict[str, list[str]]:
    from packaging.requirements import Requirement

    pins: dict[str, list[str]] = {}
    for line in lines:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"python_version": python}):
            pins.setdefault(requirement.name.lower(), []).append(str(requirement.specifier))
    return pins


def test_pins_that_agree_stay_plain_and_those_that_differ_or_are_missing_get_markers():
    merged = _script().merged(
        ["scipy==1.17.1", "torch==2.14.1", "PyYAML==6.0.3"],
        {"3.10": {"scipy": ("scipy", "1.15.3"), "torch": ("torch", "2.14.1"), "pyyaml": ("PyYAML", "6.0.3"),
                  "tomli": ("tomli", "2.3.0")},
         "3.12": {"scipy": ("scipy", "1.17.1"), "torch": ("torch", "2.14.1"), "pyyaml": ("pyyaml", "6.0.3")}})
    assert merged == [
        'scipy==1.15.3; python_version == "3.10"',
        'scipy==1.17.1; python_version == "3.11" or python_version == "3.12"',
        "torch==2.14.1",
        "PyYAML==6.0.3",  # the lock's spelling, whatever pip's report says
        'tomli==2.3.0; python_version == "3.10"',  # only 3.10 needs it
    ]
    assert _pins_for(merged, "3.10") == {"scipy": ["==1.15.3"], "torch": ["==2.14.1"], "pyyaml": ["==6.0.3"],
                                         "tomli": ["==2.3.0"]}
    assert _pins_for(merged, "3.11") == {"scipy": ["==1.17.1"], "torch": ["==2.14.1"], "pyyaml": ["==6.0.3"]}


def test_the_committed_file_pins_every_package_once_for_each_robot_python():
    lines = [line for line in (ROOT / "requirements-model.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    for python in PYTHONS:
        pins = _pins_for(lines, python)
        twice = {name: specs for name, specs in pins.items() if len(specs) > 1}
        assert not twice, f"Python {python}: {twice}"
        assert {"torch", "transformers", "safetensors", "peft"} <= set(pins), python
        assert not [name for name in pins if _script().from_elsewhere(name)], python  # numpy is the system's
        # What CI's dry run for that version installs is what its pip would read (packaging's markers).
        assert sorted(pin.lower() for pin in _script().pins_for(lines, python)) == \
            sorted(f"{name}{specs[0]}" for name, specs in pins.items()), python


def test_the_lock_pythons_lines_are_what_the_script_keeps_of_the_lock():
    script = _script()
    lines = [line for line in (ROOT / "requirements-model.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    kept = script.model_requirements((ROOT / "requirements.lock").read_text())
    assert {n: s[0] for n, s in _pins_for(lines, "3.11").items()} == \
        {line.split("==")[0].lower(): "==" + line.split("==")[1] for line in kept}
