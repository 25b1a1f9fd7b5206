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

"""``m2sa-data stats`` and ``m2sa-data show`` on a small synthetic dataset."""

from __future__ import annotations

from pathlib import Path

from m2sa_core.data.cli import main
from m2sa_core.data.synthetic import generate_dataset
import pytest


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli_world")
    generate_dataset(out, 10, seed=4)
    return out


def test_stats_prints_figure_3_numbers_and_writes_a_png(world, tmp_path, capsys):
    png = tmp_path / "stats.png"
    assert main(["stats", str(world / "MMR_train.json"), "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert "targets per answer:" in out and "mentions: object" in out and "part" in out
    assert "most frequent object categories" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", ["MMR_val.json", "r2sm_test.json", "amodal_reasonseg_test.json"])
def test_show_draws_a_record(world, tmp_path, name):
    png = tmp_path / "show.png"
    assert main(["show", str(world / name), "--index", "0", "--out", str(png), "--amodal"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_index_and_bad_file_are_clear_errors(world, tmp_path, capsys):
    assert main(["show", str(world / "MMR_val.json"), "--index", "9999", "--out", str(tmp_path / "x.png")]) == 1
    assert "out of range" in capsys.readouterr().err
    bogus = tmp_path / "bogus.json"
    bogus.write_text('"just a string"')
    assert main(["stats", str(bogus)]) == 1
    assert "not an MMR list" in capsys.readouterr().err
