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

"""Tracking: a command's [SEG] prompts re-segment later frames with SAM alone."""

from __future__ import annotations

from m2sa_core.data.synthetic.scene import render_scene
from m2sa_core.data.synthetic.sequences import render_sequence
from m2sa_core.inference import Segmenter
from m2sa_core.inference.tracking import TrackPrompts, TrackState
from m2sa_core.lost_rule import LostRule
from m2sa_core.shipped_model import SHIPPED_MODEL
from m2sa_core.types import Granularity, Result, Target
import numpy as np
import pytest
import torch
from training.tracking_eval import evaluate_tracking, MODES, tracking_markdown

COMMAND = "Which parts of the objects here can be held by hand?"


@pytest.fixture(scope="module")
def segmenter() -> Segmenter:
    torch.manual_seed(0)
    return Segmenter.from_pretrained(SHIPPED_MODEL, max_new_tokens=48, decoder="dynamic")


@pytest.fixture(scope="module")
def scene_image() -> np.ndarray:
    """
    Return a scene the shipped model answers COMMAND in with the same two targets before and after a pan.

    The two mugs, at object level where parts are asked for, so a tracked mask can be
    compared with a fresh answer's. Chosen again with each shipped model.
    """
    return render_scene(np.random.default_rng(30)).image


def answer_with_prompts(segmenter: Segmenter, image: np.ndarray, command: str) -> tuple[Result, TrackPrompts]:
    result = segmenter.segment(image, command, keep_prompts=True)
    return result, result.prompts


def test_tracking_the_answered_frame_reproduces_the_command_masks(segmenter, scene_image):
    result, prompts = answer_with_prompts(segmenter, scene_image, COMMAND)
    assert len(result.targets) >= 1, result.raw_answer
    assert result.prompts.command == COMMAND and len(result.prompts) == len(result.targets)
    tracked, state = segmenter.track(scene_image, prompts)
    assert [t.label for t in tracked.targets] == [t.label for t in result.targets]
    for mine, theirs in zip(tracked.targets, result.targets):
        np.testing.assert_array_equal(mine.mask, theirs.mask)
        assert mine.score == pytest.approx(theirs.score, abs=1e-5)
        assert mine.mask_type == theirs.mask_type
    assert state.frame_index == 0 and state.low_res.shape[0] == len(result.targets)


def test_tracking_never_calls_the_language_model(segmenter, scene_image):
    _, prompts = answer_with_prompts(segmenter, scene_image, COMMAND)
    shifted = np.roll(scene_image, 9, axis=1)
    llm = segmenter.model.llm.model  # the transformer body every decoder runs

    def forbidden(*args, **kwargs):
        raise AssertionError("the language model ran during tracking")

    handle = llm.register_forward_pre_hook(forbidden)
    try:
        tracked, state = segmenter.track(shifted, prompts)
        tracked, state = segmenter.track(shifted, prompts, state, use_previous_mask=True)
    finally:
        handle.remove()
    assert len(tracked.targets) == len(prompts) and state.frame_index == 1


def test_masks_follow_a_panned_camera(segmenter, scene_image):
    """
    After a pan, a tracked mask is where answering the command again puts it, not where the target was.

    Tracking reuses the command's prompts on the new frame at a fraction of the cost
    (bench/bench_tracking.py), so it must see what the model itself sees there.
    """
    result, prompts = answer_with_prompts(segmenter, scene_image, COMMAND)
    # An eighth of the frame: far enough that even a laptop-sized mask overlaps its old
    # place by under half, so "it moved" below cannot pass by a mask standing still.
    panned = np.roll(scene_image, 32, axis=1)
    tracked, _ = segmenter.track(panned, prompts)
    again = segmenter.segment(panned, COMMAND)
    assert again.answer == result.answer and len(tracked.targets) == len(again.targets) > 0

    def iou(a: np.ndarray, b: np.ndarray) -> float:
        union = (a | b).sum()
        return float((a & b).sum() / union) if union else 1.0

    for before, after, answered in zip(result.targets, tracked.targets, again.targets):
        assert iou(after.mask, answered.mask) > 0.9
        assert iou(after.mask, answered.mask) > iou(after.mask, before.mask) + 0.3  # it moved


def test_previous_mask_prompt_changes_the_decoder_input(segmenter, scene_image):
    _, prompts = answer_with_prompts(segmenter, scene_image, COMMAND)
    first, state = segmenter.track(scene_image, prompts)
    plain, _ = segmenter.track(scene_image, prompts, state)
    with_mask, _ = segmenter.track(scene_image, prompts, state, use_previous_mask=True)
    np.testing.assert_array_equal(plain.targets[0].mask, first.targets[0].mask)  # ignored unless asked for
    assert any(a.score != b.score for a, b in zip(with_mask.targets, plain.targets))


