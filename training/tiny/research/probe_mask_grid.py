"""How good can a mask be when it passes through SAM's low-resolution grid? The ceiling per split.

SAM predicts its masks on a grid of side ``image_size / patch_size * 4`` (64 for the
tiny preset: 256 px, 16-px patches) and upsamples them to the image. A small part such
as a mug's handle spans a few cells of that grid, so even a perfect prediction loses its
outline. This probe takes every ground-truth target of a world's test splits, squares it
as the model's preprocessing pads the image (content top left), passes it through a grid
of each side asked for and upsamples it back as SAM does (bilinear, then > 0), and
reports the mean IoU with the original: the gIoU a model with perfect masks at that
grid could reach when it names the right targets (the teacher-forced protocol).

Two cases bound a real model from both sides: ``hard``, a grid cell that is either in or
out (a confident model), and ``soft``, a cell whose logit says how much of it is covered
(the best a model can do; its edges fall between cells).

    .venv/bin/python training/tiny/research/probe_mask_grid.py --data-dir data/heldout --grids 64 128

A second table gives the same ceilings by target size (COCO's area ranges, as
``m2sa-eval`` breaks its scores down), to say how much of small targets' low IoU the grid
alone explains.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from m2sa_core.evaluation.target_breakdown import SIZE_RANGES, size_range
from training.ablation import TEST_FILES
from training.config import DataSourceConfig
from training.sources import open_source


def through_grid(mask: np.ndarray, grid: int, soft: bool) -> np.ndarray:
    """``mask`` [H, W] bool after a ``grid`` x ``grid`` logit map over its padded square."""
    h, w = mask.shape
    side = max(h, w)
    square = torch.zeros(1, 1, side, side)
    square[0, 0, :h, :w] = torch.from_numpy(mask.astype(np.float32))
    covered = F.interpolate(square, size=(grid, grid), mode="area")
    logits = covered * 2 - 1 if soft else (covered > 0.5).float() * 2 - 1
    up = F.interpolate(logits, size=(side, side), mode="bilinear", align_corners=False)
    return up[0, 0, :h, :w].numpy() > 0


def iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", type=Path, default=Path("data/heldout"))
    p.add_argument("--grids", type=int, nargs="+", default=[64, 128])
    p.add_argument("--max-items", type=int, default=120, help="questions per split")
    args = p.parse_args()
    head = " | ".join(f"{g} hard | {g} soft" for g in args.grids)
    rule = "|---|---:|" + "---:|" * (2 * len(args.grids))
    by_split: dict[str, list[np.ndarray]] = {}
    for name in TEST_FILES:
        source = DataSourceConfig(kind="synthetic", path=str(args.data_dir / name),
                                  image_root=str(args.data_dir / "images"))
        by_split[name] = [t.mask(r.height, r.width) for r in open_source(source).items[:args.max_items]
                          for t in r.targets]
    every = [m for masks in by_split.values() for m in masks]
    by_size = {name: [m for m in every if size_range(m.sum()) == name] for name, _, _ in SIZE_RANGES}

    def row(title: str, masks: list[np.ndarray]) -> str:
        cells = [f"{np.mean([iou(m, through_grid(m, grid, soft)) for m in masks]):.3f}"
                 for grid in args.grids for soft in (False, True)]
        return f"| {title} | {len(masks)} | " + " | ".join(cells) + " |"

    print(f"| split | targets | {head} |", rule, *(row(n, m) for n, m in by_split.items()), sep="\n")
    print(f"\n| target size (COCO area) | targets | {head} |", rule,
          *(row(n, m) for n, m in by_size.items() if m), sep="\n")


if __name__ == "__main__":
    main()
