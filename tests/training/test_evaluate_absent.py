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
``m2sa-eval`` on commands about what is not there, beside present ones.

The per-split rejection figures on predictions made by hand (both protocols), gIoU/cIoU
that absent commands never touch, null figures where a split has no absent command, and
the teacher-forced rule on a tiny model whose next-token choice the test sets.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import cv2
from m2sa_core.data.records import SegRecord, TargetAnnotation
from m2sa_core.data.rle import encode_mask
from m2sa_core.evaluation.rejection import RejectionCounter
from m2sa_core.inference import Segmenter
from m2sa_core.inference.absence import absence_of, absent_answer
from m2sa_core.model import get_preset, M2SAModel
from m2sa_core.model.tokenizer import build_tiny_tokenizer
from m2sa_core.prompt import SEG_TOKEN
from m2sa_core.types import Result
import numpy as np
import pytest
import torch
from training import evaluate
from training.evaluate import evaluate_records, Predictions, teacher_forced_predictions, with_rejections

H = W = 32


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def _square(x: int) -> np.ndarray:
    mask = np.zeros((H, W), bool)
    mask[4:12, x:x + 8] = True
    return mask


def _present(tmp_path, name: str, split: str, x: int = 4) -> SegRecord:
    image = tmp_path / f"{name}.png"
    if not image.exists():
        cv2.imwrite(str(image), np.full((H, W, 3), 90, np.uint8))
    target = TargetAnnotation.named("mug_1", "mug", "mug", 1, "", encode_mask(_square(x)))
    return SegRecord(source="synthetic", split=split, image_path=image, image_id=name, question_index=0,
                     question=f"Which thing holds coffee ({name})?", answer_template="It is {seg}.",
                     targets=[target], height=H, width=W, meta={"family": "object"})


def _absent(present: SegRecord, kind: str, words: str, index: int = 1) -> SegRecord:
    return replace(present, question_index=index, question=f"Where is the {words}?",
                   answer_template=absent_answer(words), targets=[], mask_type="modal",
                   meta={"family": "absent", "missing": {"kind": kind, "words": words}})


def _stub_segmenter(tokenizer):
    config = SimpleNamespace(use_im_start_end=False, question_templates="plain", seg_request="")
    return SimpleNamespace(tokenizer=tokenizer, model=SimpleNamespace(config=config), max_new_tokens=32)


def _answers(monkeypatch, answers: dict[str, tuple[str, list[np.ndarray]]]) -> None:
    """Answer each question (generative protocol) with the raw text and masks given for it."""
    def generative(segmenter, image, command, frame_key):
        raw, masks = answers[command]
        result = Result(answer=raw.replace(SEG_TOKEN, "mug_1"), raw_answer=raw, absence=absence_of(raw))
        return result, Predictions(list(masks), list(masks), list(masks), ["modal"] * len(masks))

    monkeypatch.setattr(evaluate, "generative_predictions", generative)


def _run(tokenizer, records, protocol="generative"):
    splits = [r.split for r in records]
    rejections = RejectionCounter(protocol, splits=sorted(set(splits)))
    reports = evaluate_records(_stub_segmenter(tokenizer), records, protocol, splits, progress=False,
                               rejections=rejections)
    return with_rejections(reports, rejections)


def test_generative_figures_per_split_on_hand_made_answers(tmp_path, tokenizer, monkeypatch):
    a = _present(tmp_path, "a", "test_obj_only")
    b = _present(tmp_path, "b", "test_obj_only")
    c = _present(tmp_path, "c", "test_part_only")
    records = [a, b, c,
               _absent(a, "category", "microwave"), _absent(a, "instance", "third mug", 2),
               _absent(b, "property", "red cup"), _absent(c, "part", "mug_1's handle")]
    _answers(monkeypatch, {
        a.question: ("It is [SEG].", [_square(4)]),
        b.question: ("I see nothing to hold coffee.", []),  # a present command wrongly rejected
        c.question: ("It is [SEG].", [_square(4)]),
        "Where is the microwave?": ("There is no microwave here.", []),  # rejected, named
        "Where is the third mug?": ("No mug is in view.", []),  # rejected, the wrong words
        "Where is the red cup?": ("It is [SEG].", [_square(20)]),  # segmented: not rejected
        "Where is the mug_1's handle?": ("I see no mug_1's handle in this image.", []),
    })
    report = _run(tokenizer, records)
    obj, part, total = report["test_obj_only"], report["test_part_only"], report["all"]
    assert (obj["present_commands"], obj["present_rejected_count"], obj["present_rejected"]) == (2, 1, 0.5)
    assert (obj["absent_commands"], obj["absent_rejected_count"]) == (3, 2)
    assert obj["absent_named_count"] == 1 and obj["absent_named"] == 0.5
    assert obj["absent_by_kind"]["property"]["rejected"] == 0.0
    assert obj["absent_by_kind"]["category"]["rejected"] == 1.0
    assert (part["absent_rejected"], part["absent_named"], part["present_rejected"]) == (1.0, 1.0, 0.0)
    assert (total["absent_commands"], total["absent_rejected"], total["present_rejected"]) == (4, 0.75, 1 / 3)
    # gIoU over the present commands only: a (1.0) and b (rejected: its target scores 0).
    assert obj["giou"] == 0.5 and obj["samples"] == 2 and part["giou"] == 1.0
    # Today's keys are all there.
    assert {"split", "protocol", "giou", "ciou", "masks", "samples", "count_accuracy"} <= set(obj)


