"""A stage-1 checkpoint with a fresh CLIP at another input size, without training stage 1 again.

Stage 1 trains SAM alone (policy ``promptable_sam``): CLIP leaves it as it was built,
random. A stage 1 run with ``model.overrides: {vision_config.image_size: N}`` therefore
gives the same SAM and a CLIP of N px that no stage has touched, and costs the 1 h 30 min
stage 1 takes on two cores. This writes that checkpoint from an existing stage-1 final:
every weight outside ``vision_tower.`` is copied, CLIP is built afresh at the new size
(its position embeddings depend on it) from ``--seed``. Stage 1b then starts from it as
from any stage-1 final (training/tiny/RUNS.md, run 56).

    .venv/bin/python scripts/swap_clip_size.py --model runs/tiny53/1_sam/final \
        --image-size 168 --out runs/tiny56/1_sam/final
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from m2sa_core.model.checkpoint import from_pretrained, save_pretrained
from m2sa_core.model.config import M2SAConfig
from m2sa_core.model.m2sa import M2SAModel

CLIP_PREFIX = "vision_tower."


def swap_clip_size(source: Path, image_size: int, out: Path, seed: int = 0) -> M2SAModel:
    """The model of ``source`` with a freshly initialised CLIP reading ``image_size`` px."""
    model, tokenizer = from_pretrained(source)
    config = M2SAConfig.load(source)
    patch = int(config.vision_config["patch_size"])
    if image_size <= 0 or image_size % patch:
        raise ValueError(f"--image-size {image_size} is not a positive multiple of CLIP's patch size ({patch})")
    config.vision_config["image_size"] = image_size
    torch.manual_seed(seed)
    swapped = M2SAModel.build(config)
    kept = {k: v for k, v in model.state_dict().items() if not k.startswith(CLIP_PREFIX)}
    missing, unexpected = swapped.load_state_dict(kept, strict=False)
    if unexpected or any(not k.startswith(CLIP_PREFIX) for k in missing):
        raise RuntimeError(f"{source}: weights outside CLIP did not all carry over "
                           f"(missing {[k for k in missing if not k.startswith(CLIP_PREFIX)][:3]}, "
                           f"unexpected {unexpected[:3]})")
    save_pretrained(swapped, tokenizer, out)
    return swapped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="a stage-1 final (save_pretrained format)")
    parser.add_argument("--image-size", type=int, required=True, help="CLIP's new input size in px")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0, help="CLIP's initialisation")
    args = parser.parse_args(argv)
    try:
        model = swap_clip_size(args.model, args.image_size, args.out, args.seed)
    except (ValueError, RuntimeError, OSError) as err:
        print(f"swap_clip_size: {err}", file=sys.stderr)
        return 2
    print(f"{args.out}: CLIP at {args.image_size} px, {model.config.num_image_tokens} image tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
