"""Does a model's language state carry the visible/complete intent of a view request?

A logistic probe per layer on the state of the last prompt token (the one that picks
the first answer word): fitted on train-split view questions of the synthetic world,
scored on the held-out R2SM phrasings. If the probe fails where the model fails, the
intent is already lost in the representation, and neither the mask-type head nor the
decoding can recover it (training/tiny/research/RUNS.md, run 8).

    .venv/bin/python training/tiny/research/probe_view_intent.py --model models/m2sa-tiny-synth \
        --train data/synth --heldout data/heldout
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import cv2
import numpy as np
import torch

from m2sa_core.inference import Segmenter

TRAIN_FILES = ("view_words_train.json", "views_train.json")


def _image(root: Path, file_name: str) -> np.ndarray:
    return cv2.imread(str(root / "images" / file_name))[:, :, ::-1].copy()


@torch.no_grad()
def prompt_states(segmenter: Segmenter, image: np.ndarray, question: str) -> list[torch.Tensor]:
    """The last prompt token's state after the embeddings and after every layer: L+1 x [D]."""
    model = segmenter.model
    entry = segmenter.stages.encode_frame(image, None, {})
    ids = torch.tensor([segmenter.prompt_ids(question)], device=segmenter.device)
    embeds = model.merge_image_embeddings(ids, entry.features.clip_embeds)[0]
    out = model.llm(inputs_embeds=embeds, output_hidden_states=True)
    return [h[0, -1].float().cpu() for h in out.hidden_states]


def fit_probe(x: torch.Tensor, y: torch.Tensor, steps: int = 300) -> tuple[torch.Tensor, torch.Tensor]:
    """Weights and bias of an L2-regularised logistic regression (x already standardised)."""
    w = torch.zeros(x.shape[1], requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([w, b], lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y) + 1e-3 * w.pow(2).sum()
        loss.backward()
        opt.step()
    return w.detach(), b.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="models/m2sa-tiny-synth")
    parser.add_argument("--train", type=Path, default=Path("data/synth"))
    parser.add_argument("--heldout", type=Path, default=Path("data/heldout"))
    parser.add_argument("--images", type=int, default=120, help="train images per file")
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    train_x, train_y = [], []
    for name in TRAIN_FILES:
        entries = json.loads((args.train / name).read_text())
        random.shuffle(entries)
        for entry in entries[:args.images]:
            image = _image(args.train, entry["file_name"])
            for question, kind in list(zip(entry["questions"], entry["mask_types"]))[:4]:
                train_x.append(prompt_states(segmenter, image, question))
                train_y.append(kind == "amodal")
    test_x, test_y = [], []
    for entry in json.loads((args.heldout / "r2sm_test.json").read_text())["images"]:
        image = _image(args.heldout, entry["file_name"])
        for query in entry["queries"]:
            test_x.append(prompt_states(segmenter, image, query["text"]))
            test_y.append(query["mask_type"] == "amodal")
    y, yt = torch.tensor(train_y, dtype=torch.float), torch.tensor(test_y, dtype=torch.float)
    print(f"{len(y)} train view questions, {len(yt)} held-out R2SM queries")
    print("| state after | train accuracy | held-out accuracy | held-out visible | held-out complete |")
    print("|---|---:|---:|---:|---:|")
    for layer in range(len(train_x[0])):
        a = torch.stack([s[layer] for s in train_x])
        t = torch.stack([s[layer] for s in test_x])
        mean, std = a.mean(0), a.std(0) + 1e-6
        a, t = (a - mean) / std, (t - mean) / std
        w, b = fit_probe(a, y)
        pa, pt = (a @ w + b > 0).float(), (t @ w + b > 0).float()
        where = "embeddings" if layer == 0 else f"layer {layer}"
        print(f"| {where} | {(pa == y).float().mean():.3f} | {(pt == yt).float().mean():.3f} | "
              f"{(pt[yt == 0] == 0).float().mean():.3f} | {(pt[yt == 1] == 1).float().mean():.3f} |")


if __name__ == "__main__":
    main()
