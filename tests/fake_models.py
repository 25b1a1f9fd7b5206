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
Model doubles for node tests that check plumbing, not the network.

They return m2sa_core Results with known box masks, so a test can tell which depth
frame a centroid came from; one of them is slow (a 7B model's 0.35-1.9 s per command)
and can run a callback while it "thinks" (e.g. 30 Hz depth arriving meanwhile).
:class:`TrackingBoxes` also tracks (the ``track`` action), :class:`SlowBoxes` reports
stages and generates until told or cancelled (a planner's round trip), and
:class:`SceneSegmenter` answers with whatever targets the test sets (a synthetic scene's
masks, for the 3-D geometry), and :class:`AbsentBoxes` answers a command about something
not in view as a model that learned to refuse does (no [SEG], a sentence naming the missing
thing).

:class:`ScriptedSegmenter` is the other kind: the real tiny M2SA model with random
weights (the ``tiny`` fixture of tests/ros/conftest.py), whose greedy decoding a forward
hook on its lm_head (:class:`Steering`) steers to a scripted answer; everything after the
logits is the real model.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from m2sa_core.types import Granularity, Result, Target
import numpy as np

SCRIPT = "Press the television_set_1's button [SEG] or the remote_control_1's button [SEG]."


class BoxSegmenter:
    """Answers every command with one target whose mask is a fixed box."""

    def __init__(self, box: tuple[int, int, int, int] = (8, 6, 10, 8), sleep_s: float = 0.0,
                 while_thinking: Callable[[], None] | None = None, mask_type: str = "modal") -> None:
        self.box = box
        self.sleep_s = sleep_s
        self.while_thinking = while_thinking
        self.mask_type = mask_type
        self.mask_threshold = 0.0
        self.duplicate_iou = 0.0
        self.calls = 0

    cache_stats: dict[str, int] = {}

    def segment(self, image: np.ndarray, command: str, **kwargs: Any) -> Result:
        self.calls += 1
        started = time.monotonic()
        if self.while_thinking is not None:
            self.while_thinking()
        remaining = self.sleep_s - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        x, y, w, h = self.box
        mask = np.zeros(image.shape[:2], dtype=bool)
        mask[y:y + h, x:x + w] = True
        amodal = None
        if self.mask_type == "amodal":
            amodal = mask.copy()
            amodal[max(0, y - 2):y + h, x:x + w] = True
        target = Target("mug_1", "mug", 1, "", Granularity.OBJECT, mask, score=0.8, amodal_mask=amodal,
                        mask_type=self.mask_type, amodal_score=0.7 if amodal is not None else 0.0)
        return Result(answer="It is the mug_1.", targets=[target])


class TrackingBoxes(BoxSegmenter):
    """BoxSegmenter that can track: prompts kept on request, tracked frames scored ``track_score``."""

    def __init__(self, track_score: float = 0.8, track_sleep_s: float = 0.0) -> None:
        super().__init__()
        self.track_score = track_score
        self.track_sleep_s = track_sleep_s
        self.track_calls = 0

    def segment(self, image, command, keep_prompts: bool = False, **kwargs):
        from m2sa_core.inference.tracking import TrackPrompts

        result = super().segment(image, command, **kwargs)
        if keep_prompts:
            result.prompts = TrackPrompts.from_result(result, np.zeros((len(result.targets), 4)), command)
        return result

    def track(self, image, prompts, previous=None, *, use_previous_mask=False, frame_key=None):
        from m2sa_core.inference.tracking import TrackState
        import torch

        self.track_calls += 1
        time.sleep(self.track_sleep_s)
        x, y, w, h = self.box
        mask = np.zeros(image.shape[:2], dtype=bool)
        mask[y:y + h, x:x + w] = True
        targets = [Target(t.label, t.object_name, t.instance, t.part_name, t.granularity, mask.copy(),
                          score=self.track_score, mask_type=t.mask_type) for t in prompts.targets]
        index = 0 if previous is None else previous.frame_index + 1
        return Result(answer=prompts.answer, targets=targets), TrackState(torch.zeros((len(targets), 1, 1, 1)), index)


class AbsentBoxes(TrackingBoxes):
    """
    Answers a command naming ``missing`` with no [SEG] and ``absent_answer(missing)``; others as TrackingBoxes.

    The Result is what m2sa_core's stages make of such an answer: no targets, and the
    absence read back from the sentence by ``absence_of``. ``answer`` replaces the sentence
    (e.g. one that follows no template, as real M2SA weights would say it); ``refuse``
    lists the words whose commands are answered so (default: ``missing`` alone), e.g. to
    reject a command whose target is there.
    """

    def __init__(self, missing: str = "microwave", answer: str | None = None,
                 refuse: tuple[str, ...] | None = None) -> None:
        super().__init__()
        self.missing = missing
        self.answer = answer
        self.refuse = (missing,) if refuse is None else tuple(refuse)
        self.absent_calls = 0

    def segment(self, image, command, keep_prompts: bool = False, **kwargs):
        from m2sa_core.inference.absence import absence_of, absent_answer
        from m2sa_core.types import TrackPrompts

        if not any(word in command for word in self.refuse):
            return super().segment(image, command, keep_prompts=keep_prompts, **kwargs)
        self.calls += 1
        self.absent_calls += 1
        raw = absent_answer(self.missing) if self.answer is None else self.answer
        result = Result(answer=raw, raw_answer=raw, absence=absence_of(raw))
        if keep_prompts:  # as Segmenter keeps them: none, for an answer with no [SEG]
            result.prompts = TrackPrompts.from_result(result, np.zeros((0, 0)), command)
        return result


class SlowBoxes(BoxSegmenter):
    """Reports stages like the real Segmenter; generation runs until told or cancelled."""

    def __init__(self) -> None:
        super().__init__(mask_type="amodal")
        self.hold = threading.Event()
        self.hold.set()

    def segment(self, image, command, **kwargs):
        from m2sa_core.inference import Cancelled

        kwargs["on_stage"]("encoding")
        kwargs["on_stage"]("generating")
        kwargs["on_text"]("It is")
        while not self.hold.is_set():
            if kwargs["should_stop"]():
                raise Cancelled("cancelled")
            time.sleep(0.01)
        kwargs["on_stage"]("decoding")
        return super().segment(image, command)


class SceneSegmenter:
    """Answers every command with the targets set in ``targets`` (masks of a synthetic scene)."""

    cache_stats: dict[str, int] = {}

    def __init__(self) -> None:
        self.targets: list[Target] = []
        self.mask_threshold = 0.0
        self.duplicate_iou = 0.0

    def segment(self, image: np.ndarray, command: str, **kwargs) -> Result:
        return Result(answer="the targets", targets=list(self.targets))


class Steering:
    """lm_head hook state: which token ids the next greedy steps must pick."""

    def __init__(self) -> None:
        self.ids: list[int] | None = None
        self.step = 0
        self.delay = 0.0

    def hook(self, _module, _inputs, output):
        if self.ids is None:
            return output
        token = self.ids[min(self.step, len(self.ids) - 1)]
        self.step += 1
        if self.delay:
            time.sleep(self.delay)
        output = output.clone()
        output[..., token] = output.max() + 10.0
        return output


class ScriptedSegmenter:
    """Wraps the shared real Segmenter for one test: scripted answer plus fault knobs."""

    _lock = threading.Lock()  # one shared model, possibly two nodes: one call at a time

    def __init__(self, tiny, answer: str = SCRIPT, amodal: bool = False) -> None:
        self.real, self.steering = tiny
        self.amodal = amodal  # as Segmenter.from_pretrained(..., amodal=...) from the node's parameter
        tok = self.real.tokenizer
        self.answer_ids = tok(" " + answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        self.fail_next = 0
        self.delay_per_token = 0.0
        self.box: tuple[int, int, int, int] | None = None  # x, y, w, h replacing every mask
        self.calls = 0
        self.generating = threading.Event()

    @property
    def cache_stats(self) -> dict[str, int]:
        return self.real.cache_stats

    def segment(self, image, command, **kwargs):
        with self._lock:
            self.calls += 1
            if self.fail_next:
                self.fail_next -= 1
                raise RuntimeError("injected model failure")
            on_stage = kwargs.get("on_stage")

            def stage(name: str) -> None:
                if name == "generating":
                    self.generating.set()
                if on_stage:
                    on_stage(name)

            kwargs["on_stage"] = stage
            if self.amodal:
                kwargs.setdefault("amodal", True)
            self.steering.ids, self.steering.step, self.steering.delay = self.answer_ids, 0, self.delay_per_token
            try:
                result = self.real.segment(image, command, **kwargs)
            finally:
                self.steering.ids, self.steering.delay = None, 0.0
        if self.box is not None:
            x, y, w, h = self.box
            for target in result.targets:
                target.mask = np.zeros(image.shape[:2], bool)
                target.mask[y:y + h, x:x + w] = True
                target.bbox = (x, y, w, h)
        return result
