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
``m2sa-export``: write a model in our checkpoint format, LoRA merged.

Four inputs, one output format (config.json + model.safetensors + tokenizer files):

    m2sa-export --model runs/tiny_synth/final --out models/m2sa-tiny-synth
        a checkpoint of ours (LoRA adapters, if any, folded into the base weights)
    m2sa-export --checkpoint runs/tiny/3_m2sa/checkpoints/step_00002000 --out runs/tiny/step2000
        a training checkpoint: the run's model rebuilt from its config.json, the
        checkpoint's trained weights on top (to score or ship the middle of a run)
    m2sa-export --authors M2SA-7B/ --clip clip-vit-large-patch14/ --preset 7b --out ckpt/m2sa7b
        a checkpoint in the authors' M2SA layout; their CLIP tower comes from its own path
    m2sa-export --llava llava-7b-v1-1/ --sam sam_vit_h_4b8939.pth --clip clip-vit-large-patch14/ \
                --preset 7b --out checkpoints/llava7b_samh
        LLaVA v1 + SAM assembled into an untrained M2SA: the starting point of training

Every tensor of the inputs is mapped or reported; the report is printed and saved as
export_report.json beside the weights.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
import sys

from m2sa_core.cli_errors import cli_entry
from m2sa_core.model.checkpoint import from_pretrained, import_authors_checkpoint, import_llava_sam, save_pretrained
from m2sa_core.model.trainable import has_lora, merge_lora
import torch

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@cli_entry("m2sa-export")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="m2sa-export", description=__doc__.strip(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a checkpoint directory of ours")
    source.add_argument("--checkpoint", help="a training checkpoint of m2sa-train (<out_dir>/checkpoints/step_N)")
    source.add_argument("--authors", help="a checkpoint in the authors' M2SA layout (file or directory)")
    source.add_argument("--llava", help="an original LLaVA v1 checkpoint directory")
    parser.add_argument("--sam", help="SAM .pth (with --llava)")
    parser.add_argument("--clip", help="CLIP ViT directory (with --authors / --llava)")
    parser.add_argument("--tokenizer", help="tokenizer directory (with --authors; default: beside the weights)")
    parser.add_argument("--preset", default="7b", help="architecture of --authors / --llava: 7b or 13b")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="dtype of the written weights")
    parser.add_argument("--non-strict", action="store_true", help="report unmatched keys instead of failing")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    dtype = DTYPES[args.dtype]
    strict = not args.non_strict
    report = None
    if args.model:
        model, tokenizer = from_pretrained(args.model, dtype=dtype, strict=strict)
    elif args.checkpoint:
        from training.model_setup import model_at_checkpoint

        model, tokenizer = model_at_checkpoint(args.checkpoint)
        model.to(dtype)
    elif args.authors:
        if not args.clip:
            parser.error("--authors needs --clip (their checkpoints do not contain the CLIP tower)")
        model, tokenizer, report = import_authors_checkpoint(args.authors, args.clip, config=args.preset,
                                                             tokenizer_path=args.tokenizer, dtype=dtype,
                                                             strict=strict)
    else:
        if not args.sam:
            parser.error("--llava needs --sam")
        model, tokenizer, report = import_llava_sam(args.llava, args.sam, clip_path=args.clip,
                                                    config=args.preset, dtype=dtype, strict=strict)
    merged = has_lora(model)
    if merged:
        merge_lora(model)
    out = save_pretrained(model, tokenizer, args.out)
    summary = {"out": str(out), "lora_merged": merged, "dtype": args.dtype}
    if report is not None:
        summary["report"] = dataclasses.asdict(report)
    (Path(out) / "export_report.json").write_text(json.dumps(summary, indent=2))
    print(f"m2sa-export: wrote {out}" + (" (LoRA merged)" if merged else ""))
    if report is not None:
        print(f"  mapped {len(report.mapped)} tensors, new layers initialised: {len(report.initialised)}, "
              f"ignored: {len(report.ignored)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
