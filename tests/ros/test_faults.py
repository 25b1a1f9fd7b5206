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
Fault injection: the model runs out of memory, image conversion breaks, a goal is cancelled.

For each fault the command gets its error result, the worker goes on and the next
command succeeds. After an out-of-memory error the node gives the memory back: the
tensors of the failed call are dropped (checked with weak references, with automatic
garbage collection off, so only the node's own clean-up can free them) and, on a CUDA
device, ``torch.cuda.empty_cache()`` is called.

The model is the real tiny Segmenter; faults are injected into its stages
(generation, mask decoding) so everything around them is the production path.
"""

from __future__ import annotations

from contextlib import contextmanager
import gc
import threading
import time
from typing import Any, Callable
import weakref

from node_harness import DirectNode, good_image
import numpy as np
import pytest
import torch

pytestmark = [pytest.mark.ros, pytest.mark.integration]


@pytest.fixture(scope="module")
def segmenter():
    from m2sa_core.inference import Segmenter

    return Segmenter.from_pretrained("tiny", device="cpu", max_new_tokens=3)


class Faults:
    """
    Arms one failure inside the real model, through forward hooks on its modules.

    Hooks sit on modules every implementation of the stages must call: the LM head
    (called once per generated token) and the SAM mask decoder's two-way transformer
    (called once per decoded answer). ``seg_answer`` steers greedy decoding to answer
    "[SEG]" so that the random-weight model has a mask to decode.
    """

    def __init__(self, seg: Any) -> None:
        self.seg = seg
        self.dropped: list[weakref.ref] = []

    def _module(self, stage: str) -> torch.nn.Module:
        if stage == "generation":
            return self.seg.model.llm.lm_head
        if stage == "decoding":
            return self.seg.model.sam.mask_decoder.transformer
        raise ValueError(stage)

    @contextmanager
    def raising_in(self, stage: str, error: Callable[[], BaseException], cycle: bool = True, on_call: int = 1):
        refs, calls, fired = self.dropped, [0], [False]

        def hook(_module: Any, _inputs: Any) -> None:
            calls[0] += 1
            if fired[0] or calls[0] < on_call:
                return
            fired[0] = True
            activations = torch.ones(4 * 2**20)  # 16 MiB held by this frame, like a KV cache would be
            refs.append(weakref.ref(activations))
            try:
                raise error()  # a fresh exception: one kept by the test would pin its traceback
            except BaseException as err:
                if cycle:
                    # The frame now refers to its own exception: a reference cycle, as deep
                    # library code often makes; only a garbage collection can free it.
                    keep = err  # noqa: F841
                raise

        handle = self._module(stage).register_forward_pre_hook(hook)
        try:
            yield
        finally:
            handle.remove()
        assert fired[0], f"the fault in {stage} was never reached"

    @contextmanager
    def seg_answer(self):
        """Greedy decoding answers "[SEG]" then EOS, whatever the random weights say."""
        ids = [self.seg.seg_token_id, self.seg.eos_token_id]
        step = [0]

        def hook(_module: Any, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            output = output.clone()
            output[..., ids[min(step[0], 1)]] = output.max() + 10.0
            step[0] += 1
            return output

        def new_prompt(_module: Any, args: Any, kwargs: dict) -> None:
            embeds = kwargs.get("inputs_embeds", args[0] if args else None)
            if embeds is not None and embeds.shape[1] > 1:  # a prefill: the answer starts again
                step[0] = 0

        handle = self.seg.model.llm.lm_head.register_forward_hook(hook)
        prefill = self.seg.model.llm.model.register_forward_pre_hook(new_prompt, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()
            prefill.remove()


def oom(stage: str) -> Callable[[], torch.cuda.OutOfMemoryError]:
    return lambda: torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 16.00 MiB in {stage} "
                                               "(simulated)")


@contextmanager
def automatic_gc_off():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _idle(node: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while node._pipeline.worker is not None and node._pipeline.worker.busy and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.fixture
def cuda_calls(monkeypatch):
    """Pretend CUDA is there and record empty_cache() calls (the node runs with device=cuda)."""
    calls: list[Any] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    return calls


@pytest.mark.parametrize("stage", ["generation", "decoding"])
def test_oom_gives_an_error_result_frees_the_call_and_the_next_command_succeeds(module_context, segmenter, stage):
    faults = Faults(segmenter)
    harness = DirectNode(module_context, segmenter)
    try:
        with faults.seg_answer():
            harness.node._on_image(good_image())
            first = harness.command("turn on the TV")
            assert first.success and len(first.targets) == 1, first.error
            with automatic_gc_off(), faults.raising_in(stage, oom(stage), on_call=2 if stage == "generation" else 1):
                harness.node._on_image(good_image(2))  # a new frame: the whole pipeline runs
                res = harness.command("turn on the TV")
                _idle(harness.node)
                assert not res.success
                assert res.error.startswith("model failure: OutOfMemoryError: CUDA out of memory"), res.error
                assert res.targets == [] and (res.height, res.width) == (24, 32)
                assert faults.dropped and faults.dropped[0]() is None, \
                    "the failed call's tensors are still alive after the error result"
            after = harness.command("turn on the TV")
            assert after.success and len(after.targets) == 1, after.error
    finally:
        harness.close()


def test_oom_on_cuda_empties_the_allocator_cache(module_context, segmenter, cuda_calls):
    faults = Faults(segmenter)
    harness = DirectNode(module_context, segmenter, device="cuda")  # the factory still returns the CPU model
    try:
        harness.node._on_image(good_image())
        assert harness.command("turn on the TV").success and cuda_calls == []
        with faults.raising_in("generation", oom("generation"), cycle=False):
            assert not harness.command("turn on the TV").success
        _idle(harness.node)
        assert cuda_calls == ["empty_cache"]
        with faults.raising_in("generation", lambda: RuntimeError("not a memory problem")):
            res = harness.command("turn on the TV")
        assert res.error == "model failure: RuntimeError: not a memory problem"
        _idle(harness.node)
        assert cuda_calls == ["empty_cache"], "only an out-of-memory error empties the CUDA cache"
        assert harness.command("turn on the TV").success
    finally:
        harness.close()


@pytest.mark.parametrize("error", [RuntimeError("converter crashed"), MemoryError(), ValueError("odd")])
def test_an_image_conversion_failure_is_an_error_result_not_a_dead_callback(module_context, segmenter, monkeypatch,
                                                                            error):
    import m2sa_ros.perception_node as pn

    harness = DirectNode(module_context, segmenter)
    try:
        def broken(*_a: Any, **_k: Any) -> Any:
            raise error

        monkeypatch.setattr(pn, "image_to_rgb", broken)
        harness.node._on_image(good_image())  # must not raise out of the callback
        res = harness.command("turn on the TV")
        assert not res.success and res.error.startswith("bad image:"), res.error
        assert type(error).__name__ in res.error
        monkeypatch.undo()
        harness.node._on_image(good_image(2))
        assert harness.command("turn on the TV").success
    finally:
        harness.close()


def test_a_request_image_whose_conversion_crashes_is_answered(module_context, segmenter, monkeypatch):
    """The service/action path converts the request's own image: same guarantee."""
    import m2sa_ros.command_intake as intake
    from m2sa_ros.srv import Segment

    harness = DirectNode(module_context, segmenter)
    try:
        monkeypatch.setattr(intake, "image_to_rgb", lambda *_a, **_k: (_ for _ in ()).throw(RuntimeError("boom")))
        request = Segment.Request(command="turn on the TV", image=good_image())
        response = harness.node._intake.on_service(request, Segment.Response())
        assert not response.result.success and response.result.error.startswith("bad image:")
        assert "RuntimeError: boom" in response.result.error
        monkeypatch.undo()
        response = harness.node._intake.on_service(Segment.Request(command="turn on the TV", image=good_image()),
                                                   Segment.Response())
        assert response.result.success, response.result.error
    finally:
        harness.close()


def test_cancel_mid_generation_gives_a_cancelled_result_and_the_worker_goes_on(module_context, segmenter):
    """What a cancelled action goal does inside the node (the DDS round trip is in test_node_dds)."""
    from m2sa_ros.perception_node import Request

    harness = DirectNode(module_context, segmenter)
    generating, cancel = threading.Event(), threading.Event()
    tokens: list[int] = []

    def slow_token(_module, _inputs, output):
        tokens.append(1)
        generating.set()
        cancel.wait(30)  # the token is still being generated when the cancel comes
        return output

    hook = segmenter.model.llm.lm_head.register_forward_hook(slow_token)
    try:
        harness.node._on_image(good_image())
        done: list[Any] = []
        stages: list[str] = []
        req = Request(request_id="goal-1", command="turn on the TV", source="action",
                      received_ns=harness.node.get_clock().now().nanoseconds,
                      on_feedback=lambda stage, _text: stages.append(stage), on_done=done.append,
                      camera=harness.node.camera())
        harness.node._pipeline.accept(req, stop_when=cancel.is_set)
        assert generating.wait(30)
        cancel.set()
        deadline = time.monotonic() + 30
        while not done and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(done) == 1 and not done[0].success
        assert done[0].error.startswith("cancelled"), done[0].error
        assert "generating" in stages and "decoding" not in stages
        assert len(tokens) < segmenter.max_new_tokens, "cancel did not stop generation early"
    finally:
        hook.remove()
    try:
        assert harness.command("turn on the TV").success
    finally:
        harness.close()


def test_worker_survives_a_failure_inside_the_result_conversion(module_context, segmenter, monkeypatch):
    """A model returning masks of the wrong size fails in conversion: error result, next one fine."""
    harness = DirectNode(module_context, segmenter)
    real_segment = segmenter.segment
    try:
        def wrong_size(image, command, **kwargs):
            result = real_segment(image, command, **kwargs)
            from m2sa_core.types import Granularity, Target

            result.targets = [Target(label="mug_1", object_name="mug", instance=1, part_name="",
                                     granularity=Granularity.OBJECT, mask=np.ones((3, 3), bool), score=0.5)]
            return result

        monkeypatch.setattr(segmenter, "segment", wrong_size)
        harness.node._on_image(good_image())
        res = harness.command("turn on the TV")
        assert not res.success and res.error.startswith("model failure:"), res.error
        monkeypatch.undo()
        assert harness.command("turn on the TV").success
    finally:
        harness.close()
