"""How often a training mixture says a phrase in visible requests against complete ones.

A tiny language model trained for minutes reads the mask kind off whichever words came
with it most often; a phrase that comes mostly with one kind decides the kind of every
request that says it, even when a negation next to it says otherwise ("Outline the mug
as it appears, without the hidden part." got the complete mask: training/tiny/research/RUNS.md,
run 9). This counts, per 1,000 samples drawn the way the trainer draws them (source by
its rate, then a record uniformly), the questions that contain each phrase, split by the
record's mask type, so a skew shows before a training run rather than after it.

    .venv/bin/python training/tiny/research/phrase_exposure.py training/tiny/3_m2sa.yaml "hidden part" Outline covered
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from training.config import load_config
from training.sources import open_sources

KINDS = ("amodal", "modal", "none")


def exposure(config_path: str, phrases: list[str]) -> dict[str, dict[str, float]]:
    """phrase -> mask kind -> expected samples per 1,000 whose question contains it (case-insensitive)."""
    sources = open_sources(load_config(config_path).data)
    total = sum(s.rate for s in sources)
    out: dict[str, dict[str, float]] = {p: defaultdict(float) for p in phrases}
    for source in sources:
        weight = 1000.0 * source.rate / total / len(source.items)
        for record in source.items:
            question = (getattr(record, "question", "") or "").lower()
            kind = getattr(record, "mask_type", None) or "none"
            for phrase in phrases:
                if phrase.lower() in question:
                    out[phrase][kind] += weight
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="a training YAML (its data: list is the mixture)")
    parser.add_argument("phrases", nargs="+", help="phrases to count, case-insensitive")
    args = parser.parse_args(argv)
    try:
        table = exposure(args.config, args.phrases)
    except (OSError, ValueError) as exc:
        print(f"phrase_exposure: {exc}", file=sys.stderr)
        return 1
    width = max(len(p) for p in args.phrases) + 2
    print(f"{'phrase':<{width}}" + "".join(f"{k:>10}" for k in ("complete", "visible", "no type")) + "   per 1,000 samples")
    for phrase, counts in table.items():
        print(f"{phrase:<{width}}" + "".join(f"{counts.get(k, 0.0):10.1f}" for k in KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
