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
Whether a presence head on the image tokens can tell a command about what is not there (RUNS.md run 80).

Runs 76-79 trained the refusal into the language model's first answer token and it did not
learn to look: the tiny language model names the thing a command asks for from its words
and leaves finding it to SAM. SAM 3 decides presence with a head of its own. This probe asks
whether such a head, reading the frozen model's features, can: ``collect`` keeps, per
command, the language model's states over the prompt's words (the last one predicts the
answer's first token) and, per image, the projected CLIP patches and SAM's fused image
embedding; ``fit`` trains two decoder layers (the question's states attending to the image tokens) to say
present or absent, picks its threshold on a second file (5 % of present commands wrongly
rejected) and scores a third, per kind.

    .venv/bin/python training/tiny/research/presence_head.py collect --model runs/x/long2000 \
        --data data/synth/MMR_train.json data/synth/absent_twins_train.json --image-root data/synth/images \
        --out runs/presence/train
    .venv/bin/python training/tiny/research/presence_head.py fit runs/presence/{train,val,test}.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path
import sys
import time

from m2sa_core.data.builder import SampleBuilder
from m2sa_core.data.mmr import MISSING_KINDS
from m2sa_core.evaluation.rejection import is_absent, missing_of
from m2sa_core.inference import Segmenter
import numpy as np
import torch
from torch import nn
from tqdm import tqdm
from training.config import DataSourceConfig
from training.evaluate import eval_command
from training.sources import open_source

MAX_WORDS = 48  # question states kept (the prompt's words after the image)


def _open(args: argparse.Namespace) -> tuple[Segmenter, SampleBuilder, list]:
    """Return the model, its evaluation prompt builder and every record of ``args.data``."""
    segmenter = Segmenter.from_pretrained(args.model, device="cpu")
    builder = SampleBuilder.for_model(segmenter.tokenizer, segmenter.model.config, evaluation=True)
    records = []
    for path in args.data:
        kind = "synthetic" if "twins" in path else "mmr"
        items = open_source(DataSourceConfig(kind=kind, path=path, image_root=args.image_root)).items
        records += [items[i] for i in range(len(items))]
    return segmenter, builder, records


def _states(model, ids: list[int], clip_embeds: torch.Tensor) -> torch.Tensor:
    """Return the language model's last-layer states over ``ids`` with the image spliced in."""
    embeds = model.merge_image_embeddings(torch.tensor([ids]), clip_embeds)[0]
    return model.llm.model(inputs_embeds=embeds, use_cache=False).last_hidden_state[0]


class Collection:
    """What ``collect`` and ``collect-answers`` keep: per image its tokens, per command its states and labels."""

    def __init__(self) -> None:
        self.images: dict[str, int] = {}
        self.clip: list[torch.Tensor] = []
        self.sam: list[torch.Tensor] = []
        self.rows: dict[str, list] = {k: [] for k in ("words", "image", "lengths", "absent", "kinds")}

    def add(self, record, key: str, entry, states: torch.Tensor, **extra) -> None:
        """Keep one command: up to MAX_WORDS ``states``, its image's tokens (once per image) and ``extra`` rows."""
        if key not in self.images:
            self.images[key] = len(self.images)
            self.clip.append(entry.features.clip_embeds[0].half())
            self.sam.append(entry.fused[0].flatten(1).T.half())  # [h*w, P]
        padded = states.new_zeros((MAX_WORDS, states.shape[-1]))
        padded[: states.shape[0]] = states
        self.rows["words"].append(padded.half())
        self.rows["image"].append(self.images[key])
        self.rows["lengths"].append(states.shape[0])
        self.rows["absent"].append(is_absent(record))
        self.rows["kinds"].append(missing_of(record)["kind"] if is_absent(record) else "present")
        for name, value in extra.items():
            self.rows.setdefault(name, []).append(value)

    def save(self, out: str) -> None:
        path = Path(out).with_suffix(".pt")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {name: values if name == "kinds" else
                torch.stack(values) if isinstance(values[0], torch.Tensor) else torch.tensor(values)
                for name, values in self.rows.items()}
        torch.save({**data, "clip": torch.stack(self.clip), "sam": torch.stack(self.sam)}, path)
        print(f"{len(self.rows['absent'])} commands, {len(self.images)} images -> {path}")


def collect(args: argparse.Namespace) -> int:
    segmenter, builder, records = _open(args)
    if args.max_items:
        records = records[: args.max_items]
    kept = Collection()
    with torch.inference_mode():
        for record in tqdm(records, unit="q"):
            key = str(record.image_path)
            entry = segmenter.stages.encode_frame(record.load_image(), key, {})
            prompt = segmenter.prompt_ids(eval_command(builder, record))
            hidden = _states(segmenter.model, prompt, entry.features.clip_embeds)
            n_img = entry.features.clip_embeds.shape[1]
            after = prompt.index(min(prompt)) + n_img  # the image placeholder is the only negative id
            kept.add(record, key, entry, hidden[after:][-MAX_WORDS:])
    kept.save(args.out)
    return 0


MAX_TARGETS = 8  # named targets kept per answer
HUE_BINS = 12


def mask_colour(image: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Return the colours under ``mask``: shares of saturated pixels by hue bin, then white, black and grey."""
    import cv2

    pixels = image[mask.astype(bool)]
    out = np.zeros(HUE_BINS + 3, np.float32)
    if not len(pixels):
        return out
    hsv = cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_RGB2HSV).reshape(-1, 3).astype(np.float32)
    hue, sat, val = hsv[:, 0] * 2.0, hsv[:, 1], hsv[:, 2]
    chromatic = (sat >= 100) & (val >= 80)
    bins = np.minimum((hue[chromatic] / 360.0 * HUE_BINS).astype(int), HUE_BINS - 1)
    out[:HUE_BINS] = np.bincount(bins, minlength=HUE_BINS) / len(pixels)
    out[HUE_BINS] = ((sat < 50) & (val > 180)).mean()
    out[HUE_BINS + 1] = (val < 70).mean()
    out[HUE_BINS + 2] = 1.0 - out.sum()
    return out


def _most_overlap(mask: np.ndarray, masks: list[np.ndarray], index: int) -> float:
    """Return the highest IoU of ``mask`` with the answer's other masks (an instance named twice overlaps one)."""
    best = 0.0
    for other, m in enumerate(masks):
        if other != index:
            union = np.logical_or(mask, m).sum()
            best = max(best, float(np.logical_and(mask, m).sum() / union) if union else 0.0)
    return best


def collect_answers(args: argparse.Namespace) -> int:
    """
    Per command, the model's own free answer: its states, and what each named target's mask covers.

    The answer's states name what the command asked for in the model's words ("knife_1",
    "mug_2's screen", "laptop_computer_3") whatever the phrasing; each target adds its mask's
    mean SAM embedding, its colours, its area and SAM's predicted IoU. An answer with no
    ``[SEG]`` is the model's own refusal (``refused``).
    """
    segmenter, builder, records = _open(args)
    if args.sample:
        rng = np.random.default_rng(0)
        records = [records[i] for i in sorted(rng.choice(len(records), min(args.sample, len(records)), replace=False))]
    stages = segmenter.stages
    kept = Collection()
    with torch.inference_mode():
        for record in tqdm(records, unit="q"):
            key = str(record.image_path)
            image = record.load_image()
            timings: dict[str, float] = {}
            entry = stages.encode_frame(image, key, timings)
            prompt = segmenter.prompt_ids(eval_command(builder, record))
            (generation,) = stages.generate(entry.features, [prompt], timings)
            decoded = stages.decode_masks(entry, generation.seg_states, timings, amodal=True)
            result = stages.build_result(generation, decoded, timings, amodal=True)
            hidden = _states(segmenter.model, prompt + generation.tokens, entry.features.clip_embeds)
            n_img = entry.features.clip_embeds.shape[1]
            states = hidden[len(prompt) + n_img - 2:][:MAX_WORDS]  # from the state predicting the answer's first token
            after = prompt.index(min(prompt)) + n_img  # the question's words, as ``collect`` keeps them
            question = hidden[after:len(prompt) + n_img - 2][-MAX_WORDS:]
            padded = question.new_zeros((MAX_WORDS, question.shape[-1]))
            padded[: question.shape[0]] = question
            fused = entry.fused[0].flatten(1).T.float()  # [h*w, P]
            side = entry.fused.shape[-1]
            rows = torch.zeros((MAX_TARGETS, fused.shape[1] + HUE_BINS + 3 + 3))
            masks = [np.asarray(target.mask, bool) for target in result.targets[:MAX_TARGETS]]
            for t, (target, mask) in enumerate(zip(result.targets, masks)):
                small = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(mask[None].astype(np.float32)),
                                                                side).flatten()
                pooled = (small[:, None] * fused).sum(0) / small.sum().clamp(min=1e-6)
                rows[t] = torch.cat([pooled, torch.from_numpy(mask_colour(image, mask)),
                                     torch.tensor([float(mask.mean()), target.score, _most_overlap(mask, masks, t)])])
            kept.add(record, key, entry, states, targets=rows.half(), refused=not result.targets,
                     qwords=padded.half(), qlengths=question.shape[0])
    kept.save(args.out)
    return 0


class PresenceHead(nn.Module):
    """Decoder layers: [presence query; question states] attend to each other and to [CLIP patches; SAM tokens]."""

    def __init__(self, d: int, sam_dim: int, n_clip: int, n_sam: int, layers: int = 2, heads: int = 4,
                 target_dim: int = 0) -> None:
        super().__init__()
        self.target_in = nn.Linear(target_dim, d) if target_dim else None
        self.query = nn.Parameter(torch.zeros(1, 1, d))
        self.sam_in = nn.Linear(sam_dim, d)
        self.clip_in = nn.Linear(d, d)
        self.word_in = nn.Linear(d, d)
        self.pos = nn.Parameter(torch.randn(1, n_clip + n_sam, d) * 0.02)
        self.kind_embedding = nn.Parameter(torch.randn(4, d) * 0.02)  # answer words, CLIP, SAM, question words
        self.question_in = nn.Linear(d, d)
        layer = nn.TransformerDecoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, layers)
        self.out = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 1))

    def forward(self, words, lengths, clip, sam, targets=None, question=None, question_lengths=None):
        b, n_words = words.shape[:2]
        w = self.word_in(words) + self.kind_embedding[0]
        if self.target_in is not None:  # the named targets' rows join the words; an all-zero row is padding
            w = torch.cat([w, self.target_in(targets)], 1)
        if question is not None:  # the command's own words (collect-answers' ``qwords``) join them last
            w = torch.cat([w, self.question_in(question) + self.kind_embedding[3]], 1)
        clip_tokens = self.clip_in(clip) + self.kind_embedding[1]
        sam_tokens = self.sam_in(sam) + self.kind_embedding[2]
        image = torch.cat([clip_tokens, sam_tokens], 1) + self.pos
        x = torch.cat([self.query.expand(b, -1, -1), w], 1)
        pad = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
        pad[:, 1:1 + n_words] = torch.arange(n_words, device=x.device)[None] >= lengths[:, None]
        if targets is not None:
            pad[:, 1 + n_words:1 + n_words + targets.shape[1]] = targets.abs().sum(-1) == 0
        if question is not None:
            n_question = question.shape[1]
            pad[:, -n_question:] = torch.arange(n_question, device=x.device)[None] >= question_lengths[:, None]
        return self.out(self.decoder(x, image, tgt_key_padding_mask=pad)[:, 0]).squeeze(1)


