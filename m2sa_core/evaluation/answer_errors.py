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
What a free answer got wrong about its targets, by kind of mistake.

gIoU and target-count accuracy say how far an answer's masks are from the truth, not
why. For the language side the why decides what to train next: naming the wrong thing,
the right thing at the wrong level (the mug for its handle, or the handle alone when
both were asked for), or the right things with too few or too many instances are
different failures with different remedies (answers at the wrong level call for new
wordings of the request, too few instances for what the image tells apart). The kinds
compare target names only (object, instance, part), never masks.

The counter also splits the answers by how many targets their question asks for: a
target-count accuracy that is high for one target and low for two says the model finds
the first instance and stops, which no split average shows.
And the answer log groups by question sentence: a held-out split of 353 questions holds
92 sentences, one of them 32 times, so one held-out phrasing learned or not moves the
target count by 0.03 to 0.04, and the sentences that cost the most
are the place to look first.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol

# In the order of the report: the first kind that describes an answer is its kind.
KINDS: tuple[str, ...] = (
    "exact",  # the same targets (object, instance, part), in any order
    "too few instances",  # the right (object, part) kinds, fewer targets
    "too many instances",  # the right kinds, more targets
    "other instances",  # the right kinds and count, other instance numbers
    "wrong level",  # the right objects, but parts where objects were asked for, or the reverse, or other parts
    "some category wrong",  # some of the right objects, with wrong or missing ones
    "no category right",  # none of the objects asked for (an empty answer included)
)


# How many targets a question asks for, grouped; and what is counted in each group.
NUMBER_GROUPS: tuple[str, ...] = ("0", "1", "2", "3", "4+")
NUMBER_FIELDS: tuple[str, ...] = ("answers", "right number", "fewer", "more", "exact")


def number_group(asked: int) -> str:
    """Return the :data:`NUMBER_GROUPS` entry of a question asking for ``asked`` targets."""
    if asked < 0:
        raise ValueError(f"a question asks for at least 0 targets, got {asked}")
    return NUMBER_GROUPS[min(asked, len(NUMBER_GROUPS) - 1)]


class NamedTarget(Protocol):
    """Anything named like a target: ``m2sa_core.types.Target``, a dataset's ``TargetAnnotation``."""

    object_name: str
    instance: int
    part_name: str


def answer_error(predicted: Iterable[NamedTarget], truth: Iterable[NamedTarget]) -> str:
    """
    Return the kind (one of :data:`KINDS`) of ``predicted`` against ``truth``.

    Instances are compared only where the truth numbers them (``instance`` > 0): a
    dataset that names targets by category (ReasonSeg) cannot tell instances apart.
    """
    truth = list(truth)
    numbered = all(t.instance > 0 for t in truth)

    def names(targets) -> Counter:
        return Counter((t.object_name.lower(), t.instance if numbered else 0, t.part_name.lower()) for t in targets)

    got, want = names(predicted), names(truth)
    if got == want:
        return "exact"
    got_kinds, want_kinds = {(o, p) for o, _, p in got}, {(o, p) for o, _, p in want}
    if got_kinds == want_kinds:
        n_got, n_want = sum(got.values()), sum(want.values())
        return "too few instances" if n_got < n_want else "too many instances" if n_got > n_want else "other instances"
    got_objects, want_objects = {o for o, _ in got_kinds}, {o for o, _ in want_kinds}
    if got_objects == want_objects:
        return "wrong level"
    return "some category wrong" if got_objects & want_objects else "no category right"


