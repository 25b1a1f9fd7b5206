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
Training requests composed from a lexicon, kept clear of the held-out phrasings.

The worded families (:mod:`view`, :mod:`mixed`, :mod:`level`)
say what a family asks in many new ways. The held-out splits must still measure
generalisation, so no composed sentence may carry a clause of a held-out phrasing: the
check is made at composition, against the clauses this module cuts from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from m2sa_core.data.synthetic.knowledge import _pick
import numpy as np

# Where a phrasing is cut into clauses: its slots and its sentence ends.
CLAUSE_BREAKS = ("{name}", "{action}", "?", ".")


def held_out_clauses(phrasings: Iterable[str]) -> tuple[str, ...]:
    """
    Return the clauses of ``phrasings``, lower-cased, of three words or more, each once.

    Shorter pieces ("the", "of the") are the world's common words; three words in a row
    are how a sentence is remembered.
    """
    clauses = []
    for phrasing in phrasings:
        for brk in CLAUSE_BREAKS:
            phrasing = phrasing.replace(brk, ",")
        clauses.extend(p.strip().lower() for p in phrasing.split(",") if len(p.split()) >= 3)
    return tuple(dict.fromkeys(clauses))


def compose(rng: np.random.Generator, forms: tuple[str, ...], slots: Mapping[str, tuple[str, ...] | str],
            forbidden: tuple[str, ...], what: str) -> str:
    """
    One of ``forms`` with its slots filled, avoiding every ``forbidden`` clause.

    ``slots`` maps a slot ("{v}") to its options, one drawn per try in the mapping's
    order, or to a fixed text. Draws are made whether or not the form uses the slot, so
    that a dataset stays the same when a form is reworded.
    """
    for _ in range(100):
        text = _pick(rng, forms)
        for slot, fill in slots.items():
            text = text.replace(slot, fill if isinstance(fill, str) else _pick(rng, fill))
        if not any(clause in text.lower() for clause in forbidden):
            return text
    raise RuntimeError(f"no wording of {what} avoids the held-out clauses")  # unreachable by design