def test_prompts_without_targets_track_to_an_empty_result(segmenter, scene_image):
    empty = TrackPrompts(np.zeros((0, segmenter.model.config.sam.prompt_embed_dim), np.float32), [], "Nothing here.")
    tracked, state = segmenter.track(scene_image, empty)
    assert tracked.targets == [] and tracked.answer == "Nothing here." and state.frame_index == 0


def test_prompts_must_match_their_targets():
    with pytest.raises(ValueError, match="do not match"):
        TrackPrompts(np.zeros((2, 8), np.float32), [], "x")


def _result(scores: list[float]) -> Result:
    mask = np.ones((4, 4), bool)
    return Result("a", [Target(f"t{i}", "t", i, "", Granularity.OBJECT, mask, s) for i, s in enumerate(scores)])


def test_lost_rule_needs_every_target_low_for_n_frames_in_a_row():
    rule = LostRule(min_score=0.5, frames=2)
    state = TrackState(torch.zeros(2, 1, 4, 4))
    state = rule.update(state, _result([0.1, 0.9]))
    assert not rule.all_lost(state)
    state = rule.update(state, _result([0.1, 0.2]))
    assert not rule.all_lost(state)  # the second target has been low for one frame only
    state = rule.update(state, _result([0.1, 0.1]))
    assert rule.all_lost(state)
    state = rule.update(state, _result([0.8, 0.1]))
    assert not rule.all_lost(state) and state.lost_frames.tolist() == [0, 3]
    with pytest.raises(ValueError):
        LostRule(frames=0)


def test_segment_keeps_no_prompts_unless_asked(segmenter, scene_image):
    assert segmenter.segment(scene_image, COMMAND).prompts is None


def test_tracking_evaluation_scores_every_frame_of_every_mode(segmenter):
    sequences = [render_sequence(np.random.default_rng(np.random.SeedSequence([99, k])), n_frames=3, motion="pan")
                 for k in range(2)]
    calls = {"n": 0}

    def count(*args, **kwargs):
        calls["n"] += 1

    handle = segmenter.model.llm.model.register_forward_pre_hook(count)
    try:
        per_mode = {}
        for mode in MODES:
            calls["n"] = 0
            per_mode[mode] = (evaluate_tracking(segmenter, sequences, modes=[mode], progress=False)[mode], calls["n"])
    finally:
        handle.remove()
    questions = sum(len(s.questions) for s in sequences)
    first = {mode: report.per_frame[0]["giou"] for mode, (report, _) in per_mode.items()}
    assert len(set(first.values())) == 1, first  # frame 0 is the same answer in every mode
    for mode, (report, lm_calls) in per_mode.items():
        assert [f["samples"] for f in report.per_frame] == [questions] * 3
        assert report.overall["samples"] == 2 * questions and 0.0 <= report.overall["giou"] <= 1.0
        assert len(report.frame_ms) == 2 * questions
    # The language model runs per frame only when re-running the command.
    assert per_mode["rerun"][1] > per_mode["prompts"][1] == per_mode["previous_mask"][1]
    table = tracking_markdown({mode: report for mode, (report, _) in per_mode.items()})
    assert "| 2 |" in table and "rerun" in table
    with pytest.raises(ValueError, match="unknown tracking mode"):
        evaluate_tracking(segmenter, sequences, modes=["teleport"])


def test_m2sa_eval_tracking_protocol_writes_per_frame_reports(tmp_path):
    import json

    from training.evaluate import main

    out = tmp_path / "tracking.json"
    assert main(["--model", str(SHIPPED_MODEL), "--protocol", "tracking", "--sequences", "1", "--frames", "2",
                 "--motion", "occluder", "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["protocol"] == "tracking" and set(report["modes"]) == set(MODES)
    assert all(len(mode["per_frame"]) == 2 for mode in report["modes"].values())
    assert "| 1 |" in out.with_suffix(".md").read_text()


def test_a_command_answered_without_targets_keeps_empty_prompts_and_tracks_to_nothing(segmenter, scene_image):
    """
    An answer with no [SEG] ("There is no such thing here.") must still give a result and a track.

    Its prompts are empty, not an error, and every later frame answers empty.
    """
    from m2sa_core.inference.tracking import seg_prompt_embeddings

    answered = Result(answer="There is no such thing here.", targets=[])
    prompts = TrackPrompts.from_result(answered, seg_prompt_embeddings(segmenter.model, segmenter.settings, []),
                                       "Where is the piano?")
    assert len(prompts) == 0 and prompts.embeddings.shape == (0, segmenter.model.config.sam.prompt_embed_dim)
    tracked, state = segmenter.track(scene_image, prompts)
    assert tracked.targets == [] and tracked.answer == answered.answer and state.frame_index == 0
    flat = TrackPrompts.from_result(answered, np.zeros((0,), dtype=np.float32))  # as a message carries them
    assert flat.embeddings.shape[0] == 0
