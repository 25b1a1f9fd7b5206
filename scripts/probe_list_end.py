"""Are the answers that name too few instances near-ties at the end of the list?

Runs `m2sa-eval` (the arguments after ``--``) with a logit bias of ``--bias`` against the
sentence's full stop wherever it would follow a [SEG]: the one place where the model
decides that its list of targets is complete. If the answers that stop one instance short
("the mug_1." where the scene holds two mugs) were near-ties, a small bias would turn them
into longer lists, and the duplicate-instance merging (``duplicate_instance_iou``) would
fold the extra names that point at an instance already drawn. If the stop is confident,
the bias adds wrong instances faster than it recovers missing ones, and what is missing is
the second instance in what the model sees, not the decision to name it
(training/tiny/RUNS.md, "Probe: is the list's end a near-tie?").

    .venv/bin/python scripts/probe_list_end.py --model models/m2sa-tiny-synth --bias 2 -- \
        --data data/synth/MMR_test_{obj_only,part_only,mixed}.json --image-root data/synth/images \
        --kind synthetic --protocol generative --out runs/list_end/b2.json

Only the dynamic decoder (the CPU's, and ``--decoder dynamic`` on a GPU) carries the bias.
"""

from __future__ import annotations

import argparse
import sys

import torch

from m2sa_core import segmenter_stages
from m2sa_core.model.checkpoint import load_tokenizer
from m2sa_core.model.decoding import DynamicDecoder
from m2sa_core.model.tokenizer import SEG_TOKEN


def list_end_decoder(seg_id: int, stop_id: int, bias: float) -> type[DynamicDecoder]:
    """A DynamicDecoder whose greedy choice lowers ``stop_id``'s logit by ``bias`` after ``seg_id``."""

    class ListEndBias(DynamicDecoder):
        last_ids: torch.Tensor | None = None

        def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.last_ids = ids
            return super().step(ids)

        def _run(self, embeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            # The decoder's own forward, so the probe decodes exactly as m2sa-eval does; the
            # head runs once more on the last state, a probe's cost rather than a copy of it.
            hidden, greedy = super()._run(embeds)
            after_seg, self.last_ids = self.last_ids, None  # the next prefill starts a new answer
            if after_seg is None or not bias:
                return hidden, greedy
            logits = self.llm.lm_head(hidden)
            logits[after_seg == seg_id, stop_id] -= bias
            return hidden, logits.argmax(-1)

    return ListEndBias


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, rest = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a checkpoint directory of ours")
    parser.add_argument("--bias", type=float, required=True, help="logits taken from '.' after [SEG] (0: none)")
    args = parser.parse_args(ours)
    tokenizer = load_tokenizer(args.model)
    stop_ids = tokenizer(".", add_special_tokens=False)["input_ids"]
    if len(stop_ids) != 1:
        parser.error(f"'.' is not one token in {args.model}'s tokenizer: {stop_ids}")
    seg_id = tokenizer.convert_tokens_to_ids(SEG_TOKEN)
    segmenter_stages.DynamicDecoder = list_end_decoder(seg_id, stop_ids[0], args.bias)
    from training.evaluate import main as evaluate

    return evaluate(["--model", args.model, *rest])


if __name__ == "__main__":
    sys.exit(main())
