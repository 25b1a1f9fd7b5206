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
The dataset mixture: which samples make up each optimizer step.

Sampling is a pure function of (seed, step, slot), not the state of an iterator. That
is what makes three properties cheap: a resumed run sees exactly the samples an
uninterrupted one would have seen (the data position *is* the step), every rank of a
distributed run draws a disjoint slice of the same global batch, and one process with
gradient accumulation sees the same global batch as N processes without it.
"""

from __future__ import annotations

from dataclasses import dataclass
import logging
from typing import Callable, Sequence

import numpy as np

log = logging.getLogger(__name__)


@dataclass
class Source:
    name: str
    items: Sequence  # a dataset of records
    rate: float


@dataclass(frozen=True)
class Draw:
    source: int
    index: int
    seed: int  # for the per-sample randomness (question template, augmentation)


class Mixture:
    """Draws samples across sources in proportion to their rates (LISA's sample_rate)."""

    def __init__(self, sources: list[Source], seed: int) -> None:
        if not sources:
            raise ValueError("the data mixture is empty: no source is configured")
        empty = [s.name for s in sources if len(s.items) == 0]
        if empty:
            raise ValueError(f"data sources without any sample: {', '.join(empty)} (a configured source is never "
                             "dropped silently: fix its path or image_root, or remove it from the config)")
        rates = np.array([s.rate for s in sources], dtype=np.float64)
        if (rates <= 0).any():
            by_name = {s.name: s.rate for s in sources}
            raise ValueError(f"sample rates must be positive: {by_name}")
        self.sources = sources
        self.probabilities = rates / rates.sum()
        self.seed = seed
        self._groups: dict[int, dict] = {}  # source -> image key -> record indices

    def draw(self, step: int, slot: int, attempt: int = 0) -> Draw:
        rng = np.random.default_rng([self.seed, step, slot, attempt])
        source = int(rng.choice(len(self.sources), p=self.probabilities))
        index = int(rng.integers(len(self.sources[source].items)))
        return Draw(source, index, int(rng.integers(2**31 - 1)))

    def slots(self, micro_step: int, rank: int, world_size: int, batch_size: int) -> range:
        """Global slot numbers of one micro-batch of one rank within an optimizer step."""
        start = (micro_step * world_size + rank) * batch_size
        return range(start, start + batch_size)

    def build_group(self, step: int, slot: int, make: Callable[[object, Draw], object], size: int,
                    max_attempts: int = 20) -> list:
        """
        Return the slot's sample and up to ``size - 1`` more questions about the same image.

        The authors' datasets put up to 3 questions of one image in a sample (each its
        own conversation over the shared image); ``size`` 1 is one question per slot.
        The extra questions are other records of the drawn record's image in the same
        source, chosen from the draw's seed, so the group is as reproducible as the slot.
        """
        first, draw = self._build_with_draw(step, slot, make, max_attempts)
        if size <= 1:
            return [first]
        source = self.sources[draw.source]
        key = _image_key(source.items[draw.index])
        siblings = [i for i in self._image_groups(draw.source).get(key, ()) if i != draw.index] if key else []
        rng = np.random.default_rng([draw.seed, 1])
        group = [first]
        for index in rng.permutation(siblings)[: size - 1].tolist():
            extra = Draw(draw.source, index, int(rng.integers(2**31 - 1)))
            try:
                group.append(make(source.items[index], extra))
            except (ValueError, OSError) as exc:
                log.warning("skipping %s item %d (step %d): %s", source.name, index, step, exc)
        return group

    def _image_groups(self, source: int) -> dict:
        """Record indices of one source grouped by image (built once per source and process)."""
        if source not in self._groups:
            groups: dict = {}
            for i, record in enumerate(self.sources[source].items):
                key = _image_key(record)
                if key is not None:
                    groups.setdefault(key, []).append(i)
            self._groups[source] = groups
        return self._groups[source]

    def build(self, step: int, slot: int, make: Callable[[object, Draw], object],
              max_attempts: int = 20):
        """``make(record, draw)`` for the slot (see :meth:`_build_with_draw`)."""
        return self._build_with_draw(step, slot, make, max_attempts)[0]

    def _build_with_draw(self, step: int, slot: int, make: Callable[[object, Draw], object],
                         max_attempts: int = 20):
        """
        ``make(record, draw)`` for the slot.

        A sample that fails to build is reported and replaced by a deterministic redraw,
        so a bad entry never stops training.
        """
        for attempt in range(max_attempts):
            draw = self.draw(step, slot, attempt)
            source = self.sources[draw.source]
            try:
                return make(source.items[draw.index], draw), draw
            except (ValueError, OSError) as exc:
                log.warning("skipping %s item %d (step %d): %s", source.name, draw.index, step, exc)
        raise RuntimeError(f"step {step} slot {slot}: {max_attempts} samples in a row failed to build")


def _image_key(record) -> str | None:
    """Return what identifies a record's image: its file, else its image id; None when it has neither."""
    path = getattr(record, "image_path", None)
    if path is not None:
        return str(path)
    image_id = getattr(record, "image_id", None)
    return None if image_id is None else f"id:{image_id}"