def test_absent_commands_leave_giou_and_ciou_as_the_same_world_without_them(tmp_path, tokenizer, monkeypatch):
    a, b = _present(tmp_path, "a", "val", x=4), _present(tmp_path, "b", "val", x=8)
    absent = [_absent(a, "category", "microwave"), _absent(b, "part", "mug_1's handle")]
    # The absent commands are answered with masks that would lower gIoU and cIoU if they counted.
    _answers(monkeypatch, {
        a.question: ("It is [SEG].", [_square(4)]),
        b.question: ("It is [SEG].", [_square(6)]),
        "Where is the microwave?": ("It is [SEG].", [_square(20)]),
        "Where is the mug_1's handle?": ("It is [SEG] and [SEG].", [_square(0), _square(16)]),
    })
    without = _run(tokenizer, [a, b])["val"]
    with_absent = _run(tokenizer, [absent[0], a, absent[1], b])["val"]
    keys = ("giou", "ciou", "masks", "samples", "count_accuracy")
    assert {k: with_absent[k] for k in keys} == {k: without[k] for k in keys}
    assert 0 < without["giou"] < 1
    assert with_absent["absent_rejected"] == 0.0 and without["absent_rejected"] is None


def test_a_world_without_absent_commands_reports_them_as_null(tmp_path, tokenizer, monkeypatch):
    a = _present(tmp_path, "a", "val")
    _answers(monkeypatch, {a.question: ("It is [SEG].", [_square(4)])})
    val = _run(tokenizer, [a])["val"]
    assert val["absent_commands"] == 0
    assert val["absent_rejected"] is None and val["absent_named"] is None
    assert {kind["rejected"] for kind in val["absent_by_kind"].values()} == {None}
    assert val["present_rejected"] == 0.0 and val["giou"] == 1.0


def test_teacher_forced_figures_come_from_each_fed_answer(tmp_path, tokenizer, monkeypatch):
    a, b = _present(tmp_path, "a", "val"), _present(tmp_path, "b", "val")
    records = [a, b, _absent(a, "category", "microwave"), _absent(b, "instance", "third mug")]
    rejected = {a.question: True, b.question: False, "Where is the microwave?": True,
                "Where is the third mug?": False}
    begun = {"Where is the microwave?": True}

    def fed(segmenter, builder, record):
        masks = [t.mask(H, W) for t in record.targets]
        return Predictions(masks, masks, masks, ["modal"] * len(masks), rejected=rejected[record.question],
                           first_token=begun.get(record.question, False))

    monkeypatch.setattr(evaluate, "teacher_forced_predictions", fed)
    val = _run(tokenizer, records, "teacher_forced")["val"]
    assert (val["present_rejected"], val["absent_rejected"]) == (0.5, 0.5)
    assert val["absent_named"] is None  # the words are fed, not said
    assert val["absent_first_token"] == 0.5
    assert val["giou"] == 1.0 and val["samples"] == 2


@pytest.fixture(scope="module")
def tiny(tokenizer):
    config = get_preset("tiny")
    config.text_config["vocab_size"] = len(tokenizer)
    config.seg_token_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    torch.manual_seed(0)
    model = M2SAModel.build(config).eval()
    return Segmenter(model, tokenizer, device="cpu", dtype=torch.float32)


def _forcing(segmenter, token_id: int | None, at_end: bool = False):
    """Make the language model's argmax ``token_id`` at every position (or the last one alone); None: never [SEG]."""
    seg = segmenter.seg_token_id

    def hook(module, args, logits):
        logits = logits.clone()
        if token_id is None:
            logits[..., seg] = -1e4
        elif at_end:
            logits[:, -2, token_id] = 1e4  # the position that predicts the end token
        else:
            logits[..., token_id] = 1e4
        return logits

    return segmenter.model.llm.lm_head.register_forward_hook(hook)


def test_teacher_forced_rule_on_a_tiny_models_logits(tmp_path, tokenizer, tiny):
    from m2sa_core.data.builder import SampleBuilder

    builder = SampleBuilder.for_model(tokenizer, tiny.model.config, evaluation=True)
    present = _present(tmp_path, "a", "val")
    absent = _absent(present, "category", "microwave")
    seg = tiny.seg_token_id
    other = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("mug")[0])
    for forced, present_rejected, absent_rejected in ((seg, False, False), (other, True, True),
                                                      (None, True, True)):
        handle = _forcing(tiny, forced)
        try:
            assert teacher_forced_predictions(tiny, builder, present).rejected is present_rejected, forced
            assert teacher_forced_predictions(tiny, builder, absent).rejected is absent_rejected, forced
        finally:
            handle.remove()
    # The refusal is begun when the first answer position's argmax is its first token.
    first = builder.build(absent).labels
    first = next(t for t in first if t != -100)
    handle = _forcing(tiny, first)
    try:
        assert teacher_forced_predictions(tiny, builder, absent).first_token is True
    finally:
        handle.remove()
    # [SEG] as the argmax at the last answer position alone is enough to name a target.
    handle = _forcing(tiny, seg, at_end=True)
    try:
        assert teacher_forced_predictions(tiny, builder, absent).rejected is False
    finally:
        handle.remove()
    assert teacher_forced_predictions(tiny, builder, absent).requested == []  # no [SEG] fed, no mask