@dataclass
class AnswerErrorCounter:
    """Answers of each kind, per split; sums over ``torch.distributed`` processes."""

    counts: dict[str, Counter] = field(default_factory=dict)
    by_number: Counter = field(default_factory=Counter)  # (number group, field) -> answers

    def add(self, predicted: Iterable[NamedTarget], truth: Iterable[NamedTarget], split: str = "all") -> str:
        predicted, truth = list(predicted), list(truth)
        kind = answer_error(predicted, truth)
        self.counts.setdefault(split, Counter())[kind] += 1
        group = number_group(len(truth))
        self.by_number[group, "answers"] += 1
        self.by_number[group, "right number" if len(predicted) == len(truth)
                       else "fewer" if len(predicted) < len(truth) else "more"] += 1
        self.by_number[group, "exact"] += kind == "exact"
        return kind

    def report_by_number(self) -> dict[str, dict[str, int]]:
        """Return {number group: {field: answers}} for the groups some question fell in, in order."""
        return {g: {f: int(self.by_number[g, f]) for f in NUMBER_FIELDS}
                for g in NUMBER_GROUPS if self.by_number[g, "answers"]}

    def report(self) -> dict[str, dict[str, int]]:
        """{split: {kind: answers}} with every kind, and an "all" row when there are several splits."""
        splits = dict(sorted(self.counts.items()))
        if len(splits) > 1:
            splits["all"] = sum(splits.values(), Counter())
        return {s: {k: int(c[k]) for k in KINDS} for s, c in splits.items()}

    def all_reduce(self, splits: Iterable[str]) -> None:
        """
        Sum the counts over all processes (no-op when not initialised).

        Every process must pass the same ``splits``, even those that saw none of a
        split's answers.
        """
        import torch
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        splits = sorted(set(splits))
        state = torch.tensor([[self.counts.get(s, Counter())[k] for k in KINDS] for s in splits], dtype=torch.float64)
        dist.all_reduce(state)
        self.counts = {s: Counter({k: int(v) for k, v in zip(KINDS, row.tolist()) if v})
                       for s, row in zip(splits, state)}
        keys = [(g, f) for g in NUMBER_GROUPS for f in NUMBER_FIELDS]
        numbers = torch.tensor([self.by_number[k] for k in keys], dtype=torch.float64)
        dist.all_reduce(numbers)
        self.by_number = Counter({k: int(v) for k, v in zip(keys, numbers.tolist()) if v})


def markdown(report: dict[str, dict[str, int]]) -> str:
    """Return the report as a table: one row per split, the share of answers of each kind."""
    lines = ["| answers | " + " | ".join(KINDS) + " |", "|---|" + "---:|" * len(KINDS)]
    for split, counts in report.items():
        total = sum(counts.values()) or 1
        lines.append(f"| {split} ({sum(counts.values())}) | "
                     + " | ".join(f"{100 * counts[k] / total:.1f} %" for k in KINDS) + " |")
    return "\n".join(lines)


def markdown_by_number(report: dict[str, dict[str, int]]) -> str:
    """
    Return the answers by how many targets their question asks for.

    How often each group's answers name as many targets, fewer or more, and exactly
    the right ones.
    """
    shares = NUMBER_FIELDS[1:]  # every field but the count of answers, as a share of it
    lines = ["| targets asked | answers | " + " | ".join(shares) + " |", "|---|---:|" + "---:|" * len(shares)]
    for group, row in report.items():
        total = row["answers"] or 1
        lines.append(f"| {group} | {row['answers']} | "
                     + " | ".join(f"{100 * row[f] / total:.1f} %" for f in shares) + " |")
    return "\n".join(lines)


def report_by_question(answer_log: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """
    Per question sentence of an answer log (``question``, ``kind``, ``predicted`` and ``truth`` per answer).

    How often its answers name as many targets as asked and exactly the right ones,
    and its most frequent mistake. The sentences whose answers miss the number most
    often come first, so the head of the list is where the target count is lost.
    """
    rows: dict[str, dict[str, Any]] = {}
    for entry in answer_log:
        row = rows.setdefault(entry["question"], {"question": entry["question"], "answers": 0,
                                                  "right number": 0, "exact": 0, "mistakes": Counter()})
        row["answers"] += 1
        row["right number"] += len(entry["predicted"]) == len(entry["truth"])
        if entry["kind"] == "exact":
            row["exact"] += 1
        else:
            row["mistakes"][entry["kind"]] += 1
    report = []
    for row in rows.values():
        mistakes = row.pop("mistakes")
        row["most frequent mistake"] = mistakes.most_common(1)[0][0] if mistakes else ""
        report.append(row)
    return sorted(report, key=lambda r: (r["right number"] - r["answers"], r["exact"] - r["answers"], r["question"]))


def markdown_by_question(report: list[dict[str, Any]], limit: int = 10) -> str:
    """Return the first ``limit`` sentences of :func:`report_by_question` as a table."""
    lines = ["| question | answers | right number | exact | most frequent mistake |", "|---|---:|---:|---:|---|"]
    for row in report[:limit]:
        question = row["question"].replace("|", "\\|")
        lines.append(f"| {question} | {row['answers']} | {row['right number']} | {row['exact']} | "
                     f"{row['most frequent mistake']} |")
    return "\n".join(lines)
