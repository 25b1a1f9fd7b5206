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
Run the authors' text and image pipeline and write golden fixtures (side environment only).

Started by ``make_fixtures.py`` with the side environment's interpreter (transformers
4.31, tokenizers 0.13, sentencepiece, PIL, torchvision: scripts/golden/requirements.txt)
and ``--authors DIR``, an export of the authors' repository (jdg900/MMR). Their modules
are imported from that directory at run time; nothing of theirs is copied into this
project, only the numbers their code produces are written to ``--out``.

What it calls, as their training (train_ds.py, utils/dataset.py) and validation
(utils/dataset.py ValDataset) do:

* tokenizer: ``AutoTokenizer.from_pretrained(dir, model_max_length=2048,
  padding_side="right", use_fast=False)``, ``pad_token = unk_token``,
  ``add_tokens("[SEG]")``, ``add_tokens([<im_start>, <im_end>], special_tokens=True)``,
  then ``save_pretrained`` (what their merge script leaves beside the weights);
* conversations: ``conv_templates["llava_v1"]`` messages and ``get_prompt()``,
  ``<image>`` replaced by ``<im_start><image><im_end>``, ids and labels from their
  ``collate_fn`` (``tokenizer_image_token`` and their label masking);
* images: ``CLIPImageProcessor.preprocess`` with openai/clip-vit-large-patch14's
  preprocessor settings, and ``ResizeLongestSide(1024).apply_image`` followed by their
  normalise-and-pad ``preprocess``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
import sys
import types

import numpy as np

SEG = "[SEG]"
# openai/clip-vit-large-patch14's preprocessor_config.json (the numbers of its published file)
CLIP_PREPROCESSOR = {
    "crop_size": 224, "do_center_crop": True, "do_normalize": True, "do_resize": True,
    "feature_extractor_type": "CLIPFeatureExtractor",
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
    "resample": 3, "size": 224,
}
# A LLaVA v1 style tokenizer_config.json for the base tokenizer (LlamaTokenizer, no legacy key).
BASE_TOKENIZER_CONFIG = {
    "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
    "clean_up_tokenization_spaces": False, "model_max_length": 2048, "pad_token": None, "padding_side": "right",
    "sp_model_kwargs": {}, "tokenizer_class": "LlamaTokenizer",
}
# (height, width): portrait, landscape (longest side above SAM's 1024: a real downscale), tiny.
IMAGES = {"portrait": (400, 261), "landscape": (233, 1201), "tiny": (9, 14)}
CLIP_STRIDE = 4
SAM_STRIDE = 4

# Conversations: user turns as the authors' data builds them, answers as in MMR.
MMR_ANSWER_1 = "You can press the television_set_1's button {seg} to turn it on."
MMR_ANSWER_2 = ("The mouse_(computer_equipment)_1's left_button {seg} and its right_button {seg}, "
                "and the laptop_computer_2's touchpad {seg}.")
QUESTION_1 = "I want to turn on the TV. What should I press?"
QUESTION_2 = "Which parts let me click on something? It's my friend's computer."


