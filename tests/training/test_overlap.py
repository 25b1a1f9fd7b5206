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
m2sa-overlap on real synthetic worlds: the leak it exists for, and its absence.

Image k of a world is drawn from (seed, k), so a larger world of the same seed trains on a
smaller one's val and test images (training/tiny/research/RUNS.md, run 34); a world of another seed
shares none. The tool must say so from the image bytes, whatever the files are called.
"""

from __future__ import annotations

from pathlib import Path

from m2sa_core.data.synthetic import generate_dataset
import pytest
from training.overlap import main

SMALL, LARGE = 10, 30  # the small world's val and test: images 8 and 9


@pytest.fixture(scope="module")
def worlds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("worlds")
    generate_dataset(root / "small", SMALL, seed=0)
    generate_dataset(root / "same_seed", LARGE, seed=0)
    generate_dataset(root / "other_seed", LARGE, seed=1)
    return root


def _config(path: Path, world: Path, eval_world: Path | None = None) -> str:
    """Return a stage-1b-like config: mask annotations of ``world``'s train split."""
    lines = [f"out_dir: {path.parent / 'out'}", "objective: patch_words", "data:",
             f"  - {{kind: mask_annotations, path: {world}/masks_train.json, image_root: {world}/images}}"]
    if eval_world is not None:
        lines += ["eval_data:",
                  f"  - {{kind: mask_annotations, name: val, path: {eval_world}/masks_val.json, "
                  f"image_root: {eval_world}/images}}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _evaluation_files(world: Path) -> list[str]:
    return [str(world / name) for name in ("MMR_val.json", "MMR_test_obj_only.json", "MMR_test_part_only.json",
                                           "MMR_test_mixed.json")]


def test_a_larger_world_of_the_same_seed_trains_on_the_smaller_ones_val_and_test_images(worlds, tmp_path, capsys):
    config = _config(tmp_path / "leaky.yaml", worlds / "same_seed")
    assert main(["--config", config, "--against", *_evaluation_files(worlds / "small"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    # Images 8 (val) and 9 (test) of the small world are training images 8 and 9 of the large one.
    assert f"{config}: 2 training images are evaluation images" in err
    assert f"same_seed/images/{8:06d}.png is " in err and "small/images/" in err


def test_a_world_of_another_seed_shares_no_image_with_it(worlds, tmp_path, capsys):
    config = _config(tmp_path / "clean.yaml", worlds / "other_seed")
    assert main(["--config", config, "--against", *_evaluation_files(worlds / "small"), "--quiet"]) == 0
    assert capsys.readouterr().out.strip() == f"{config}: no training image is an evaluation image"


def test_a_configs_own_eval_data_counts_as_evaluation_images(worlds, tmp_path, capsys):
    # Validating on the small world's val images while training on the large world of its seed.
    config = _config(tmp_path / "own.yaml", worlds / "same_seed", eval_world=worlds / "small")
    assert main(["--config", config, "--quiet"]) == 1
    assert "1 training image is an evaluation image (first:" in capsys.readouterr().err


def test_a_missing_evaluation_file_is_one_line_and_status_2(worlds, tmp_path, capsys):
    config = _config(tmp_path / "clean.yaml", worlds / "other_seed")
    missing = tmp_path / "nowhere" / "MMR_val.json"
    assert main(["--config", config, "--against", str(missing), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err and "Traceback" not in err
