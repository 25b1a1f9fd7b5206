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
scripts/train_tiny.sh, the shipped model's pipeline, run with stand-in commands.

The stages themselves are tested through ``m2sa-train`` (test_staged_training.py); this
checks what only the script decides: which checkpoint each stage starts from, that a
finished step is not run again, and where the figures and the export go. The stand-ins
(``BIN``) record their arguments and write the files the real commands would.
"""

from __future__ import annotations

import os
from pathlib import Path
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "train_tiny.sh"

STAND_IN = r"""#!/usr/bin/env bash
# Record the call, then write what the real command would leave behind.
printf '%s' "$(basename "$0")" >> "$CALLS"; printf ' %q' "$@" >> "$CALLS"; echo >> "$CALLS"
previous=""
for arg in "$@"; do
  case "$arg" in
    out_dir=*) mkdir -p "${arg#out_dir=}/final" && touch "${arg#out_dir=}/final/model.safetensors" ;;
  esac
  if [[ "$previous" == "--out" ]]; then
    case "$(basename "$0")" in
      m2sa-eval) mkdir -p "$(dirname "$arg")" && touch "$arg" ;;  # a JSON file
      *) mkdir -p "$arg" ;;                                        # a world or a model directory
    esac
  fi
  previous=$arg
done
"""


@pytest.fixture()
def pipeline(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("m2sa-synth", "m2sa-overlap", "m2sa-train", "m2sa-eval", "m2sa-export"):
        (bin_dir / name).write_text(STAND_IN)
        (bin_dir / name).chmod(0o755)
    # torchrun records the threads each rank gets; python is the real one (it reads the configs).
    (bin_dir / "torchrun").write_text(
        STAND_IN.replace('"$(basename "$0")"', '"torchrun OMP_NUM_THREADS=$OMP_NUM_THREADS"'))
    (bin_dir / "torchrun").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "BIN": str(bin_dir), "RUNS": str(tmp_path / "runs" / "trial"),
           "DATA": str(tmp_path / "synth"), "CLIP_DATA": str(tmp_path / "synth16k"), "HELD": str(tmp_path / "heldout"),
           "CALLS": str(tmp_path / "calls")}

    def run(*args: str, **extra_env: str) -> list[list[str]]:
        calls = tmp_path / "calls"
        calls.write_text("")
        merged = {key: value for key, value in {**env, **extra_env}.items() if value is not None}
        done = subprocess.run(["bash", str(SCRIPT), *args], env=merged, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return [shlex.split(line) for line in calls.read_text().splitlines()]

    return run, tmp_path / "runs" / "trial"


def _option(call: list[str], key: str) -> str | None:
    values = [arg.split("=", 1)[1] for arg in call if arg.startswith(key + "=")]
    return values[-1] if values else None


def test_each_stage_starts_from_the_previous_stage_of_the_same_run(pipeline):
    run, runs = pipeline
    calls = run("device=cpu")
    trains = [call for call in calls if call[0] == "m2sa-train"]
    assert [_option(call, "out_dir") for call in trains] == [
        f"{runs}/1_sam", f"{runs}/1b_clip", f"{runs}/2_language", f"{runs}/3_m2sa"]  # 3b is opt-in (run 76)
    # Under RUNS, not the default runs/tiny: a second run must never build on the first's stages.
    assert [_option(call, "model.init_from") for call in trains] == [
        None, f"{runs}/1_sam/final", f"{runs}/1b_clip/final", f"{runs}/2_language/final"]
    assert all(call[-1] == "device=cpu" for call in trains)  # the caller's overrides reach every stage
    evals = [call for call in calls if call[0] == "m2sa-eval"]
    assert len(evals) == 4 and all(call[call.index("--model") + 1] == f"{runs}/3_m2sa/final" for call in evals)
    assert not [call for call in calls if call[0] == "m2sa-export"]


def test_a_finished_pipeline_runs_nothing_again_and_exports_on_request(pipeline):
    run, runs = pipeline
    run()
    again = run("--export")
    assert [call[0] for call in again] == ["m2sa-export"]
    assert again[0][again[0].index("--model") + 1] == f"{runs}/3_m2sa/final"
    assert {line.split("\t")[0] for line in (runs / "timings.tsv").read_text().splitlines()} >= {
        "1_sam", "1b_clip", "2_language", "3_m2sa", "eval_generative"}


def test_stages_named_in_stages_run_in_order_each_from_the_one_before(pipeline):
    run, runs = pipeline
    calls = run(STAGES="1_sam 2_language 3_m2sa")  # the recipe of models before stage 1b
    trains = [call for call in calls if call[0] == "m2sa-train"]
    assert [call[call.index("--config") + 1] for call in trains] == [
        f"training/tiny/{stage}.yaml" for stage in ("1_sam", "2_language", "3_m2sa")]
    assert [_option(call, "model.init_from") for call in trains] == [
        None, f"{runs}/1_sam/final", f"{runs}/2_language/final"]


def test_stages_that_stop_before_stage_3_evaluate_nothing_and_a_later_call_goes_on(pipeline):
    run, runs = pipeline
    calls = run(STAGES="1_sam")  # stage 1 alone, as a long first step (RUNS.md, run 47)
    assert [call[0] for call in calls if call[0] in ("m2sa-train", "m2sa-eval")] == ["m2sa-train"]
    calls = run()
    trains = [call for call in calls if call[0] == "m2sa-train"]
    assert [call[call.index("--config") + 1] for call in trains] == [
        f"training/tiny/{stage}.yaml" for stage in ("1b_clip", "2_language", "3_m2sa")]
    assert _option(trains[0], "model.init_from") == f"{runs}/1_sam/final"
    assert [call for call in calls if call[0] == "m2sa-eval"]


def test_stage_3b_is_scored_after_stage_3_and_stage_3s_figures_are_kept_aside(pipeline):
    run, runs = pipeline
    before = run()  # the shipped recipe: the model before stage 3b
    assert {call[call.index("--model") + 1] for call in before if call[0] == "m2sa-eval"} == {f"{runs}/3_m2sa/final"}
    calls = run(STAGES="3_m2sa 3b_absent")
    assert [_option(call, "out_dir") for call in calls if call[0] == "m2sa-train"] == [f"{runs}/3b_absent"]
    evals = [call for call in calls if call[0] == "m2sa-eval"]
    assert len(evals) == 4 and {call[call.index("--model") + 1] for call in evals} == {f"{runs}/3b_absent/final"}
    assert (runs / "scored" / "3_m2sa" / "eval_generative.json").is_file()  # stage 3's figures, kept
    assert not [call for call in run(STAGES="3_m2sa 3b_absent") if call[0] == "m2sa-eval"]  # scored once


def test_worlds_that_ask_no_absent_question_are_written_again_for_stage_3b(pipeline, tmp_path):
    run, _ = pipeline
    run()
    for world, file in (("synth", "MMR_train.json"), ("heldout", "MMR_test_mixed.json")):
        (tmp_path / world / file).write_text('{"question_families": [["object"]]}')  # an older m2sa-synth's
    again = [call[call.index("--out") + 1] for call in run(STAGES="3b_absent") if call[0] == "m2sa-synth"]
    assert again == [str(tmp_path / "synth"), str(tmp_path / "heldout")]
    for world, file in (("synth", "MMR_train.json"), ("heldout", "MMR_test_mixed.json")):
        (tmp_path / world / file).write_text('{"question_families": [["object", "absent"]]}')
    assert not [call for call in run(STAGES="3b_absent") if call[0] == "m2sa-synth"]
    # Stages that do not read them keep the worlds they have.
    for world, file in (("synth", "MMR_train.json"), ("heldout", "MMR_test_mixed.json")):
        (tmp_path / world / file).write_text('{"question_families": [["object"]]}')
    assert not [call for call in run(STAGES="3_m2sa") if call[0] == "m2sa-synth"]


def test_the_training_world_is_written_again_only_when_its_size_changes(pipeline, tmp_path):
    run, _ = pipeline
    first = run()
    synth = [call for call in first
             if call[0] == "m2sa-synth" and call[call.index("--out") + 1] == str(tmp_path / "synth")]
    assert len(synth) == 1 and synth[0][synth[0].index("--images") + 1] == "2000"  # the default world
    assert not [call for call in run() if call[0] == "m2sa-synth"]  # the same size: kept
    # Another size is another world: written again rather than trained on as if it were the same.
    resized = [call for call in run(IMAGES="8000") if call[0] == "m2sa-synth"]
    assert len(resized) == 1 and resized[0][resized[0].index("--images") + 1] == "8000"


def test_stages_1b_and_3_read_a_larger_world_of_its_own_seed_written_only_when_they_run(pipeline, tmp_path):
    run, _ = pipeline
    worlds = {call[call.index("--out") + 1]: call for call in run() if call[0] == "m2sa-synth"}
    clip_world = worlds[str(tmp_path / "synth16k")]  # beside the training world, not instead of it
    assert clip_world[clip_world.index("--images") + 1] == "16000"
    # Not the training world's seed: image k of a world is drawn from (seed, k), so at seed 0
    # its training split would hold the training world's val and test images.
    assert clip_world[clip_world.index("--seed") + 1] == "1"
    train_world = worlds[str(tmp_path / "synth")]
    assert train_world[train_world.index("--seed") + 1] == "0"
    assert not [call for call in run() if call[0] == "m2sa-synth"]  # written once
    # Another seed is another world: written again, the training world kept.
    reseeded = [call for call in run(CLIP_SEED="3") if call[0] == "m2sa-synth"]
    assert [call[call.index("--out") + 1] for call in reseeded] == [str(tmp_path / "synth16k")]
    assert reseeded[0][reseeded[0].index("--seed") + 1] == "3"
    # Stages that never read it (stage 1, stage 2) do not pay for it; stage 3 draws its part and
    # several-instance questions, so stage 3 alone writes it (training/tiny/research/RUNS.md, run 74).
    (tmp_path / "synth16k" / ".complete").unlink()
    assert not [call for call in run(STAGES="1_sam 2_language", RUNS=str(tmp_path / "runs" / "old"))
                if call[0] == "m2sa-synth"]
    assert [call[call.index("--out") + 1] for call in run(STAGES="3_m2sa", RUNS=str(tmp_path / "runs" / "three"))
            if call[0] == "m2sa-synth"] == [str(tmp_path / "synth16k")]
    (tmp_path / "synth16k" / ".complete").unlink()  # stage 3b keeps stage 3's mixture, so it reads it too
    assert [call[call.index("--out") + 1] for call in run(STAGES="3b_absent", RUNS=str(tmp_path / "runs" / "3b"))
            if call[0] == "m2sa-synth"] == [str(tmp_path / "synth16k")]


@pytest.mark.parametrize("seed", ["0", "7"])
def test_a_clip_world_seeded_like_the_training_or_held_out_world_is_refused_before_anything_runs(
        pipeline, tmp_path, seed):
    _, runs = pipeline
    env = {**os.environ, "BIN": str(tmp_path / "bin"), "RUNS": str(runs), "DATA": str(tmp_path / "synth"),
           "CLIP_DATA": str(tmp_path / "synth16k"), "HELD": str(tmp_path / "heldout"),
           "CALLS": str(tmp_path / "calls"), "CLIP_SEED": seed}
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and f"CLIP_SEED={seed}" in done.stderr
    assert not (tmp_path / "calls").exists() and not (tmp_path / "synth16k").exists()


def test_the_stages_configs_are_checked_against_every_evaluation_image_before_any_training(pipeline, tmp_path):
    run, _ = pipeline
    calls = run()
    names = [call[0] for call in calls]
    assert names.index("m2sa-overlap") < names.index("m2sa-train")
    (check,) = [call for call in calls if call[0] == "m2sa-overlap"]
    configs = check[check.index("--config") + 1: check.index("--against")]
    assert configs == [f"training/tiny/{s}.yaml" for s in ("1_sam", "1b_clip", "2_language", "3_m2sa")]
    against = check[check.index("--against") + 1:]
    synth, held = tmp_path / "synth", tmp_path / "heldout"
    assert {f"{synth}/MMR_val.json", f"{synth}/MMR_test_mixed.json", f"{held}/MMR_test_part_only.json",
            f"{held}/r2sm_test.json", f"{held}/amodal_reasonseg_test.json"} <= set(against)


def test_a_stage_that_would_train_on_an_evaluation_image_stops_the_pipeline_before_it_trains(pipeline, tmp_path):
    run, _ = pipeline
    refusing = tmp_path / "bin" / "m2sa-overlap"
    refusing.write_text('#!/usr/bin/env bash\nprintf "m2sa-overlap\\n" >> "$CALLS"\n'
                        'echo "training/tiny/1b_clip.yaml: 400 training images are evaluation images" >&2; exit 1\n')
    with pytest.raises(AssertionError, match="400 training images are evaluation images"):
        run()
    assert [line.split()[0] for line in (tmp_path / "calls").read_text().splitlines()] == (
        ["m2sa-synth"] * 3 + ["m2sa-overlap"])


STAGE_BATCHES = {"1_sam": 8, "1b_clip": 32, "2_language": 16, "3_m2sa": 8}  # training/tiny/*.yaml


def test_ranks_train_every_stage_as_data_parallel_processes_that_split_its_batch(pipeline):
    run, runs = pipeline
    calls = run("device=cpu", RANKS="2", OMP_NUM_THREADS=None)
    assert not [call for call in calls if call[0] == "m2sa-train"]
    trains = [call for call in calls if call[0] == "torchrun"]
    assert [_option(call, "out_dir") for call in trains] == [f"{runs}/{stage}" for stage in STAGE_BATCHES]
    assert [_option(call, "model.init_from") for call in trains] == [
        None, f"{runs}/1_sam/final", f"{runs}/1b_clip/final", f"{runs}/2_language/final"]
    for call, (stage, batch) in zip(trains, STAGE_BATCHES.items()):
        assert call[call.index("--nproc-per-node") + 1] == "2"
        assert call[call.index("-m") + 1] == "training.train" and "--resume" in call
        assert call[call.index("--config") + 1] == f"training/tiny/{stage}.yaml"
        # Each rank takes half of the config's batch, so a step sees the samples one process would.
        assert _option(call, "optim.batch_size") == str(batch // 2)
        # The cores are shared out among the ranks rather than each rank taking them all.
        assert _option(call, "OMP_NUM_THREADS") == str(max(1, len(os.sched_getaffinity(0)) // 2))
        assert call[-2] == "device=cpu"  # the caller's overrides, then the rank's share of the batch
    # The evaluations stay single processes.
    assert len([call for call in calls if call[0] == "m2sa-eval"]) == 4


def test_a_callers_batch_is_the_steps_batch_and_is_split_among_the_ranks(pipeline):
    run, _ = pipeline
    trains = [call for call in run("optim.batch_size=4", RANKS="2") if call[0] == "torchrun"]
    assert len(trains) == 4 and all(_option(call, "optim.batch_size") == "2" for call in trains)


def test_the_callers_threads_per_rank_are_kept(pipeline):
    run, _ = pipeline
    trains = [call for call in run(RANKS="2", OMP_NUM_THREADS="3") if call[0] == "torchrun"]
    assert trains and all(_option(call, "OMP_NUM_THREADS") == "3" for call in trains)


def test_ranks_that_do_not_split_a_stages_batch_stop_the_pipeline_before_that_stage(pipeline, tmp_path):
    run, runs = pipeline
    with pytest.raises(AssertionError, match="RANKS=3"):
        run(RANKS="3")  # stage 1's batch of 8
    assert not [line for line in (tmp_path / "calls").read_text().splitlines() if line.startswith("torchrun")]
    assert not (runs / "1_sam").exists()