def pattern_image(height: int, width: int) -> np.ndarray:
    """Return a deterministic RGB uint8 image with smooth and high-frequency content (integer arithmetic only)."""
    y, x = np.mgrid[0:height, 0:width].astype(np.int64)
    r = (3 * x + 5 * y) % 256
    g = (x * y // 7) % 256
    b = ((x // 2 + y // 3) % 2) * 230 + 10
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def import_authors(root: Path) -> dict:
    """Their leaf modules, with their package __init__ files (which build whole models) bypassed."""
    sys.path.insert(0, str(root))
    for name in ("model", "model.llava", "model.segment_anything", "model.segment_anything.utils"):
        package = types.ModuleType(name)
        package.__path__ = [str(root / name.replace(".", "/"))]
        sys.modules[name] = package
    from model.llava import conversation as conversation_lib  # noqa: E402
    from model.llava.mm_utils import tokenizer_image_token  # noqa: E402
    from model.segment_anything.utils.transforms import ResizeLongestSide  # noqa: E402
    from utils import dataset as dataset_lib  # noqa: E402
    from utils import utils as utils_lib  # noqa: E402

    conversation_lib.default_conversation = conversation_lib.conv_templates["llava_v1"]
    return {"conv": conversation_lib, "tokenizer_image_token": tokenizer_image_token,
            "ResizeLongestSide": ResizeLongestSide, "dataset": dataset_lib, "utils": utils_lib}


def train_base_tokenizer(corpus: Path, out: Path) -> None:
    """Train a small Llama-style sentencepiece model (BPE, byte fallback, digits split, identity normaliser)."""
    import sentencepiece as spm

    out.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(out / "tokenizer"), vocab_size=1000, model_type="bpe",
        byte_fallback=True, split_digits=True, add_dummy_prefix=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", unk_id=0, bos_id=1, eos_id=2, pad_id=-1, character_coverage=1.0,
        allow_whitespace_only_pieces=True, num_threads=1, minloglevel=2, seed_sentencepiece_size=100000,
    )
    (out / "tokenizer.vocab").unlink()
    (out / "tokenizer_config.json").write_text(json.dumps(BASE_TOKENIZER_CONFIG, indent=2) + "\n")


def authors_tokenizer(base: Path, save_to: Path):
    """Return the tokenizer exactly as train_ds.py and merge_lora_weights_and_save_hf_model.py make it."""
    import transformers

    from_utils = AUTHORS["utils"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(
        str(base), cache_dir=None, model_max_length=2048, padding_side="right", use_fast=False)
    tokenizer.pad_token = tokenizer.unk_token
    tokenizer.add_tokens("[SEG]")
    tokenizer.add_tokens([from_utils.DEFAULT_IM_START_TOKEN, from_utils.DEFAULT_IM_END_TOKEN], special_tokens=True)
    tokenizer.save_pretrained(str(save_to))
    return tokenizer


def conversation_text(turns: list[tuple[str, str | None]]) -> str:
    conv = AUTHORS["conv"].default_conversation.copy()
    conv.messages = []
    for question, answer in turns:
        conv.append_message(conv.roles[0], question)
        conv.append_message(conv.roles[1], answer)
    return conv.get_prompt()


def with_image_tokens(text: str) -> str:
    u = AUTHORS["utils"]
    replace_token = u.DEFAULT_IM_START_TOKEN + u.DEFAULT_IMAGE_TOKEN + u.DEFAULT_IM_END_TOKEN
    return text.replace(u.DEFAULT_IMAGE_TOKEN, replace_token)


def collate_ids_labels(tokenizer, text: str) -> tuple[str, list[int], list[int]]:
    """Return the conversation as collate_fn rewrites it (image tokens), its input_ids and labels."""
    import torch

    item = ("img.jpg", torch.zeros(3, 4, 4), torch.zeros(3, 4, 4), [text], torch.zeros(1, 4, 4),
            torch.zeros(4, 4), (4, 4), None, None, True)
    batch = AUTHORS["dataset"].collate_fn([item], tokenizer=tokenizer, conv_type="llava_v1", use_mm_start_end=True)
    return batch["conversation_list"][0], batch["input_ids"][0].tolist(), batch["labels"][0].tolist()


def pieces(tokenizer, ids: list[int]) -> list[str]:
    return ["<image>" if i == -200 else tokenizer.convert_ids_to_tokens(i) for i in ids]


def token_cases(tokenizer) -> list[dict]:
    img = AUTHORS["utils"].DEFAULT_IMAGE_TOKEN
    request = "Please output segmentation mask."
    one_seg = MMR_ANSWER_1.format(seg=SEG)
    many_seg = MMR_ANSWER_2.format(seg=SEG)
    # (name, our turns (question, answer), the authors' turns as their code builds them)
    training = [
        ("one_seg_train", [(f"{QUESTION_1} Please respond with segmentation mask.", one_seg)]),
        ("several_seg_train", [(f"{QUESTION_2} Please output segmentation mask.", many_seg)]),
        ("expand_template_train", [(f"{QUESTION_2} I'd appreciate segmentation masks.", many_seg)]),
        ("reasonseg_template", [(f"What is the mouse's left_button in this image? {request}", "Sure, it is [SEG].")]),
        ("multi_turn", [(f"{QUESTION_1} {request}", one_seg),
                        ("And which parts of the mouse_(computer_equipment)_1 can I click?", many_seg)]),
        ("bare_question_tokens_cli", [("Where is the logo?", "The logo [SEG] is on the bottle_1's label [SEG].")]),
    ]
    cases = []
    for name, turns in training:
        authors_turns = [((img + "\n" + q) if i == 0 else q, a) for i, (q, a) in enumerate(turns)]
        text, ids, labels = collate_ids_labels(tokenizer, conversation_text(authors_turns))
        cases.append({"name": name, "kind": "train", "turns": [list(t) for t in turns], "authors_text": text,
                      "input_ids": ids, "labels": labels, "pieces": pieces(tokenizer, ids)})
    # Validation (ValDataset): "<image>\n {sent} Please output segmentation mask." and "{answer}."
    val_turns = [(f"{QUESTION_2} {request}", many_seg + ".")]
    text, ids, labels = collate_ids_labels(tokenizer, conversation_text([(img + f"\n {QUESTION_2} {request}",
                                                                          many_seg + ".")]))
    cases.append({"name": "several_seg_validation", "kind": "train", "turns": [list(t) for t in val_turns],
                  "authors_text": text, "input_ids": ids, "labels": labels, "pieces": pieces(tokenizer, ids)})
    # Inference prompts: the user's turn, then "ASSISTANT:" with no message, <image> replaced as
    # in collate_fn (LISA's chat.py does the same).
    for name, question in (("prompt_one_request", f"{QUESTION_1} {request}"),
                           ("prompt_apostrophes", f"{QUESTION_2} {request}")):
        text = with_image_tokens(conversation_text([(img + "\n" + question, None)]))
        ids = AUTHORS["tokenizer_image_token"](text, tokenizer)
        cases.append({"name": name, "kind": "prompt", "question": question, "authors_text": text,
                      "input_ids": ids, "pieces": pieces(tokenizer, ids)})
    return cases


def image_cases(out: Path, work: Path) -> dict:
    from transformers import CLIPImageProcessor

    clip_dir = work / "clip-vit-large-patch14"
    clip_dir.mkdir(parents=True, exist_ok=True)
    (clip_dir / "preprocessor_config.json").write_text(json.dumps(CLIP_PREPROCESSOR))
    clip = CLIPImageProcessor.from_pretrained(str(clip_dir))
    transform = AUTHORS["ResizeLongestSide"](1024)
    dataset = AUTHORS["dataset"].ValDataset.__new__(AUTHORS["dataset"].ValDataset)  # only its preprocess()
    arrays, meta = {}, {}
    import torch

    for name, (h, w) in IMAGES.items():
        image = pattern_image(h, w)
        clip_tensor = clip.preprocess(image, return_tensors="pt")["pixel_values"][0].numpy()
        resized = transform.apply_image(image)
        sam_tensor = dataset.preprocess(torch.from_numpy(resized).permute(2, 0, 1).contiguous()).numpy()
        arrays[f"{name}_clip"] = clip_tensor[:, ::CLIP_STRIDE, ::CLIP_STRIDE].astype(np.float32)
        arrays[f"{name}_sam_resized"] = resized[::SAM_STRIDE, ::SAM_STRIDE]
        meta[name] = {
            "height": h, "width": w, "image_sum": int(image.astype(np.int64).sum()),
            "clip_shape": list(clip_tensor.shape), "clip_sum": float(clip_tensor.astype(np.float64).sum()),
            "sam_resize": list(resized.shape[:2]), "sam_shape": list(sam_tensor.shape),
            "sam_sum": float(sam_tensor.astype(np.float64).sum()),
        }
    np.savez_compressed(out / "preprocess.npz", **arrays)
    return {"clip_stride": CLIP_STRIDE, "sam_stride": SAM_STRIDE, "images": meta}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("--authors", required=True, type=Path, help="export of the authors' repository")
    parser.add_argument("--corpus", required=True, type=Path, help="text to train the small tokenizer on")
    parser.add_argument("--work", required=True, type=Path, help="scratch directory")
    parser.add_argument("--out", required=True, type=Path, help="tests/core/golden")
    parser.add_argument("--commit", default="", help="the authors' commit, recorded in the fixtures")
    args = parser.parse_args()
    global AUTHORS
    AUTHORS = import_authors(args.authors.resolve())
    import sentencepiece
    import transformers

    base = args.work / "base_tokenizer"
    train_base_tokenizer(args.corpus, base)
    tok_dir = args.out / "llama_tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = authors_tokenizer(base, tok_dir)
    versions = {"transformers": transformers.__version__, "sentencepiece": sentencepiece.__version__,
                "authors_commit": args.commit}
    cases = token_cases(tokenizer)
    ids = {"seg": tokenizer.convert_tokens_to_ids(SEG), "im_start": tokenizer.convert_tokens_to_ids("<im_start>"),
           "im_end": tokenizer.convert_tokens_to_ids("<im_end>"), "eos": tokenizer.eos_token_id,
           "bos": tokenizer.bos_token_id, "pad": tokenizer.pad_token_id, "length": len(tokenizer)}
    (args.out / "tokens.json").write_text(json.dumps({"versions": versions, "special_ids": ids, "cases": cases},
                                                     indent=1, ensure_ascii=False) + "\n")
    images = image_cases(args.out, args.work)
    images["versions"] = versions
    (args.out / "preprocess.json").write_text(json.dumps(images, indent=1) + "\n")
    print(f"wrote {len(cases)} token cases and {len(IMAGES)} images to {args.out}")


AUTHORS: dict = {}

if __name__ == "__main__":
    main()
