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

"""What a model that never learned to refuse still knows about a command whose target is not there.

Answers every command of an MMR-format file freely, as ``m2sa-eval --protocol generative``
does, and keeps per command what a presence gate could read: whether the answer holds a
``[SEG]``, each target's predicted IoU (the mask decoder's IoU head, ``Target.score``), its
mask's area, and the language model's hidden state at each ``[SEG]`` (the prompt SAM is
given). Writes them to one ``.npz`` per file, then the signals can be compared:

    .venv/bin/python training/tiny/research/absence_signals.py collect --model models/m2sa-tiny-synth \
        --data data/synth/MMR_test_obj_only.json ... --image-root data/synth/images --out runs/signals/seed0
    .venv/bin/python training/tiny/research/absence_signals.py score runs/signals/seed0.npz

``score`` prints, for each scalar signal, the share of absent commands a threshold rejects
when it wrongly rejects at most 5 % of present ones, per kind of absence.
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.mmr import MISSING_KINDS
from m2sa_core.evaluation.rejection import is_absent, missing_of
from m2sa_core.inference import Segmenter
import numpy as np
import torch
from tqdm import tqdm
from training.config import DataSourceConfig
from training.evaluate import eval_command
from training.sources import open_source


def collect(args: argparse.Namespace) -> int:
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    builder = SampleBuilder.for_model(segmenter.tokenizer, segmenter.model.config, evaluation=True)
    records = []
    for path in args.data:
        dataset = open_source(DataSourceConfig(kind="mmr", path=path, image_root=args.image_root)).items
        picked = [dataset[i] for i in range(len(dataset))]
        if args.sample:  # as many absent as present commands, drawn at random
            rng = np.random.default_rng(0)
            absent = [r for r in picked if is_absent(r)]
            present = [r for r in picked if not is_absent(r)]
            picked = [group[i] for group in (present, absent)
                      for i in sorted(rng.choice(len(group), min(args.sample, len(group)), replace=False))]
        records += picked[: args.max_items] if args.max_items else picked
    rows: dict[str, list] = {k: [] for k in ("absent", "kind", "split", "segs", "score_min", "score_mean",
                                             "score_max", "area_min", "state_mean")}
    with torch.no_grad():
        for record in tqdm(records, unit="q"):
            image = record.load_image()
            stages, timings = segmenter.stages, {}
            entry = stages.encode_frame(image, str(record.image_path), timings)
            command = segmenter.prompt_ids(eval_command(builder, record))
            (generation,) = stages.generate(entry.features, [command], timings)
            decoded = stages.decode_masks(entry, generation.seg_states, timings, amodal=True)
            result = stages.build_result(generation, decoded, timings, amodal=True)
            scores = [t.score for t in result.targets] or [0.0]
            areas = [float(t.requested_mask.mean()) for t in result.targets] or [0.0]
            states = torch.stack(generation.seg_states).float().mean(0).cpu().numpy() if generation.seg_states else None
            rows["absent"].append(is_absent(record))
            rows["kind"].append(missing_of(record)["kind"] if is_absent(record) else "present")
            rows["split"].append(record.split)
            rows["segs"].append(len(result.targets))
            rows["score_min"].append(min(scores))
            rows["score_mean"].append(float(np.mean(scores)))
            rows["score_max"].append(max(scores))
            rows["area_min"].append(min(areas))
            rows["state_mean"].append(states)
    dim = next(s.shape[0] for s in rows["state_mean"] if s is not None)  # answers without [SEG]: zeros
    rows["state_mean"] = [np.zeros(dim, np.float32) if s is None else s for s in rows["state_mean"]]
    out = Path(args.out).with_suffix(".npz")
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, **{k: np.asarray(v) for k, v in rows.items()})
    print(f"{len(records)} commands -> {out}")
    return 0


def _rejects_at(signal: np.ndarray, absent: np.ndarray, present_budget: float) -> tuple[float, float]:
    """Return the threshold (low = absent) that keeps present rejections within budget, and the absent share."""
    present = np.sort(signal[~absent])
    cut = present[int(np.floor(present_budget * len(present)))] if len(present) else 0.0
    return float(cut), float((signal[absent] < cut).mean()) if absent.any() else float("nan")


def score(args: argparse.Namespace) -> int:
    data = np.load(args.npz)
    absent = data["absent"].astype(bool)
    kinds = data["kind"]
    print(f"{args.npz}: {int((~absent).sum())} present, {int(absent.sum())} absent "
          f"({', '.join(f'{k} {int((kinds == k).sum())}' for k in MISSING_KINDS)})")
    print(f"answers without [SEG]: present {float((data['segs'][~absent] == 0).mean()):.3f}, "
          f"absent {float((data['segs'][absent] == 0).mean()):.3f}")
    print("| signal | threshold | absent rejected | " + " | ".join(MISSING_KINDS) + " |")
    print("|---|---:|---:|" + "---:|" * len(MISSING_KINDS))
    for name in ("score_min", "score_mean", "score_max", "area_min"):
        signal = data[name].astype(float)
        cut, share = _rejects_at(signal, absent, args.present_budget)
        per_kind = [float((signal[kinds == k] < cut).mean()) if (kinds == k).any() else float("nan")
                    for k in MISSING_KINDS]
        print(f"| {name} | {cut:.3f} | {share:.3f} | " + " | ".join(f"{v:.3f}" for v in per_kind) + " |")
    return 0


def _features(data) -> torch.Tensor:
    scalars = np.stack([data[k].astype(np.float32) for k in ("score_min", "score_mean", "score_max", "area_min")], 1)
    return torch.from_numpy(np.concatenate([data["state_mean"].astype(np.float32), scalars], 1))


def probe(args: argparse.Namespace) -> int:
    """Fit a logistic presence probe on one file's signals, pick its threshold on a second, score a third."""
    train, pick, test = (np.load(p) for p in (args.train, args.pick, args.test))
    x = _features(train)
    mean, std = x.mean(0), x.std(0) + 1e-6
    y = torch.from_numpy(~train["absent"].astype(bool)).float()  # 1 = present
    torch.manual_seed(0)
    head = torch.nn.Linear(x.shape[1], 1)
    optim = torch.optim.LBFGS(head.parameters(), max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        optim.zero_grad()
        z = (x - mean) / std
        loss = torch.nn.functional.binary_cross_entropy_with_logits(head(z).squeeze(1), y)
        loss = loss + args.l2 * head.weight.pow(2).sum()
        loss.backward()
        return loss

    optim.step(closure)

    def presence(data) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(head((_features(data) - mean) / std).squeeze(1)).numpy()

    cut, _ = _rejects_at(presence(pick), pick["absent"].astype(bool), args.present_budget)
    for name, data in (("train", train), ("pick", pick), ("test", test)):
        p, absent, kinds = presence(data), data["absent"].astype(bool), data["kind"]
        per_kind = " ".join(f"{k} {float((p[kinds == k] < cut).mean()):.3f}"
                            for k in MISSING_KINDS if (kinds == k).any())
        print(f"{name}: threshold {cut:.3f}: absent rejected {float((p[absent] < cut).mean()):.3f} "
              f"present rejected {float((p[~absent] < cut).mean()):.3f} ({per_kind})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--model", required=True)
    c.add_argument("--data", nargs="+", required=True)
    c.add_argument("--image-root", required=True)
    c.add_argument("--max-items", type=int, default=0)
    c.add_argument("--sample", type=int, default=0, help="per file: N present and N absent commands at random")
    c.add_argument("--out", required=True)
    s = sub.add_parser("score")
    s.add_argument("npz")
    s.add_argument("--present-budget", type=float, default=0.05)
    p = sub.add_parser("probe")
    p.add_argument("train")
    p.add_argument("pick")
    p.add_argument("test")
    p.add_argument("--l2", type=float, default=1e-3)
    p.add_argument("--present-budget", type=float, default=0.05)
    args = parser.parse_args(argv)
    return {"collect": collect, "score": score, "probe": probe}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
