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
Commands about something not in view: how often the node says so, and how often it says so wrongly.

A bag's ground truth marks a command whose answer should name no target (``missing``,
ground-truth version 2). The node rejects a command when its result is a success with
outcome OUTCOME_ABSENT (interfaces v6; a pre-v6 result: a success with no targets).
Per split, two shares a planner cares about, apart from the masks:

* **absent rejected**: of the absent commands, the share the node rejected (the rest got
  a mask of something else, a failure or no result: a planner must not act on the first);
* **present wrongly rejected**: of the commands whose targets are there, the share the
  node rejected (the planner then gives up on something it could have done).

The masks' gIoU and cIoU are scored on the present commands alone (``scoring``), as before
absent commands existed, so the two figures stay comparable across bags.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any

from m2sa_ros.bag.ground_truth import GroundTruth

ALL = "all"


@dataclass
class AbsenceCounts:
    """One split's counts: absent commands and how many were rejected, present ones and how many wrongly."""

    absent: int = 0
    rejected: int = 0
    present: int = 0
    wrongly_rejected: int = 0

    @property
    def rejected_share(self) -> float:
        """Return the share of absent commands rejected (NaN without any)."""
        return self.rejected / self.absent if self.absent else math.nan

    @property
    def wrongly_rejected_share(self) -> float:
        """Return the share of present commands rejected (NaN without any)."""
        return self.wrongly_rejected / self.present if self.present else math.nan

    def add(self, absent: bool, rejected: bool) -> None:
        if absent:
            self.absent += 1
            self.rejected += int(rejected)
        else:
            self.present += 1
            self.wrongly_rejected += int(rejected)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready; a share without commands is None rather than NaN."""
        def share(value: float) -> float | None:
            return None if math.isnan(value) else value

        return {"absent": self.absent, "rejected": self.rejected, "rejected_share": share(self.rejected_share),
                "present": self.present, "wrongly_rejected": self.wrongly_rejected,
                "wrongly_rejected_share": share(self.wrongly_rejected_share)}


def rejected(prediction: Any) -> bool:
    """Tell whether a Prediction (or None: no result) says the command's target is not there."""
    return prediction is not None and bool(prediction.success) and prediction.outcome == "absent"


def score_absence(truth: GroundTruth, predictions: dict[int, Any],
                  exclude: Sequence[int] = ()) -> dict[str, AbsenceCounts]:
    """
    Return per split (and ``"all"`` when there are several) the absent and present commands' counts.

    ``predictions`` maps a command's index to its Prediction (None: no result, never a
    rejection); ``exclude`` leaves commands out as ``scoring.score_predictions`` does.
    """
    skip = set(exclude)
    splits: dict[str, AbsenceCounts] = {}
    for command in truth.commands:
        if command.index in skip:
            continue
        splits.setdefault(command.split or ALL, AbsenceCounts()).add(command.absent,
                                                                     rejected(predictions.get(command.index)))
    if len(splits) > 1:
        total = AbsenceCounts()
        for counts in splits.values():
            total.absent += counts.absent
            total.rejected += counts.rejected
            total.present += counts.present
            total.wrongly_rejected += counts.wrongly_rejected
        splits[ALL] = total
    return splits
