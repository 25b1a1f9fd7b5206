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
Files from other people cannot run code or reach outside their folder.

* Checkpoints: safetensors, or pickles through ``torch.load(weights_only=True)`` only; a
  pickle whose unpickling would run a command is refused with an error naming the file,
  and the command never runs (a marker file it would create stays absent). Checked at
  every entry point that reads weights: SAM/LLaVA ``.pth``/``.bin`` files, sharded
  weight directories, the authors' checkpoint import, our own format, and training
  checkpoints on resume (whose manifest an attacker can forge to match).
* Configs: ``!!python/object`` YAML is refused by the training config loader (file and
  command-line overrides) and never executed by the node's ROS parameters file.
* Dataset JSON: wrong types, broken RLE and file names escaping the image root are
  rejected with the file and the entry / question index, in every reader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
from safetensors.torch import save_file
import torch


class _RunsCommand:
    """Unpickling this runs ``touch marker``: the classic malicious checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evil_pickle(path: Path, marker: Path, **tensors: torch.Tensor) -> Path:
    torch.save({**dict(tensors.items()), "payload": _RunsCommand(marker)}, path)
    return path


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "code_ran"
    yield path
    assert not path.exists(), "the malicious pickle's command was executed"


# ----------------------------------------------------------------------------- checkpoints
def test_sam_pth_and_llava_bin_that_would_run_code_are_refused(tmp_path, marker):
    from m2sa_core.model.checkpoint import CheckpointError, load_tensor_file, load_weights_dir

    sam = _evil_pickle(tmp_path / "sam_vit_h_4b8939.pth", marker, **{"image_encoder.pos_embed": torch.zeros(1)})
    with pytest.raises(CheckpointError, match=f"refusing to load {sam}.*could execute code"):
        load_tensor_file(sam)
    llava = tmp_path / "llava"
    llava.mkdir()
    _evil_pickle(llava / "pytorch_model.bin", marker, **{"model.embed_tokens.weight": torch.zeros(2, 2)})
    with pytest.raises(CheckpointError, match="pytorch_model.bin: it is a pickle"):
        load_weights_dir(llava)


def test_a_sharded_directory_with_one_malicious_shard_is_refused(tmp_path, marker):
    from m2sa_core.model.checkpoint import CheckpointError, load_weights_dir

    save_file({"a": torch.zeros(1)}, str(tmp_path / "good.safetensors"))
    _evil_pickle(tmp_path / "shard-2.bin", marker, b=torch.zeros(1))
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {"a": "good.safetensors", "b": "shard-2.bin"}}))
    with pytest.raises(CheckpointError, match="shard-2.bin.*could execute code"):
        load_weights_dir(tmp_path)


def test_authors_checkpoint_import_refuses_a_malicious_file(tmp_path, marker):
    from m2sa_core.model.checkpoint import CheckpointError, import_authors_checkpoint

    ckpt = tmp_path / "M2SA-7B"
    ckpt.mkdir()
    _evil_pickle(ckpt / "pytorch_model.bin", marker, **{"model.layers.0.self_attn.q_proj.weight": torch.zeros(1)})
    with pytest.raises(CheckpointError, match="could execute code"):
        import_authors_checkpoint(ckpt, clip_path=tmp_path / "clip", config="tiny")


def test_our_format_with_a_pickled_weights_file_is_refused(tmp_path, marker):
    from m2sa_core.inference import Segmenter
    from m2sa_core.model.checkpoint import CheckpointError, save_pretrained

    seg = Segmenter.from_pretrained("tiny")
    directory = save_pretrained(seg.model, seg.tokenizer, tmp_path / "model")
    state = {k: v.clone() for k, v in seg.model.state_dict().items()}
    (directory / "model.safetensors").unlink()
    _evil_pickle(directory / "pytorch_model.bin", marker, **state)
    with pytest.raises(CheckpointError, match="could execute code"):
        Segmenter.from_pretrained(directory)


def test_training_resume_refuses_a_malicious_optimizer_state_even_with_a_forged_manifest(tmp_path, marker):
    from training import checkpoints as ckpt

    state = ckpt.TrainingState(step=2, trainables={"w": torch.zeros(2)}, optimizer={"state": {}, "param_groups": []},
                               scheduler={"last_epoch": 2}, rng=ckpt.rng_state(), extra={})
    path = ckpt.save_checkpoint(tmp_path / "checkpoints", state)
    assert ckpt.load_checkpoint(path).step == 2  # the genuine one loads
    _evil_pickle(path / "optim.pt", marker, x=torch.zeros(1))
    manifest = json.loads((path / ckpt.MANIFEST).read_text())  # the attacker forges the checksums too
    manifest["files"]["optim.pt"] = {"size": (path / "optim.pt").stat().st_size,
                                     "sha256": ckpt._sha256(path / "optim.pt")}
    (path / ckpt.MANIFEST).write_text(json.dumps(manifest))
    assert ckpt.verify_checkpoint(path) is None
    with pytest.raises(ValueError, match=f"refusing to load checkpoint {path}: .*could execute code"):
        ckpt.load_checkpoint(path)


# ----------------------------------------------------------------------------- configs
EVIL_YAML = '!!python/object/apply:os.system ["touch {marker}"]'


def test_training_config_with_python_tags_is_refused(tmp_path, marker):
    from training.config import load_config
    import yaml

    config = tmp_path / "evil.yaml"
    config.write_text(f"seed: {EVIL_YAML.format(marker=marker)}\nout_dir: runs/x\n")
    with pytest.raises(yaml.YAMLError, match="python/object/apply:os.system"):
        load_config(config)
    with pytest.raises(yaml.YAMLError, match="python/object"):
        load_config(None, [f"seed={EVIL_YAML.format(marker=marker)}"])


@pytest.mark.integration
@pytest.mark.ros
def test_node_parameters_file_with_python_tags_runs_nothing_and_configure_fails(tmp_path, marker, capfd):
    """
    The rcl library parses the parameters file (libyaml, no Python objects).

    The tag is ignored, the value arrives as a list, and configure refuses it by
    name.
    """
    from m2sa_ros.perception_node import PerceptionNode
    import rclpy
    from rclpy.lifecycle import TransitionCallbackReturn

    params = tmp_path / "perception.yaml"
    params.write_text("/**:\n  ros__parameters:\n"
                      f"    preset: {EVIL_YAML.format(marker=marker)}\n    autostart: false\n")
    context = rclpy.Context()
    rclpy.init(args=["perception_node", "--ros-args", "--params-file", str(params)], context=context)
    node = None
    try:
        node = PerceptionNode(context=context, segmenter_factory=lambda *_: pytest.fail("model loaded"))
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        err = capfd.readouterr().err
        assert "configure failed: invalid parameters: preset=" in err and "expected str" in err, err
    finally:
        if node is not None:
            node.close()
        context.try_shutdown()


# ----------------------------------------------------------------------------- dataset JSON
H, W = 12, 16


def _rle(mask: np.ndarray) -> dict:
    from m2sa_core.data.rle import encode_mask

    return encode_mask(mask)


def _mask() -> np.ndarray:
    m = np.zeros((H, W), bool)
    m[2:6, 3:9] = True
    return m


BROKEN_RLE = [
    {"size": [H, W], "counts": "!!not-rle!!"},  # invalid characters
    {"size": [H, W], "counts": "PP"},  # runs do not cover the image
    {"size": [H + 1, W], "counts": [(H + 1) * W]},  # not the image's size
    {"size": [H, W], "counts": [1, 2, -3]},  # negative run
    {"size": ["12", W], "counts": []},  # wrong type
    "not a dict",
]


def _mmr_entry(image_id, file_name, rle) -> dict:
    return {"image_id": image_id, "file_name": file_name, "height": H, "width": W,
            "questions": ["What holds the coffee?"], "text_answers": ["The mug_1 {seg}."],
            "answers": [[{"segmentation": rle, "category_name": "mug", "bbox": [3, 2, 6, 4]}]]}


def _r2sm_entry(image_id, file_name, rle) -> dict:
    return {"image_id": image_id, "file_name": file_name, "height": H, "width": W, "queries": [
        {"text": "The whole mug.", "mask_type": "amodal", "category_name": "mug", "segmentation": rle}]}


def _amodal_entry(image_id, file_name, rle) -> dict:
    return {"image_id": image_id, "file_name": file_name, "height": H, "width": W, "questions": [
        {"question": "What could I drink from?", "answer": "The mug_1 {seg}.",
         "targets": [{"category_name": "mug", "visible_segmentation": rle, "amodal_segmentation": rle}]}]}


FORMATS = {
    "mmr": (lambda entries: entries, _mmr_entry, "MMR_val.json"),
    "r2sm": (lambda entries: {"dataset": "r2sm", "version": 1, "split": "val", "images": entries}, _r2sm_entry,
             "r2sm_val.json"),
    "amodal_reasonseg": (lambda entries: {"dataset": "amodal_reasonseg", "version": 1, "split": "val",
                                          "images": entries}, _amodal_entry, "amodal_reasonseg_val.json"),
}


@pytest.fixture
def image_root(tmp_path: Path) -> Path:
    root = tmp_path / "images"
    root.mkdir()
    cv2.imwrite(str(root / "ok.png"), np.zeros((H, W, 3), np.uint8))
    (tmp_path / "secret.png").write_bytes((root / "ok.png").read_bytes())  # outside the root
    return root


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hostile_dataset_entries_are_rejected_with_file_and_index(tmp_path, image_root, fmt):
    from m2sa_core.data.readers import read_dataset
    from m2sa_core.data.records import DataError

    wrap, entry, name = FORMATS[fmt]
    good = _rle(_mask())
    entries = [entry(0, "ok.png", good)]
    escapes = ["../secret.png", "../../etc/passwd", "/etc/passwd", "images/../../secret.png", "..\\secret.png"]
    entries += [entry(10 + i, f, good) for i, f in enumerate(escapes)]
    entries += [entry(20 + i, "ok.png", rle) for i, rle in enumerate(BROKEN_RLE)]
    wrong_types = [{"height": "12"}, {"width": None}, {"file_name": 7}, {"image_id": [1]}]
    entries += [{**entry(30 + i, "ok.png", good), **change} for i, change in enumerate(wrong_types)]
    entries += ["not an object", None]
    path = tmp_path / name
    path.write_text(json.dumps(wrap(entries)))

    ds = read_dataset(path, image_root)
    assert [r.image_id for r in ds] == [0], "only the well-formed entry may be read"
    assert len(ds.problems) == len(entries) - 1
    assert all(p.file == str(path) for p in ds.problems)
    by_id = {p.image_id: p for p in ds.problems if isinstance(p.image_id, (int, str))}
    for i, file_name in enumerate(escapes):
        reason = by_id[10 + i].reason
        assert "image root" in reason or "absolute" in reason, (file_name, reason)
    for i in range(len(BROKEN_RLE)):
        problem = by_id[20 + i]
        assert problem.question_index == 0 and "segmentation" in problem.reason, problem
    for i in range(len(wrong_types)):
        key = next(iter(wrong_types[i]))
        assert any(key in str(p) for p in ds.problems), f"no problem names the wrong '{key}'"
    assert sum("<entry" in str(p.image_id) or p.image_id is None for p in ds.problems) >= 2

    with pytest.raises(DataError) as info:
        read_dataset(path, image_root, strict=True)
    text = str(info.value)
    assert str(path) in text and "image 10" in text, text  # the first bad entry, by file and index
