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

"""Segmenter's amodal output: amodal_mask on request, and the complete shape in `mask` when asked for."""

from __future__ import annotations

from m2sa_core.inference import Segmenter
from m2sa_core.types import Granularity, mask_bbox, Target
import numpy as np
import pytest
import torch

ANSWER = "The mug_1 [SEG] and the television_set_1's button [SEG]."
COMMAND = "Show me the mug and what turns the TV on."


class _Script:
    """Forces the tiny model's greedy answer (an lm_head hook), so no training is needed."""

    def __init__(self, segmenter: Segmenter, answer: str) -> None:
        tok = segmenter.tokenizer
        self.ids = tok(" " + answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        self.step = 0

    def __call__(self, _module, _inputs, output):
        token = self.ids[min(self.step, len(self.ids) - 1)]
        self.step += 1
        output = output.clone()
        output[..., token] = output.max() + 10.0
        return output


@pytest.fixture(scope="module")
def segmenter():
    seg = Segmenter.from_pretrained("tiny", max_new_tokens=32, decoder="dynamic")
    torch.manual_seed(3)
    with torch.no_grad():  # a random amodal token that differs from the visible one
        for p in seg.model.sam.mask_decoder.output_hypernetworks_mlps[1].parameters():
            p.normal_(0.0, 0.5)
    return seg


@pytest.fixture
def image():
    return np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)


def _run(seg: Segmenter, image: np.ndarray, **kwargs):
    handle = seg.model.llm.lm_head.register_forward_hook(_Script(seg, ANSWER))
    try:
        return seg.segment(image, COMMAND, **kwargs)
    finally:
        handle.remove()


def _set_intent(seg: Segmenter, amodal: bool) -> None:
    with torch.no_grad():
        seg.model.mask_type_head.weight.zero_()
        seg.model.mask_type_head.bias.copy_(torch.tensor([0.0, 4.0] if amodal else [4.0, 0.0]))


def _decoded(seg: Segmenter, image: np.ndarray):
    """Both masks of the scripted answer, straight from the decoder."""
    timings: dict[str, float] = {}
    entry = seg.stages.encode_frame(image, None, timings)
    (gen,) = seg.stages.generate(entry.features, [seg.prompt_ids(COMMAND)], timings)
    return seg.stages.decode_masks(entry, gen.seg_states, timings, amodal=True)


def test_amodal_off_leaves_amodal_mask_empty_and_visible_in_mask(segmenter, image):
    _set_intent(segmenter, amodal=False)
    result = _run(segmenter, image)
    assert [t.label for t in result.targets] == ["mug_1", "television_set_1's button"]
    assert all(t.amodal_mask is None and t.mask_type == "modal" for t in result.targets)


def test_amodal_on_fills_amodal_mask_for_every_target(segmenter, image):
    _set_intent(segmenter, amodal=False)
    result = _run(segmenter, image, amodal=True)
    handle = segmenter.model.llm.lm_head.register_forward_hook(_Script(segmenter, ANSWER))
    try:
        decoded = _decoded(segmenter, image)
    finally:
        handle.remove()
    assert len(result.targets) == 2
    for i, t in enumerate(result.targets):
        assert t.amodal_mask.dtype == bool and t.amodal_mask.shape == image.shape[:2]
        np.testing.assert_array_equal(t.amodal_mask, decoded.amodal_masks[i])
        np.testing.assert_array_equal(t.mask, decoded.masks[i])  # the command asked for the visible mask
    assert any(not np.array_equal(t.mask, t.amodal_mask) for t in result.targets)


def test_segmenter_setting_is_the_default_and_segment_overrides_it(image):
    seg = Segmenter.from_pretrained("tiny", max_new_tokens=32, decoder="dynamic", amodal=True)
    assert seg.amodal
    assert all(t.amodal_mask is not None for t in _run(seg, image).targets)
    assert all(t.amodal_mask is None for t in _run(seg, image, amodal=False).targets)


def test_intent_amodal_adds_the_complete_shape_and_keeps_mask_visible(segmenter, image):
    """A planner grasps from ``mask``/``bbox``: they must never cover the occluder."""
    _set_intent(segmenter, amodal=True)
    try:
        result = _run(segmenter, image)
        handle = segmenter.model.llm.lm_head.register_forward_hook(_Script(segmenter, ANSWER))
        try:
            decoded = _decoded(segmenter, image)
        finally:
            handle.remove()
    finally:
        _set_intent(segmenter, amodal=False)
    assert decoded.mask_types == ["amodal", "amodal"]
    for i, t in enumerate(result.targets):
        assert t.mask_type == "amodal"
        np.testing.assert_array_equal(t.mask, decoded.masks[i])
        np.testing.assert_array_equal(t.amodal_mask, decoded.amodal_masks[i])  # asked for: filled
        assert t.requested_mask is t.amodal_mask and t.requested_score == t.amodal_score
        assert t.bbox == mask_bbox(decoded.masks[i])
        assert t.score == pytest.approx(float(decoded.scores[i]), abs=1e-6)
        assert t.amodal_score == pytest.approx(float(decoded.amodal_scores[i]), abs=1e-6)
    assert any(not np.array_equal(t.mask, t.amodal_mask) for t in result.targets)


def test_untrained_head_keeps_the_visible_mask(image):
    """A zero head (checkpoints from before it existed) ties, and a tie means modal."""
    seg = Segmenter.from_pretrained("tiny", max_new_tokens=32, decoder="dynamic")
    assert torch.count_nonzero(seg.model.mask_type_head.weight) == 0
    assert all(t.mask_type == "modal" for t in _run(seg, image).targets)


def test_requested_score_is_the_score_of_the_requested_mask():
    visible, whole = np.zeros((4, 4), bool), np.ones((4, 4), bool)
    visible[0, 0] = True

    def target(mask_type: str, amodal_mask):
        return Target(label="box_1", object_name="box", instance=1, part_name="", granularity=Granularity.OBJECT,
                      mask=visible, score=0.3, amodal_mask=amodal_mask, mask_type=mask_type, amodal_score=0.8)

    assert target("amodal", whole).requested_score == 0.8
    assert target("modal", whole).requested_score == 0.3
    assert target("amodal", None).requested_score == 0.3  # no complete shape: the visible mask and its score