def _inputs(data, index, question: bool = True):
    image = data["image"][index]
    inputs = (data["words"][index].float(), data["lengths"][index], data["clip"][image].float(),
              data["sam"][image].float())
    inputs += (data["targets"][index].float(),) if "targets" in data else (None,)
    return inputs + ((data["qwords"][index].float(), data["qlengths"][index]) if question and "qwords" in data
                     else ())


def _scores(head, data, question: bool, batch=256) -> np.ndarray:
    head.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(data["absent"]), batch):
            index = torch.arange(s, min(s + batch, len(data["absent"])))
            out.append(torch.sigmoid(head(*_inputs(data, index, question))).numpy())
    head.train()
    return np.concatenate(out)  # 1 = present


def _report(name, presence, data, cut) -> str:
    absent = data["absent"].numpy().astype(bool)
    kinds = np.asarray(data["kinds"])
    rejected = presence < cut
    if "refused" in data:  # the model's own refusals stay refusals
        rejected = rejected | data["refused"].numpy().astype(bool)
    per_kind = " / ".join(f"{rejected[kinds == k].mean():.2f}" if (kinds == k).any() else "-" for k in MISSING_KINDS)
    return (f"{name}: absent rejected {rejected[absent].mean():.3f} ({absent.sum()}), present wrongly "
            f"rejected {rejected[~absent].mean():.3f} ({(~absent).sum()}); by kind {per_kind}")


