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
gIoU and cIoU under the teacher-forced and the generative protocol (the M2SA paper's metrics).

* gIoU: mean over all ground-truth masks of the per-mask IoU; a pair whose prediction
  and ground truth are both empty counts 1.0.
* cIoU: total intersection / total union over the split.
* Teacher-forced: the ground-truth answer is fed in, so predictions pair with ground
  truth by order.
* Generative: the model answers freely; predictions and ground truth are paired by
  Hungarian matching on IoU (scipy); every unmatched prediction or ground truth counts
  one entry with IoU 0 (its area still enters the cIoU union); target-count accuracy
  says how often the number of predicted masks equals the number of ground truths.

All sums are float64 so that an evaluation sharded over ranks can all-reduce them
(:meth:`IoUAccumulator.state` / :meth:`IoUAccumulator.from_state`) and get exactly
the single-process result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
import math
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

PROTOCOLS = ("teacher_forced", "generative")
MMR_TEST_SPLITS = ("test_obj_only", "test_part_only", "test_mixed")


def _check_pair(pred: np.ndarray, gt: np.ndarray, ignore: np.ndarray | None) -> None:
    if pred.shape != gt.shape or pred.ndim != 2:
        raise ValueError(f"prediction {pred.shape} and ground truth {gt.shape} must be 2-D masks of one size")
    if ignore is not None and ignore.shape != gt.shape:
        raise ValueError(f"ignore mask {ignore.shape} does not match the ground truth {gt.shape}")


def intersection_union(pred, gt, ignore=None) -> tuple[int, int]:
    """
    Pixel counts of pred & gt and pred | gt, leaving out ``ignore`` pixels.

    numpy arrays or torch tensors (counted on their own device, so an evaluation on GPU
    does not copy full-size masks to the host); anything non-zero is foreground.
    """
    if hasattr(pred, "detach") and hasattr(gt, "detach"):
        return _intersection_union_torch(pred, gt, ignore)
    pred, gt = np.asarray(pred).astype(bool, copy=False), np.asarray(gt).astype(bool, copy=False)
    _check_pair(pred, gt, ignore)
    if ignore is not None:
        keep = ~np.asarray(ignore, bool)
        pred, gt = pred & keep, gt & keep
    return int(np.count_nonzero(pred & gt)), int(np.count_nonzero(pred | gt))


def _intersection_union_torch(pred, gt, ignore) -> tuple[int, int]:
    if pred.shape != gt.shape or pred.dim() != 2:
        raise ValueError(f"prediction {tuple(pred.shape)} and ground truth {tuple(gt.shape)} "
                         "must be 2-D masks of one size")
    pred, gt = pred.bool(), gt.to(pred.device).bool()
    if ignore is not None:
        import torch

        keep = ~torch.as_tensor(ignore, device=pred.device).bool()
        if keep.shape != gt.shape:
            raise ValueError(f"ignore mask {tuple(keep.shape)} does not match the ground truth {tuple(gt.shape)}")
        pred, gt = pred & keep, gt & keep
    return int((pred & gt).sum().item()), int((pred | gt).sum().item())


def mask_iou(pred: np.ndarray, gt: np.ndarray, ignore: np.ndarray | None = None) -> float:
    """Return the IoU of two boolean masks; 1.0 when both are empty."""
    inter, union = intersection_union(pred, gt, ignore)
    return 1.0 if union == 0 else inter / union


def all_reduce_state(evaluator: Any) -> None:
    """
    Sum ``evaluator.state()`` over all ``torch.distributed`` processes and load it back.

    A no-op when no process group is initialised. The evaluators keep their counts as one
    flat tensor so that one collective sums them all; every process must hold the same layout.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    state = evaluator.state()
    dist.all_reduce(state)
    evaluator.load_state(state)


class IoUAccumulator:
    """
    Running gIoU/cIoU sums for one split.

    ``state()`` is a float64 vector ``[iou_sum, intersection, union, count]``; sum it
    across processes (``torch.distributed.all_reduce``) and rebuild with ``from_state``.
    """

    STATE_SIZE = 4

    def __init__(self) -> None:
        self.iou_sum = 0.0
        self.intersection = 0.0
        self.union = 0.0
        self.n = 0.0

    def add(self, pred: np.ndarray, gt: np.ndarray, ignore: np.ndarray | None = None) -> float:
        """Add one boolean mask pair; returns its IoU."""
        inter, union = intersection_union(pred, gt, ignore)
        iou = 1.0 if union == 0 else inter / union
        self.add_counts(iou, inter, union)
        return iou

    def add_counts(self, iou: float, intersection: float, union: float) -> None:
        """Add one entry from precomputed numbers (e.g. an unmatched mask: IoU 0, its area)."""
        if not 0.0 <= iou <= 1.0 or intersection < 0 or union < intersection:
            raise ValueError(f"invalid entry: iou={iou}, intersection={intersection}, union={union}")
        self.iou_sum += float(iou)
        self.intersection += float(intersection)
        self.union += float(union)
        self.n += 1

    def merge(self, other: IoUAccumulator) -> IoUAccumulator:
        """Add another accumulator's sums into this one (returns self)."""
        self.iou_sum += other.iou_sum
        self.intersection += other.intersection
        self.union += other.union
        self.n += other.n
        return self

    @property
    def count(self) -> int:
        """Return the number of mask pairs (entries) added."""
        return int(self.n)

    @property
    def giou(self) -> float:
        """Mean per-mask IoU; NaN before anything was added."""
        return self.iou_sum / self.n if self.n else math.nan

    @property
    def ciou(self) -> float:
        """Total intersection / total union; 1.0 if every mask was empty, NaN when nothing was added."""
        if not self.n:
            return math.nan
        return self.intersection / self.union if self.union else 1.0

    def state(self, device=None):
        """float64 torch tensor of the sums, ready for ``all_reduce`` (on ``device`` if given)."""
        import torch

        return torch.tensor([self.iou_sum, self.intersection, self.union, self.n], dtype=torch.float64,
                            device=device)

    @classmethod
    def from_state(cls, state) -> IoUAccumulator:
        """Rebuild from :meth:`state` (a tensor or array, possibly summed over processes)."""
        values = state.detach().cpu().numpy() if hasattr(state, "detach") else np.asarray(state)
        values = np.asarray(values, dtype=np.float64).reshape(-1)
        if values.size != cls.STATE_SIZE:
            raise ValueError(f"IoUAccumulator state must have {cls.STATE_SIZE} values, got {values.size}")
        acc = cls()
        acc.iou_sum, acc.intersection, acc.union, acc.n = (float(v) for v in values)
        return acc

    def all_reduce(self) -> IoUAccumulator:
        """Sum the sums over all ``torch.distributed`` processes (no-op when not initialised)."""
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            state = self.state()
            dist.all_reduce(state)
            reduced = IoUAccumulator.from_state(state)
            self.iou_sum, self.intersection, self.union, self.n = (
                reduced.iou_sum, reduced.intersection, reduced.union, reduced.n)
        return self

    def __repr__(self) -> str:
        return f"IoUAccumulator(count={self.count}, giou={self.giou:.4f}, ciou={self.ciou:.4f})"


@dataclass
class Matching:
    """Hungarian pairing of predicted and ground-truth masks of one sample."""

    pairs: list[tuple[int, int]]  # (prediction index, ground-truth index)
    unmatched_pred: list[int]
    unmatched_gt: list[int]
    iou: np.ndarray  # [n_pred, n_gt]


def _to_numpy(m) -> np.ndarray:
    return m.detach().cpu().numpy() if hasattr(m, "detach") else np.asarray(m)


def _stack(masks, what: str) -> np.ndarray:
    """[n, H, W] bool from a stack (numpy or torch) or a sequence of 2-D masks."""
    if hasattr(masks, "detach") or isinstance(masks, np.ndarray):
        arr = _to_numpy(masks)
        if arr.ndim == 3:
            return arr.astype(bool, copy=False)
    masks = [_to_numpy(m).astype(bool, copy=False) for m in masks]
    if not masks:
        return np.zeros((0, 0, 0), bool)
    if any(m.shape != masks[0].shape or m.ndim != 2 for m in masks):
        raise ValueError(f"{what} masks must all be 2-D and of one size")
    return np.stack(masks)


def pairwise_counts(preds: np.ndarray, gts: np.ndarray, ignore: np.ndarray | None = None):
    """(intersection, union) matrices [n_pred, n_gt] of two stacks of masks."""
    keep = None if ignore is None else ~np.asarray(ignore, bool).reshape(-1)
    p = preds.reshape(len(preds), -1)
    g = gts.reshape(len(gts), -1)
    if keep is not None:
        p, g = p[:, keep], g[:, keep]
    p64, g64 = p.astype(np.float64), g.astype(np.float64)
    inter = p64 @ g64.T
    union = p64.sum(1)[:, None] + g64.sum(1)[None, :] - inter
    return inter, union


def match_masks(preds, gts, ignore: np.ndarray | None = None) -> Matching:
    """Pair predictions with ground truths to maximise the total IoU (scipy's Hungarian solver)."""
    p = _stack(preds, "predicted")
    g = _stack(gts, "ground-truth")
    if len(p) and len(g) and p.shape[1:] != g.shape[1:]:
        raise ValueError(f"predicted masks {p.shape[1:]} and ground truth {g.shape[1:]} differ in size")
    if len(p) == 0 or len(g) == 0:
        return Matching([], list(range(len(p))), list(range(len(g))), np.zeros((len(p), len(g))))
    inter, union = pairwise_counts(p, g, ignore)
    iou = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    rows, cols = linear_sum_assignment(iou, maximize=True)
    pairs = [(int(r), int(c)) for r, c in zip(rows, cols)]
    return Matching(
        pairs=pairs,
        unmatched_pred=sorted(set(range(len(p))) - {r for r, _ in pairs}),
        unmatched_gt=sorted(set(range(len(g))) - {c for _, c in pairs}),
        iou=iou,
    )


@dataclass
class SplitReport:
    """Scores of one split under one protocol."""

    split: str
    protocol: str
    giou: float
    ciou: float
    masks: int  # entries in the IoU averages (matched + unmatched)
    samples: int
    count_accuracy: float  # fraction of samples with as many predicted masks as ground truths

    def as_dict(self) -> dict[str, float | int | str]:
        return dict(self.__dict__)


class SegmentationEvaluator:
    """
    Per-split gIoU/cIoU under one protocol, plus target-count accuracy.

    ``splits`` fixes the split names in advance so every process of a sharded
    evaluation has the same state layout for ``all_reduce``; unknown splits are then an
    error. Without ``splits`` they are created on first use (single process).
    """

    def __init__(self, protocol: str = "generative", splits: Sequence[str] | None = None) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        self.protocol = protocol
        self.fixed = splits is not None
        self.accumulators: dict[str, IoUAccumulator] = {s: IoUAccumulator() for s in (splits or ())}
        self.samples: dict[str, float] = dict.fromkeys(splits or (), 0.0)
        self.count_correct: dict[str, float] = dict.fromkeys(splits or (), 0.0)

    def _split(self, split: str) -> IoUAccumulator:
        if split not in self.accumulators:
            if self.fixed:
                raise KeyError(f"split {split!r} is not one of {sorted(self.accumulators)}")
            self.accumulators[split] = IoUAccumulator()
            self.samples[split] = 0.0
            self.count_correct[split] = 0.0
        return self.accumulators[split]

    def add(self, pred_masks, gt_masks, split: str = "all", ignore: np.ndarray | None = None) -> list[float]:
        """Score one sample; returns the IoU of every entry it added."""
        acc = self._split(split)
        p = _stack(pred_masks, "predicted")
        g = _stack(gt_masks, "ground-truth")
        if self.protocol == "teacher_forced":
            n = min(len(p), len(g))
            pairs = [(i, i) for i in range(n)]
            extra_p, extra_g = list(range(n, len(p))), list(range(n, len(g)))
        else:
            m = match_masks(p, g, ignore)
            pairs, extra_p, extra_g = m.pairs, m.unmatched_pred, m.unmatched_gt
        ious = [acc.add(p[i], g[j], ignore) for i, j in pairs]
        keep = None if ignore is None else ~np.asarray(ignore, bool)
        for stack, idx in ((p, extra_p), (g, extra_g)):
            for i in idx:
                area = int(np.count_nonzero(stack[i] if keep is None else stack[i] & keep))
                # An unmatched empty mask is not an error worth a penalty in cIoU, but it
                # is still a missing/extra target: IoU 0 in gIoU.
                acc.add_counts(0.0, 0, area)
                ious.append(0.0)
        self.samples[split] += 1
        self.count_correct[split] += float(len(p) == len(g))
        return ious

    def report(self) -> dict[str, SplitReport]:
        """One :class:`SplitReport` per split, plus ``"all"`` merged over splits when there are several."""
        out = {}
        for split, acc in self.accumulators.items():
            n = self.samples[split]
            out[split] = SplitReport(split, self.protocol, acc.giou, acc.ciou, acc.count, int(n),
                                     self.count_correct[split] / n if n else math.nan)
        if len(self.accumulators) > 1 and "all" not in self.accumulators:
            total = IoUAccumulator()
            for acc in self.accumulators.values():
                total.merge(acc)
            n = sum(self.samples.values())
            out["all"] = SplitReport("all", self.protocol, total.giou, total.ciou, total.count, int(n),
                                     sum(self.count_correct.values()) / n if n else math.nan)
        return out

    def state(self, device=None):
        """float64 tensor [n_splits, 6] (accumulator sums, samples, correct counts), splits sorted."""
        import torch

        rows = []
        for split in sorted(self.accumulators):
            acc = self.accumulators[split].state().tolist()
            rows.append(acc + [self.samples[split], self.count_correct[split]])
        return torch.tensor(rows, dtype=torch.float64, device=device).reshape(-1, 6)

    def load_state(self, state) -> None:
        """Replace the sums with ``state`` (e.g. after an all-reduce of :meth:`state`)."""
        values = state.detach().cpu().numpy() if hasattr(state, "detach") else np.asarray(state)
        values = np.asarray(values, np.float64).reshape(-1, 6)
        splits = sorted(self.accumulators)
        if len(values) != len(splits):
            raise ValueError(f"state has {len(values)} rows for {len(splits)} splits")
        for split, row in zip(splits, values):
            self.accumulators[split] = IoUAccumulator.from_state(row[:4])
            self.samples[split], self.count_correct[split] = float(row[4]), float(row[5])

    def all_reduce(self) -> None:
        """
        Sum the state over all processes of ``torch.distributed`` (no-op when not initialised).

        Every process must have been built with the same ``splits``.
        """
        all_reduce_state(self)


def format_report(reports: dict[str, SplitReport]) -> str:
    """Return a plain-text table of split reports (what ``m2sa-eval`` prints)."""
    lines = [f"{'split':<16} {'protocol':<15} {'gIoU':>7} {'cIoU':>7} {'masks':>7} {'samples':>8} {'count acc':>9}"]
    for r in reports.values():
        lines.append(f"{r.split:<16} {r.protocol:<15} {r.giou:7.4f} {r.ciou:7.4f} {r.masks:7d} {r.samples:8d} "
                     f"{r.count_accuracy:9.4f}")
    return "\n".join(lines)


# -- amodal masks and mask-type intent ------------------------------------------------------
def pair_masks(preds, gts, protocol: str, ignore: np.ndarray | None = None
               ) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """(pairs, unmatched predictions, unmatched ground truths) of one sample under ``protocol``."""
    p, g = _stack(preds, "predicted"), _stack(gts, "ground-truth")
    if protocol == "teacher_forced":
        n = min(len(p), len(g))
        return [(i, i) for i in range(n)], list(range(n, len(p))), list(range(n, len(g)))
    m = match_masks(p, g, ignore)
    return m.pairs, m.unmatched_pred, m.unmatched_gt


def occluded(visible, amodal) -> np.ndarray:
    """Bool [n]: targets whose complete (amodal) mask has pixels outside their visible mask."""
    v, a = _stack(visible, "visible"), _stack(amodal, "amodal")
    if v.shape != a.shape:
        raise ValueError(f"visible masks {v.shape} and amodal masks {a.shape} differ")
    return (a & ~v).reshape(len(a), -1).any(1)


class AmodalEvaluator:
    """
    Visible, amodal (all targets and occluded ones only) and mask-type scores over a dataset.

    It sits beside :class:`SegmentationEvaluator` (which scores the mask each command asked
    for, per split): visible predictions against visible ground truth, amodal predictions
    against amodal ground truth, the amodal subset whose target is occluded, and the share
    of ground-truth targets whose predicted mask type ("modal" | "amodal") is right. Each
    part counts only the samples that have its ground truth. Pairing and unmatched entries
    follow the protocol as in :class:`SegmentationEvaluator`; in the occluded subset an
    unmatched occluded target counts IoU 0 and extra predictions are not counted.
    """

    PARTS = ("visible", "amodal", "amodal_occluded")

    def __init__(self, protocol: str = "generative") -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        self.protocol = protocol
        self.accumulators = {part: IoUAccumulator() for part in self.PARTS}
        self.type_correct = 0.0
        self.type_total = 0.0

    def _add(self, acc: IoUAccumulator, preds, gts, ignore, keep_gt=None, count_extra_preds=True) -> None:
        p, g = _stack(preds, "predicted"), _stack(gts, "ground-truth")
        pairs, extra_p, extra_g = pair_masks(p, g, self.protocol, ignore)
        keep = None if ignore is None else ~np.asarray(ignore, bool)
        for i, j in pairs:
            if keep_gt is None or keep_gt[j]:
                acc.add(p[i], g[j], ignore)
        unmatched = [(g, j) for j in extra_g if keep_gt is None or keep_gt[j]]
        if count_extra_preds:
            unmatched += [(p, i) for i in extra_p]
        for stack, i in unmatched:
            acc.add_counts(0.0, 0, int(np.count_nonzero(stack[i] if keep is None else stack[i] & keep)))

    def add_visible(self, preds, gts, ignore: np.ndarray | None = None) -> None:
        """Visible predictions of one sample against its visible ground truth."""
        self._add(self.accumulators["visible"], preds, gts, ignore)

    def add_amodal(self, preds, gts, gt_visible=None, ignore: np.ndarray | None = None) -> None:
        """Amodal predictions against amodal ground truth; with ``gt_visible``, the occluded subset too."""
        self._add(self.accumulators["amodal"], preds, gts, ignore)
        if gt_visible is not None:
            hidden = occluded(gt_visible, gts)
            if hidden.any():
                self._add(self.accumulators["amodal_occluded"], preds, gts, ignore, keep_gt=hidden,
                          count_extra_preds=False)

    def add_mask_types(self, pred_types: Sequence[str], gt_type: str, pairs: Sequence[tuple[int, int]],
                       n_gt: int) -> None:
        """Per ground-truth target: is its paired prediction's mask type ``gt_type``? Unpaired ones are wrong."""
        self.type_total += n_gt
        self.type_correct += sum(1 for i, j in pairs if j < n_gt and pred_types[i] == gt_type)

    def state(self, device=None):
        """float64 tensor [14]: the three accumulators' sums, then correct and total mask types."""
        import torch

        values = [v for part in self.PARTS for v in self.accumulators[part].state().tolist()]
        return torch.tensor(values + [self.type_correct, self.type_total], dtype=torch.float64, device=device)

    def load_state(self, state) -> None:
        values = state.detach().cpu().numpy() if hasattr(state, "detach") else np.asarray(state)
        values = np.asarray(values, np.float64).reshape(-1)
        size = 4 * len(self.PARTS) + 2
        if values.size != size:
            raise ValueError(f"AmodalEvaluator state must have {size} values, got {values.size}")
        for k, part in enumerate(self.PARTS):
            self.accumulators[part] = IoUAccumulator.from_state(values[4 * k:4 * k + 4])
        self.type_correct, self.type_total = float(values[-2]), float(values[-1])

    def all_reduce(self) -> None:
        """Sum over all ``torch.distributed`` processes (no-op when not initialised)."""
        all_reduce_state(self)

    def report(self) -> dict[str, dict[str, float | int | None]]:
        """JSON-ready scores; parts without ground truth report ``None`` rather than NaN."""
        out: dict[str, dict[str, float | int | None]] = {}
        for part, acc in self.accumulators.items():
            out[part] = {"giou": acc.giou if acc.count else None, "ciou": acc.ciou if acc.count else None,
                         "masks": acc.count}
        total = int(self.type_total)
        out["mask_type"] = {"accuracy": self.type_correct / total if total else None, "targets": total}
        return out
