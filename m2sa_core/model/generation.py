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
The greedy generation loop, kept on the device.

A per-token ``.tolist()`` to look for EOS and [SEG] stalls the GPU once per token: the
host waits for the step to finish, then spends its Python time while the device idles.
Here every generated id and its hidden state go into device buffers, and the host learns
whether all rows have ended through a small pinned copy. With ``lagged`` polling (the
default on CUDA) the next step is launched before the host looks at the current one, so
the device always has work queued; the price is at most one discarded step per call.
Ids and [SEG] states are read back once, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from m2sa_core.types import Cancelled  # noqa: F401  (raised here; importable from here as before)
import torch


class Stepper(Protocol):
    """What a decoder offers the loop after its prefill (see :mod:`m2sa_core.model.kv_decoders`)."""

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass
class Generation:
    """Greedy output of one prompt: generated ids (EOS excluded) and [SEG]-predicting states."""

    tokens: list[int]
    seg_states: list[torch.Tensor]
    greedy: list[int] | None = None  # argmax ids per step when the answer was forced (benchmarks)
    # False when the token limit stopped it before EOS: the answer may be cut short
    finished: bool = True


@dataclass(frozen=True)
class SpecialIds:
    eos: int
    pad: int
    seg: int


@dataclass
class GenerationLog:
    """Per-step ids, the hidden states that predicted them and the rows that have ended."""

    tokens: torch.Tensor  # long [B, max_new]
    hiddens: torch.Tensor  # [B, max_new, d]
    done: torch.Tensor  # bool [B]
    greedy: torch.Tensor | None = None  # long [B, max_new], argmax ids when forced
    steps: int = 0

    @classmethod
    def allocate(cls, hidden: torch.Tensor, max_new: int, pad: int, forced: bool) -> GenerationLog:
        batch, dim = hidden.shape
        tokens = torch.full((batch, max_new), pad, dtype=torch.long, device=hidden.device)
        return cls(tokens=tokens, hiddens=hidden.new_zeros((batch, max_new, dim)),
                   done=torch.zeros(batch, dtype=torch.bool, device=hidden.device),
                   greedy=tokens.clone() if forced else None)

    def record(self, step: int, ids: torch.Tensor, hidden: torch.Tensor, special: SpecialIds) -> torch.Tensor:
        """Store this step's ids (pad on ended rows) and states; return the ids to feed next."""
        ids = torch.where(self.done, torch.full_like(ids, special.pad), ids)
        self.tokens[:, step] = ids
        self.hiddens[:, step] = hidden
        self.done |= ids == special.eos
        self.steps = step + 1
        return ids

    def generations(self, special: SpecialIds, forced: Sequence[Sequence[int]] | None) -> list[Generation]:
        """Read back once: ids up to EOS, and the state at every [SEG]."""
        rows = self.tokens[:, :self.steps].tolist()
        out = []
        for b, row in enumerate(rows):
            tokens = _until_eos(row, special.eos)
            seg_states = [self.hiddens[b, i] for i, tok in enumerate(tokens) if tok == special.seg]
            greedy = None
            if forced is not None and self.greedy is not None:
                greedy = self.greedy[b, :min(len(forced[b]), self.steps)].tolist()
            out.append(Generation(tokens, seg_states, greedy, finished=special.eos in row))
        return out


def _until_eos(ids: list[int], eos: int) -> list[int]:
    return ids[:ids.index(eos)] if eos in ids else ids


@dataclass
class StopProbe:
    """
    The host's view of the loop: whether every row has ended, and row 0's ids, per step.

    On CUDA the values travel through pinned buffers with non-blocking copies and an
    event per step, so reading step t waits only for step t, not for work queued after it.
    """

    device: torch.device
    max_new: int
    host_done: torch.Tensor = field(init=False)
    host_first: torch.Tensor = field(init=False)
    events: list[torch.cuda.Event] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        cuda = self.device.type == "cuda"
        self.host_done = torch.zeros(self.max_new, dtype=torch.bool, pin_memory=cuda)
        self.host_first = torch.zeros(self.max_new, dtype=torch.long, pin_memory=cuda)
        if cuda:
            self.events = [torch.cuda.Event() for _ in range(2)]

    def record(self, step: int, done: torch.Tensor, first_row_id: torch.Tensor) -> None:
        self.host_done[step:step + 1].copy_(done.all().view(1), non_blocking=True)
        self.host_first[step:step + 1].copy_(first_row_id.view(1), non_blocking=True)
        if self.events is not None:
            self.events[step % 2].record()

    def poll(self, step: int) -> bool:
        """Return True when every row had ended by ``step``; waits for that step's copies only."""
        if self.events is not None:
            self.events[step % 2].synchronize()
        return bool(self.host_done[step])

    def first_row(self, steps: int, eos: int) -> list[int]:
        return _until_eos(self.host_first[:steps].tolist(), eos)


def greedy_generate(
    stepper: Stepper,
    prefilled: tuple[torch.Tensor, torch.Tensor],
    max_new_tokens: int,
    special: SpecialIds,
    *,
    lagged: bool,
    on_tokens: Callable[[list[int]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    forced: Sequence[Sequence[int]] | None = None,
) -> tuple[list[Generation], int]:
    """
    Greedy decoding after ``stepper.prefill`` gave ``prefilled`` (last states, their argmax ids).

    Returns the generations and the decode steps run.

    ``forced`` (benchmarks) feeds the given answer ids instead of the argmax, then EOS:
    the same work as a free answer of that length, whatever the weights. ``on_tokens``
    hears row 0's ids so far after each step (one step late when ``lagged``).
    """
    hidden, next_ids = prefilled
    if forced is not None and len(forced) != hidden.shape[0]:
        raise ValueError(f"forced answers ({len(forced)}) must match prompts ({hidden.shape[0]})")
    device = hidden.device
    log = GenerationLog.allocate(hidden, max_new_tokens, special.pad, forced is not None)
    forced_ids = None
    if forced is not None:
        rows = [list(f[:max_new_tokens]) for f in forced]
        forced_ids = torch.tensor([row + [special.eos] * (max_new_tokens - len(row)) for row in rows],
                                  dtype=torch.long, device=device)
    probe = StopProbe(device, max_new_tokens)
    steps = 0
    for step in range(max_new_tokens):
        if should_stop is not None and should_stop():
            raise Cancelled("cancelled while generating")
        if forced_ids is not None and log.greedy is not None:
            log.greedy[:, step] = next_ids
            next_ids = forced_ids[:, step]
        next_ids = log.record(step, next_ids, hidden, special)
        probe.record(step, log.done, next_ids[0])
        last = step == max_new_tokens - 1
        if lagged and not last:  # queue the next step before looking at this one
            hidden, next_ids = stepper.step(next_ids)
            steps += 1
        finished = probe.poll(step)
        if on_tokens is not None:
            on_tokens(probe.first_row(step + 1, special.eos))
        if finished or last:
            break
        if not lagged:
            hidden, next_ids = stepper.step(next_ids)
            steps += 1
    return log.generations(special, forced), steps
