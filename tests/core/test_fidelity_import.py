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
The real-weights import paths end to end at tiny size, with the authors' tokenizer files.

authors: a directory laid out as the authors' merge script leaves it (LISA-style keys in
sharded ``pytorch_model-*.bin`` files with an index, ``tokenizer.model`` and the three
JSON files only, no CLIP inside) -> ``m2sa-export --authors`` -> ``Segmenter`` ->
``segment``. LLaVA: a LLaVA v1 directory (HF Llama keys, ``tokenizer.model`` without
[SEG]) + a SAM ``.pth`` -> ``m2sa-export --llava`` -> the same. Both check the strict
key accounting, the [SEG] id and that the prompt ids equal the authors' (golden).
"""

from __future__ import annotations

import json
from pathlib import Path
import shutil

from m2sa_core.inference import Segmenter
from m2sa_core.model import get_preset, M2SAModel
from m2sa_core.model.config import AUTHORS_SEG_REQUEST
from m2sa_core.model.llama_tokenizer import load_tokenizer
import numpy as np
import pytest
import torch
from training.export import main as export_main

GOLDEN = Path(__file__).parent / "golden"
TOKENS = json.loads((GOLDEN / "tokens.json").read_text())
PROMPT = next(c for c in TOKENS["cases"] if c["name"] == "prompt_one_request")
COMMAND = PROMPT["question"][: -len(AUTHORS_SEG_REQUEST)].strip()
SPECIAL = TOKENS["special_ids"]
BASE_VOCAB = SPECIAL["seg"]  # the sentencepiece vocabulary: [SEG] is appended right after it

_LISA_RULES = (("fusion.", "model.visual_model.mask_decoder.compress_vit."), ("sam.", "model.visual_model."),
               ("seg_projector.", "model.text_hidden_fcs.0."), ("mm_projector.", "model.mm_projector."),
               ("llm.model.", "model."), ("llm.lm_head.", "lm_head."))


@pytest.fixture(scope="module")
def reference():
    """Return a random tiny model with the authors' conventions and the golden tokenizer's vocabulary."""
    config = get_preset("tiny-authors")
    config.text_config["vocab_size"] = SPECIAL["length"]
    config.seg_token_id, config.im_start_token_id, config.im_end_token_id = (
        SPECIAL["seg"], SPECIAL["im_start"], SPECIAL["im_end"])
    torch.manual_seed(3)
    return M2SAModel.build(config).eval()


def _lisa_state(model: M2SAModel) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in model.state_dict().items():
        for ours, theirs in _LISA_RULES:
            if key.startswith(ours):
                out[theirs + key[len(ours):]] = value.clone().contiguous()
                break
    return out


def _write_sharded_bin(state: dict[str, torch.Tensor], directory: Path) -> None:
    """As transformers 4.31's save_pretrained shards pytorch_model.bin (two shards and an index)."""
    keys = sorted(state)
    shards = {"pytorch_model-00001-of-00002.bin": keys[: len(keys) // 2],
              "pytorch_model-00002-of-00002.bin": keys[len(keys) // 2:]}
    weight_map = {}
    for name, part in shards.items():
        torch.save({k: state[k] for k in part}, directory / name)
        weight_map.update({k: name for k in part})
    (directory / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


def _check_segmenter(out: Path, reference: M2SAModel) -> Segmenter:
    seg = Segmenter.from_pretrained(out, max_new_tokens=6)
    assert seg.seg_token_id == SPECIAL["seg"] == seg.tokenizer.convert_tokens_to_ids("[SEG]")
    assert seg.model.config.seg_request == AUTHORS_SEG_REQUEST
    assert seg.prompt_ids(COMMAND) == PROMPT["input_ids"]
    image = np.random.default_rng(0).integers(0, 255, (97, 143, 3), dtype=np.uint8)
    result = seg.segment(image, COMMAND)
    assert len(result.targets) == result.raw_answer.count("[SEG]")
    seg.max_new_tokens = 32
    # The answer path that yields masks: a forced answer with two [SEG] gives two masks of the image size.
    forced = seg.tokenizer("the mug_1 [SEG] and its handle [SEG].", add_special_tokens=False)["input_ids"]
    entry = seg.stages.encode_frame(image, None, {})
    (generation,) = seg.stages.generate(entry.features, [seg.prompt_ids(COMMAND)], {}, forced=[forced])
    masks = seg.stages.decode_masks(entry, generation.seg_states, {})
    assert masks.masks.shape == (2, 97, 143)
    return seg


def _assert_weights_equal(a: M2SAModel, b: M2SAModel, prefixes: tuple[str, ...]) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    for key in sa:
        if key.startswith(prefixes):
            torch.testing.assert_close(sa[key], sb[key], rtol=0, atol=0, msg=key)


def test_authors_checkpoint_imports_and_segments(tmp_path, reference):
    ckpt, clip, out = tmp_path / "M2SA-tiny", tmp_path / "clip", tmp_path / "ours"
    ckpt.mkdir()
    for name in ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"):
        shutil.copy(GOLDEN / "llama_tokenizer" / name, ckpt / name)
    state = _lisa_state(reference)
    state["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(16)
    _write_sharded_bin(state, ckpt)
    reference.vision_tower.save_pretrained(clip)

    assert export_main(["--authors", str(ckpt), "--clip", str(clip), "--preset", "tiny-authors",
                        "--out", str(out)]) == 0
    report = json.loads((out / "export_report.json").read_text())["report"]
    assert not (report["missing"] or report["unexpected"] or report["shape_mismatch"])
    assert sorted(report["initialised"]) == ["mask_type_head.bias", "mask_type_head.weight"]
    accounted = set(report["mapped"]) | set(report["initialised"])
    assert accounted == set(reference.state_dict())
    assert "model.layers.0.self_attn.rotary_emb.inv_freq" in report["ignored"]
    seg = _check_segmenter(out, reference)
    _assert_weights_equal(reference, seg.model, ("llm.", "sam.", "fusion.", "seg_projector.", "vision_tower."))


def test_authors_import_with_a_wrong_vocabulary_is_refused(tmp_path, reference, capsys):
    ckpt, clip = tmp_path / "M2SA-tiny", tmp_path / "clip"
    ckpt.mkdir()
    for name in ("tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(GOLDEN / "llama_tokenizer" / name, ckpt / name)  # added_tokens.json lost: no [SEG] id 1000
    state = _lisa_state(reference)
    state["model.embed_tokens.weight"] = state["model.embed_tokens.weight"][:-1].clone()
    _write_sharded_bin(state, ckpt)
    reference.vision_tower.save_pretrained(clip)
    assert export_main(["--authors", str(ckpt), "--clip", str(clip), "--preset", "tiny-authors",
                        "--out", str(tmp_path / "out")]) == 2
    assert "rows but the tokenizer has" in capsys.readouterr().err


def test_llava_and_sam_assemble_with_the_authors_token_ids(tmp_path, reference):
    llava, out = tmp_path / "llava-tiny", tmp_path / "ours"
    llava.mkdir()
    shutil.copy(GOLDEN / "llama_tokenizer" / "tokenizer.model", llava / "tokenizer.model")
    (llava / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
        "add_bos_token": True, "add_eos_token": False, "model_max_length": 2048, "padding_side": "right"}))
    state = {}
    for key, value in reference.llm.state_dict().items():
        if key.endswith(("embed_tokens.weight", "lm_head.weight")):
            value = value[:BASE_VOCAB]  # LLaVA's vocabulary has no [SEG] and no image start/end tokens
        state[key] = value.clone().contiguous()
    for key, value in reference.mm_projector.state_dict().items():
        state["model.mm_projector." + key] = value.clone()
    _write_sharded_bin(state, llava)
    torch.save(reference.sam.state_dict(), tmp_path / "sam_vit_tiny.pth")
    reference.vision_tower.save_pretrained(tmp_path / "clip")

    assert export_main(["--llava", str(llava), "--sam", str(tmp_path / "sam_vit_tiny.pth"),
                        "--clip", str(tmp_path / "clip"), "--preset", "tiny-authors", "--out", str(out)]) == 0
    report = json.loads((out / "export_report.json").read_text())["report"]
    assert not (report["missing"] or report["unexpected"] or report["shape_mismatch"])
    assert {k.split(".")[0] for k in report["initialised"]} == {"fusion", "seg_projector", "mask_type_head"}
    assert set(report["resized"]) == {"llm.model.embed_tokens.weight", "llm.lm_head.weight"}
    accounted = set(report["mapped"]) | set(report["initialised"])
    assert accounted == set(reference.state_dict())
    tokenizer = load_tokenizer(out)
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("[SEG]", "<im_start>", "<im_end>")] == [
        SPECIAL["seg"], SPECIAL["im_start"], SPECIAL["im_end"]]
    seg = _check_segmenter(out, reference)
    _assert_weights_equal(reference, seg.model, ("llm.model.layers.", "sam.", "vision_tower.", "mm_projector."))
