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

"""Checkpoints: our format round trip, the authors' layout, LLaVA v1 + SAM, unsafe pickles."""

from __future__ import annotations

import os

from m2sa_core.inference import Segmenter
from m2sa_core.model import get_preset, M2SAModel
from m2sa_core.model.batch import toy_example
from m2sa_core.model.checkpoint import (
    CheckpointError,
    from_pretrained,
    import_authors_checkpoint,
    import_llava_sam,
    KeyMismatchError,
    load_tensor_file,
    save_pretrained,
)
from m2sa_core.model.tokenizer import add_special_tokens, builtin_corpus, train_tokenizer
from m2sa_core.model.trainable import apply_trainable_policy
import numpy as np
import pytest
from safetensors.torch import save_file
import torch


@pytest.fixture(scope="module")
def base_tokenizer_dir(tmp_path_factory):
    """Return a tokenizer without [SEG], as an original LLaVA directory ships it."""
    path = tmp_path_factory.mktemp("base_tok")
    train_tokenizer(builtin_corpus()[:200], vocab_size=600).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def reference(base_tokenizer_dir):
    """(model, tokenizer) of the tiny preset with random weights and [SEG] added."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_tokenizer_dir, local_files_only=True)
    ids = add_special_tokens(tok, use_im_start_end=False)
    cfg = get_preset("tiny")
    cfg.text_config["vocab_size"] = len(tok)
    cfg.seg_token_id = ids["seg_token_id"]
    torch.manual_seed(1)
    return M2SAModel.build(cfg).eval(), tok


def _assert_same_weights(a: torch.nn.Module, b: torch.nn.Module, prefix: str = "") -> None:
    sa, sb = a.state_dict(), b.state_dict()
    keys = [k for k in sa if k.startswith(prefix)]
    assert keys and set(keys) == {k for k in sb if k.startswith(prefix)}
    for k in keys:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=k)


# -- our format -----------------------------------------------------------------------------
def test_save_then_load_gives_identical_text_and_masks(tmp_path, reference):
    model, tok = reference
    save_pretrained(model, tok, tmp_path)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(os.listdir(tmp_path))
    loaded, loaded_tok = from_pretrained(tmp_path)
    _assert_same_weights(model, loaded)
    a = Segmenter(model, tok, max_new_tokens=12)
    b = Segmenter.from_pretrained(tmp_path, max_new_tokens=12)
    image = toy_example(0).image
    ra, rb = a.segment(image, "Which objects can hold a drink?"), b.segment(image, "Which objects can hold a drink?")
    assert ra.raw_answer == rb.raw_answer
    states = [torch.randn(128) for _ in range(2)]
    da = a.stages.decode_masks(a.stages.encode_frame(image, None, {}), states, {})
    db = b.stages.decode_masks(b.stages.encode_frame(image, None, {}), states, {})
    (ma, sa), (mb, sb) = (da.masks, da.scores), (db.masks, db.scores)
    np.testing.assert_array_equal(ma, mb)
    np.testing.assert_array_equal(sa, sb)


def test_lora_checkpoint_round_trip(tmp_path, reference):
    model, tok = reference
    lora_model = M2SAModel.build(type(model.config).from_dict(model.config.to_dict()))
    lora_model.load_state_dict(model.state_dict())
    apply_trainable_policy(lora_model, "paper")
    save_pretrained(lora_model, tok, tmp_path)
    loaded, _ = from_pretrained(tmp_path)
    assert loaded.config.lora is not None
    _assert_same_weights(lora_model, loaded)


def test_tampered_checkpoint_reports_missing_and_unexpected(tmp_path, reference):
    model, tok = reference
    save_pretrained(model, tok, tmp_path)
    state = load_tensor_file(tmp_path / "model.safetensors")
    del state["fusion.0.weight"]
    state["fusion.9.weight"] = torch.zeros(1)
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(KeyMismatchError) as err:
        from_pretrained(tmp_path)
    assert "missing (1): fusion.0.weight" in str(err.value)
    assert "unexpected (1): fusion.9.weight" in str(err.value)
    _, _ = from_pretrained(tmp_path, strict=False)  # asked for: loads the rest


# -- the authors' layout ----------------------------------------------------------------------
def _authors_layout(model: M2SAModel) -> dict[str, torch.Tensor]:
    """Write the state dict the way the authors' M2SA code exports it (CLIP excluded)."""
    out = {}
    for key, value in model.state_dict().items():
        if key.startswith("fusion."):
            out["model.visual_model.mask_decoder.compress_vit." + key[len("fusion."):]] = value
        elif key.startswith("sam."):
            out["model.visual_model." + key[len("sam."):]] = value
        elif key.startswith("seg_projector."):
            out["model.text_hidden_fcs.0." + key[len("seg_projector."):]] = value
        elif key.startswith("mm_projector."):
            out["model.mm_projector." + key[len("mm_projector."):]] = value
        elif key.startswith("llm.model."):
            out["model." + key[len("llm.model."):]] = value
        elif key.startswith("llm.lm_head."):
            out["lm_head." + key[len("llm.lm_head."):]] = value
        elif key.startswith("mask_type_head."):
            continue  # ours only: the authors' layout has no mask-type head
        else:
            assert key.startswith("vision_tower."), key
    out["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.ones(16)  # old transformers buffer
    return {k: v.clone().contiguous() for k, v in out.items()}


@pytest.fixture()
def authors_dirs(tmp_path, reference):
    model, tok = reference
    ckpt, clip = tmp_path / "m2sa", tmp_path / "clip"
    ckpt.mkdir()
    tok.save_pretrained(ckpt)
    model.vision_tower.save_pretrained(clip)
    return ckpt, clip


def test_import_authors_checkpoint(authors_dirs, reference):
    model, _ = reference
    ckpt, clip = authors_dirs
    save_file(_authors_layout(model), str(ckpt / "model.safetensors"))
    imported, tok, report = import_authors_checkpoint(ckpt, clip_path=clip, config="tiny")
    _assert_same_weights(model, imported)
    assert imported.config.seg_token_id == model.config.seg_token_id
    assert report.ok and sorted(report.initialised) == ["mask_type_head.bias", "mask_type_head.weight"]
    assert "model.layers.0.self_attn.rotary_emb.inv_freq" in report.ignored
    assert "fusion.3.weight" in report.mapped and "seg_projector.2.bias" in report.mapped


def test_authors_import_lists_missing_and_unexpected_keys(authors_dirs, reference):
    model, _ = reference
    ckpt, clip = authors_dirs
    state = _authors_layout(model)
    del state["model.visual_model.mask_decoder.compress_vit.3.weight"]
    state["model.visual_model.mask_decoder.extra.weight"] = torch.zeros(2)
    save_file(state, str(ckpt / "model.safetensors"))
    with pytest.raises(KeyMismatchError) as err:
        import_authors_checkpoint(ckpt, clip_path=clip, config="tiny")
    message = str(err.value)
    assert "missing (1): fusion.3.weight" in message
    assert "unexpected (1): model.visual_model.mask_decoder.extra.weight" in message
    _, _, report = import_authors_checkpoint(ckpt, clip_path=clip, config="tiny", strict=False)
    assert report.missing == ["fusion.3.weight"]
    assert report.unexpected == ["model.visual_model.mask_decoder.extra.weight"]


# -- LLaVA v1 + SAM ---------------------------------------------------------------------------
def test_import_llava_and_sam(tmp_path, reference, base_tokenizer_dir):
    model, tok = reference
    llava = tmp_path / "llava"
    llava.mkdir()
    for name in os.listdir(base_tokenizer_dir):
        (llava / name).write_bytes((base_tokenizer_dir / name).read_bytes())
    base_rows = len(tok) - 1  # the LLaVA vocabulary has no [SEG]
    state = {}
    for key, value in model.llm.state_dict().items():
        if key.endswith(("embed_tokens.weight", "lm_head.weight")):
            value = value[:base_rows]
        state[key] = value.clone().contiguous()
    for key, value in model.mm_projector.state_dict().items():
        state["model.mm_projector." + key] = value.clone()
    save_file(state, str(llava / "model.safetensors"))
    torch.save(model.sam.state_dict(), tmp_path / "sam.pth")
    model.vision_tower.save_pretrained(tmp_path / "clip")

    imported, new_tok, report = import_llava_sam(llava, tmp_path / "sam.pth", tmp_path / "clip", config="tiny")
    for prefix in ("sam.", "vision_tower.", "mm_projector.", "llm.model.layers."):
        _assert_same_weights(model, imported, prefix)
    seg = imported.config.seg_token_id
    assert seg == base_rows == new_tok.convert_tokens_to_ids("[SEG]")
    emb = imported.llm.get_input_embeddings().weight
    torch.testing.assert_close(emb[seg], model.llm.get_input_embeddings().weight[:base_rows].mean(0))
    assert set(report.resized) == {"llm.model.embed_tokens.weight", "llm.lm_head.weight"}
    assert {k.split(".")[0] for k in report.initialised} == {"fusion", "seg_projector", "mask_type_head"}
    assert report.ok


# -- unsafe files --------------------------------------------------------------------------------
class _Exploit:

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_pickle_that_would_execute_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "sam_vit_h.pth"
    torch.save({"image_encoder.x": torch.zeros(1), "payload": _Exploit(str(marker))}, path)
    with pytest.raises(CheckpointError, match="refusing to load .*could execute code"):
        load_tensor_file(path)
    assert not marker.exists()


def test_missing_or_foreign_files_are_clear_errors(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_tensor_file(tmp_path / "nope.pth")
    torch.save([torch.zeros(1)], tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match="flat dict of tensors"):
        load_tensor_file(tmp_path / "list.pth")
    with pytest.raises(CheckpointError, match="not an M2SA checkpoint"):
        from_pretrained(tmp_path)


def test_clip_keys_of_every_known_layout_map_to_the_tower():
    from m2sa_core.model.checkpoint import authors_key, clip_key

    want = "vision_tower.encoder.layers.0.mlp.fc1.weight"
    for key in ("vision_model.encoder.layers.0.mlp.fc1.weight",  # OpenAI / CLIPModel
                "encoder.layers.0.mlp.fc1.weight",  # transformers 5 CLIPVisionModel
                "model.vision_tower.vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight"):  # LLaVA
        assert clip_key(key) == want
    assert clip_key("text_model.encoder.layers.0.mlp.fc1.weight") is None
    assert clip_key("logit_scale") is None
    assert authors_key("model.vision_tower.vision_tower.vision_model.post_layernorm.bias") == (
        "vision_tower.post_layernorm.bias"
    )
    assert authors_key("model.visual_model.mask_decoder.compress_vit.1.weight") == "fusion.1.weight"
    assert authors_key("something.else") is None


def test_segmenter_save_pretrained_round_trips(tmp_path):
    from m2sa_core.inference import Segmenter

    seg = Segmenter.from_pretrained("tiny", max_new_tokens=8)
    assert seg.save_pretrained(tmp_path / "ckpt") == tmp_path / "ckpt"
    again = Segmenter.from_pretrained(tmp_path / "ckpt", max_new_tokens=8)
    image = np.random.default_rng(0).integers(0, 255, (40, 56, 3), dtype=np.uint8)
    a, b = seg.segment(image, "Please segment the mug."), again.segment(image, "Please segment the mug.")
    assert a.raw_answer == b.raw_answer and len(a.targets) == len(b.targets)
    assert all((x.mask == y.mask).all() for x, y in zip(a.targets, b.targets))