def fit(args: argparse.Namespace) -> int:
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train, pick, test = (torch.load(p, weights_only=False) for p in (args.train, args.pick, args.test))
    d, sam_dim = train["words"].shape[-1], train["sam"].shape[-1]
    target_dim = train["targets"].shape[-1] if "targets" in train else 0
    head = PresenceHead(d, sam_dim, train["clip"].shape[1], train["sam"].shape[1], args.layers, target_dim=target_dim)
    optim = torch.optim.AdamW(head.parameters(), lr=args.lr, weight_decay=0.01)
    y = (~train["absent"]).float()
    n = len(y)
    steps = args.epochs * n // args.batch
    sched = torch.optim.lr_scheduler.OneCycleLR(optim, args.lr, total_steps=steps, pct_start=0.05)
    t0 = time.time()
    for step in range(steps):
        index = torch.randint(0, n, (args.batch,))
        loss = nn.functional.binary_cross_entropy_with_logits(head(*_inputs(train, index, args.question)), y[index])
        optim.zero_grad()
        loss.backward()
        optim.step()
        sched.step()
        if (step + 1) % args.report_every == 0 or step + 1 == steps:
            p_pick = _scores(head, pick, args.question)
            present = np.sort(p_pick[~pick["absent"].numpy().astype(bool)])
            cut = present[int(np.floor(args.present_budget * len(present)))]
            print(f"step {step + 1}/{steps} loss {loss.item():.3f} {time.time() - t0:.0f}s cut {cut:.3f}")
            print("  " + _report("pick", p_pick, pick, cut))
            print("  " + _report("test", _scores(head, test, args.question), test, cut))
            print("  " + _report("test@0.5", _scores(head, test, args.question), test, 0.5))
    if args.save:
        torch.save({"state": head.state_dict(), "cut": float(cut)}, args.save)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--model", required=True)
    c.add_argument("--data", nargs="+", required=True)
    c.add_argument("--image-root", required=True)
    c.add_argument("--max-items", type=int, default=0)
    c.add_argument("--out", required=True)
    a = sub.add_parser("collect-answers")
    a.add_argument("--model", required=True)
    a.add_argument("--data", nargs="+", required=True)
    a.add_argument("--image-root", required=True)
    a.add_argument("--sample", type=int, default=0, help="commands drawn at random (0: all)")
    a.add_argument("--out", required=True)
    f = sub.add_parser("fit")
    f.add_argument("train")
    f.add_argument("pick")
    f.add_argument("test")
    f.add_argument("--epochs", type=int, default=4)
    f.add_argument("--batch", type=int, default=64)
    f.add_argument("--lr", type=float, default=5e-4)
    f.add_argument("--layers", type=int, default=2)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--threads", type=int, default=2)
    f.add_argument("--present-budget", type=float, default=0.05)
    f.add_argument("--report-every", type=int, default=500)
    f.add_argument("--save", default="")
    f.add_argument("--no-question", dest="question", action="store_false",
                   help="leave out the command's own words where the files hold them")
    args = parser.parse_args(argv)
    return {"collect": collect, "collect-answers": collect_answers, "fit": fit}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
