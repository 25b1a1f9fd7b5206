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
Each concern's settings read the parameter table's own names, and the pipeline builds each once per change.

Every :class:`~m2sa_ros.params.parameter_group.ParameterGroup` the node has (found as the
subclasses, so a new group is checked without being listed here) names only parameters of
``PARAMETERS``; the pipeline builds every group at load and rebuilds a group only when a
runtime change touches one of its parameters, so a group is read whole and never stale.
"""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

from m2sa_ros.depth.depth_settings import DepthSettings
from m2sa_ros.diagnostics.camera_health import CameraHealthSettings
from m2sa_ros.diagnostics.node_status import NodeStats
from m2sa_ros.params.node_params import PARAMETER_NAMES, PARAMETERS, validate
from m2sa_ros.params.parameter_group import ParameterGroup
from m2sa_ros.pipeline import CommandPipeline
import pytest

DEFAULTS = {spec.name: spec.default for spec in PARAMETERS}


def _groups() -> list[type[ParameterGroup]]:
    return sorted(ParameterGroup.__subclasses__(), key=lambda cls: cls.__name__)


def test_the_node_s_groups_are_found():
    assert {DepthSettings, CameraHealthSettings} <= set(_groups())


@pytest.mark.parametrize("group", _groups(), ids=lambda cls: cls.__name__)
def test_every_field_of_a_group_is_a_parameter_of_the_table_by_its_name(group):
    names = group.names()
    assert names and len(set(names)) == len(names)
    assert [name for name in names if name not in PARAMETER_NAMES] == []
    params = validate(DEFAULTS)
    settings = group.from_params(params)
    assert {name: getattr(settings, name) for name in names} == {name: getattr(params, name) for name in names}
    assert group.reads([names[0], "not_a_parameter"]) and not group.reads(["not_a_parameter"])


def test_camera_health_reads_its_three_parameters_and_keeps_its_window_as_a_constant():
    assert CameraHealthSettings.names() == ("image_min_rate", "image_timeout", "max_image_age")
    settings = CameraHealthSettings.from_params(validate({**DEFAULTS, "image_min_rate": 3.0, "image_timeout": 7.0,
                                                          "max_image_age": 0.25}))
    assert (settings.image_min_rate, settings.image_timeout, settings.max_image_age) == (3.0, 7.0, 0.25)
    assert settings.window_s == CameraHealthSettings().window_s


def test_the_pipeline_builds_each_group_at_load_and_again_only_when_one_of_its_parameters_changes():
    pipeline = CommandPipeline(SimpleNamespace(error=print, warning=print), NodeStats(), Counter(),
                               topic_name=lambda name: name, warn_once=lambda key, text: None)
    assert pipeline.depth_settings is None and pipeline.health_settings is None
    pipeline.load(SimpleNamespace(), validate({**DEFAULTS, "heap_trim_period": 0.0}))
    depth, health = pipeline.depth_settings, pipeline.health_settings
    assert depth == DepthSettings.from_params(pipeline.params)
    assert health == CameraHealthSettings.from_params(pipeline.params)

    pipeline.update_params({"image_min_rate": 12.0})
    assert pipeline.health_settings.image_min_rate == 12.0 and pipeline.depth_settings is depth
    health = pipeline.health_settings
    pipeline.update_params({"depth_wait": 0.5})
    assert pipeline.depth_settings.depth_wait == 0.5 and pipeline.health_settings is health
    pipeline.update_params({"wait_for_image": 2.0})  # in no group
    assert pipeline.health_settings is health and pipeline.depth_settings.depth_wait == 0.5

    pipeline.unload()
    assert pipeline.depth_settings is None and pipeline.health_settings is None
