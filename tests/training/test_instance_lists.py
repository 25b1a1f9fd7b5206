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
A data source of the questions that list several instances of one object (``min_instances``).

The tiny model named too few instances ("pan_1 and pan_2" of four pans); a second, filtered
view of the training file draws such questions more often (training/tiny/research/RUNS.md, runs 43-44).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from m2sa_core.data.synthetic import generate_dataset
import pytest
from training.config import DataSourceConfig, load_config
from training.sources import EmptySourceError, most_instances_of_one_object, open_source


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("world")
    generate_dataset(root, 40, seed=0)
    return root


def _source(world: Path, min_instances: int) -> DataSourceConfig:
    return DataSourceConfig(kind="synthetic", name="instances", path=str(world / "MMR_train.json"),
                            image_root=str(world / "images"), min_instances=min_instances)


def _labels(record) -> list[str]:
    return [t.label for t in record.targets]


def test_the_filtered_source_keeps_exactly_the_answers_listing_several_instances_of_one_object(world):
    everything = open_source(_source(world, 0)).items
    lists = open_source(_source(world, 2)).items
    kept = {r.record_id for r in lists}
    assert 0 < len(lists) < len(everything)
    for record in everything:
        labels = _labels(record)
        objects = [label.split("'s ")[0] for label in labels]  # "pan_2's bottom" -> "pan_2"
        names = [o.rsplit("_", 1)[0] for o in set(objects)]  # "pan_2" -> "pan"
        repeated = any(names.count(n) >= 2 for n in names)
        assert (record.record_id in kept) == repeated, labels


def test_an_object_with_its_part_is_one_instance_not_two(world):
    records = open_source(_source(world, 0)).items
    pairs = [r for r in records if len(r.targets) == 2 and _labels(r)[1].startswith(_labels(r)[0] + "'s ")]
    assert pairs, "the world asks for an object together with one of its parts"
    assert all(most_instances_of_one_object(r) == 1 for r in pairs)


def test_targets_without_instance_numbers_count_as_one_instance():
    mug, handle = (SimpleNamespace(object_name="mug", instance=0, label=label) for label in ("mug", "mug's handle"))
    assert most_instances_of_one_object(SimpleNamespace(targets=[mug, handle])) == 1


def test_a_threshold_no_answer_reaches_stops_with_a_clear_error(world):
    with pytest.raises(EmptySourceError, match=r"instances: none of the \d+ questions .* names 9 or more instances"):
        open_source(_source(world, 9))


def test_a_config_reads_the_filter_and_rejects_a_misspelt_one(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("out_dir: x\ndata:\n  - {kind: synthetic, path: a.json}\n"
                    "  - {kind: synthetic, name: instances, path: a.json, rate: 0.3, min_instances: 2, "
                    "families: [object, part]}\n")
    sources = load_config(str(good)).data
    assert [(s.min_instances, s.families) for s in sources] == [(0, []), (2, ["object", "part"])]
    bad = tmp_path / "bad.yaml"
    bad.write_text("out_dir: x\ndata:\n  - {kind: synthetic, path: a.json, min_instance: 2}\n")
    with pytest.raises(ValueError, match="min_instance"):
        load_config(str(bad))


def test_a_family_view_keeps_only_its_families_and_combines_with_min_instances(world):
    config = _source(world, 2)
    config.families = ["object", "part"]
    view = open_source(config).items
    lists = open_source(_source(world, 2)).items
    assert view and {r.meta["family"] for r in view} <= {"object", "part"}
    assert {r.record_id for r in view} == {r.record_id for r in lists if r.meta["family"] in ("object", "part")}


def test_a_family_no_question_has_stops_with_a_clear_error(world):
    config = _source(world, 0)
    config.families = ["objekt"]
    with pytest.raises(EmptySourceError, match=r"instances: none of the \d+ questions .* families \['objekt'\]"):
        open_source(config)


def test_a_long_list_view_keeps_exactly_the_answers_with_that_many_targets(world):
    """``min_targets`` keeps the answers with that many targets, of the families asked for."""
    everything = open_source(_source(world, 0)).items
    config = _source(world, 0)
    config.min_targets = 3
    long_lists = open_source(config).items
    assert 0 < len(long_lists) < len(everything)
    assert {r.record_id for r in long_lists} == {r.record_id for r in everything if len(r.targets) >= 3}
    config.families = ["object", "part"]
    narrowed = open_source(config).items
    assert {r.record_id for r in narrowed} == {r.record_id for r in long_lists
                                               if r.meta["family"] in ("object", "part")}


def test_a_target_threshold_no_answer_reaches_stops_with_a_clear_error(world):
    config = _source(world, 0)
    config.min_targets = 99
    with pytest.raises(EmptySourceError, match=r"instances: none of the \d+ questions .* has 99 or more targets"):
        open_source(config)
