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

r"""
Probe (RUNS.md, run 79): does a weighted first answer token teach the tiny model to refuse.

Runs 76 and 78 trained stage 3b's refusals and the model did not learn them: the refusal is
one first token ("There is no ...", "I cannot see ...", "No ... is in view") against the
first words of a present answer ("Try the mug_1 ...", "Hold the ..."), one token in about
twenty of the answer's cross-entropy. This probe trains exactly as ``m2sa-train`` does, with
that first answer token of every sample weighted ``--weight`` times the others in the answer
cross-entropy (weights normalised, so the loss keeps its scale; the ranks' token counts are
the weights' sums, so two ranks still train one process's loss). Nothing else changes.

    OMP_NUM_THREADS=1 .venv/bin/torchrun --standalone --nproc-per-node 2 \
        training/tiny/research/first_token_weight.py --weight 10 -- \
        --config training/tiny/3b_absent.yaml --resume out_dir=runs/x/3b_first10 \
        model.init_from=runs/x/3_m2sa/final optim.batch_size=4

It patches the loss where ``m2sa_core.model.m2sa`` looks it up, in this process only; the
product's loss is untouched.
"""

from __future__ import annotations

import argparse
import sys

import m2sa_core.model.m2sa as m2sa_module
from m2sa_core.prompt import IGNORE_INDEX
import torch
import torch.nn.functional as F
from training import train


def first_token_weights(labels: torch.Tensor, weight: float) -> torch.Tensor:
    """Return the weight of each predicted label: 1, ``weight`` for each row's first answer token, 0 where ignored."""
    valid = labels[:, 1:] != IGNORE_INDEX
    first = valid & (valid.cumsum(dim=1) == 1)
    return valid.float() + first.float() * (weight - 1.0)


def patch(weight: float) -> None:
    """Make the model's answer cross-entropy weight each row's first answer token ``weight`` times."""
    def answer_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        weights = first_token_weights(labels, weight).to(logits.device)
        per_token = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), labels[:, 1:].flatten(),
                                    ignore_index=IGNORE_INDEX, reduction="none").view_as(weights)
        return (per_token * weights).sum() / weights.sum().clamp(min=1.0)

    def answer_token_count(labels: torch.Tensor) -> int:
        return int(round(float(first_token_weights(labels, weight).sum())))

    m2sa_module.answer_ce = answer_ce
    m2sa_module.answer_token_count = answer_token_count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--weight", type=float, required=True, help="the first answer token's weight (1: as trained)")
    parser.add_argument("train_args", nargs=argparse.REMAINDER, help="after --: m2sa-train's arguments")
    args = parser.parse_args(argv)
    rest = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args
    patch(args.weight)
    return train.main(rest)


if __name__ == "__main__":
    sys.exit(main())
