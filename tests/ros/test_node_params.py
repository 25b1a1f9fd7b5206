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

"""Parameter validation and model selection, without ROS."""

from __future__ import annotations

from pathlib import Path

from m2sa_ros.model.model_source import resolve_model_source
from m2sa_ros.params.node_params import ParameterError, PARAMETERS, validate
import pytest

pytestmark = pytest.mark.integration

DEFAULTS = {spec.name: spec.default for spec in PARAMETERS}


def test_defaults_are_valid_and_every_parameter_is_documented():
    params = validate(DEFAULTS)
    assert params.device == "cpu" and params.autostart is True and params.max_queue >= 1
    for spec in PARAMETERS:
        assert len(spec.description) > 20, spec.name


def test_ints_are_accepted_for_floats_and_strings_are_stripped():
    params = validate({**DEFAULTS, "max_image_age": 2, "device": " cuda:1 "})
    assert params.max_image_age == 2.0 and isinstance(params.max_image_age, float)
    assert params.device == "cuda:1"


@pytest.mark.parametrize("name,value,complaint", [
    ("max_queue", 0, "max_queue=0: must be >= 1"),
    ("device", "gpu", "device='gpu': must be cpu, cuda"),
    ("dtype", "fp8", "dtype='fp8': must be one of"),
    ("max_image_age", -1.0, "max_image_age=-1.0: must be >= 0"),
    ("image_reliability", "sometimes", "image_reliability='sometimes'"),
    ("max_new_tokens", "many", "max_new_tokens='many': expected int"),
    ("publish_overlay", 1, "publish_overlay=1: expected bool"),
    ("heap_trim_period", -1.0, "heap_trim_period=-1.0: must be >= 0"),
])
def test_bad_values_are_named(name, value, complaint):
    with pytest.raises(ParameterError, match=complaint.replace("(", r"\(")):
        validate({**DEFAULTS, name: value})


def test_all_problems_are_reported_at_once():
    with pytest.raises(ParameterError) as info:
        validate({**DEFAULTS, "max_queue": 0, "device": "tpu"})
    assert "max_queue" in str(info.value) and "device" in str(info.value)


def test_model_source_priority(tmp_path: Path):
    shipped = tmp_path / "m2sa-tiny-synth"
    shipped.mkdir()
    (shipped / "config.json").write_text("{}")
    explicit = resolve_model_source(str(shipped), "7b", candidates=[])
    assert explicit.source == str(shipped) and not explicit.is_preset and not explicit.warning
    preset = resolve_model_source("", "tiny", candidates=[shipped])
    assert preset.is_preset and "random weights" in preset.warning
    default = resolve_model_source("", "", candidates=[tmp_path / "missing", shipped])
    assert default.source == str(shipped) and not default.warning
    fallback = resolve_model_source("", "", candidates=[tmp_path / "missing"])
    assert fallback.source == "tiny" and fallback.is_preset and "UNTRAINED" in fallback.warning


def test_missing_explicit_model_path_is_an_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="model_path .*nope.* does not exist"):
        resolve_model_source(str(tmp_path / "nope"), "", candidates=[])


def test_cpu_threads_is_how_many_threads_torch_runs_the_model_with():
    """
    The cpu_threads parameter is how many threads torch runs the model with, one by default.

    With more, threads waiting for each other at every operation stall when the robot's
    other processes share the cores (bench/bench_cpu_contention.py).
    """
    from m2sa_ros.perception_node import load_segmenter
    import torch

    before = torch.get_num_threads()
    source = resolve_model_source("", "tiny", candidates=[])
    try:
        torch.set_num_threads(2)
        load_segmenter(validate({**DEFAULTS, "preset": "tiny"}), source)
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        load_segmenter(validate({**DEFAULTS, "preset": "tiny", "cpu_threads": 0}), source)
        assert torch.get_num_threads() == 2  # 0: torch's own choice stays
    finally:
        torch.set_num_threads(before)


def test_dtype_parameter_takes_the_names_the_model_loader_takes():
    """node_params stays free of torch, so it keeps its own copy of the names; every one must load."""
    from m2sa_core.inference import dtype_from_name, DTYPE_NAMES
    from m2sa_ros.params.node_params import DTYPES

    assert DTYPES == ("", *DTYPE_NAMES)
    assert dtype_from_name("") is None and all(dtype_from_name(name) is not None for name in DTYPE_NAMES)
    with pytest.raises(ValueError, match="float64"):
        dtype_from_name("float64")


def test_reading_the_parameters_imports_neither_torch_nor_opencv():
    """
    The launch file, ``ros2 param`` checks and the docs' table read the parameters.

    That must not cost the seconds torch and OpenCV take to import (nor need them).
    """
    import subprocess
    import sys

    code = ("import sys, m2sa_ros.params.node_params, m2sa_ros.cameras.camera_names\n"
            "print(sorted(m for m in ('torch', 'cv2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_descriptions_give_reasons_not_run_numbers():
    """
    ``ros2 param describe`` prints these to robot engineers.

    A reason they can act on, never a reference into the lab notebook's history (its figures
    live in bench/RESULTS.md).
    """
    import re

    history = re.compile(r"\bruns? \d+|\(run\b|\b\d+ of \d+ held-out|\blab notebook\b", re.IGNORECASE)
    for spec in PARAMETERS:
        assert not history.search(spec.description), f"{spec.name}: {spec.description}"
