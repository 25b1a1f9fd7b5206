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
CLIP's patch alignment (stage 1b of the tiny model).

The targets say what covers each patch in the frame CLIP sees, and training on them makes
patch tokens read as those words.
"""

from __future__ import annotations

from pathlib import Path

from m2sa_core.data.patch_words import label_words, PatchWordSample
from m2sa_core.model.patch_alignment import collate_patch_words, patch_word_accuracy, patch_word_forward
from m2sa_core.model.preprocess import ImageProcessor
from m2sa_core.model.presets import build_preset
from m2sa_core.model.tokenizer import add_special_tokens, train_tokenizer
from m2sa_core.model.trainable import apply_trainable_policy
import numpy as np
import pytest
import torch


@pytest.fixture(scope="module")
def tiny():
    model, _ = build_preset("tiny")
    return model


def test_patch_coverage_follows_the_square_clip_sees(tiny):
    processor = ImageProcessor(tiny.config)
    mask = np.zeros((1, 2, 4), bool)
    mask[0, :, :2] = True  # the left half of a wide image
    processor.pad_clip_to_square = True  # padded: rows 1-2 of a 4 x 4 square
    assert processor.clip_patch_coverage(mask, 2).tolist() == [[0.5, 0.0, 0.5, 0.0]]
    processor.pad_clip_to_square = False  # centre-cropped: columns 1-2, half of it the mask
    assert processor.clip_patch_coverage(mask, 2).tolist() == [[1.0, 0.0, 1.0, 0.0]]
    assert processor.clip_patch_coverage(mask, 1).tolist() == [[0.5]]


def test_targets_share_each_patch_between_the_words_that_cover_it(tiny):
    processor = ImageProcessor(tiny.config)
    image = np.zeros((8, 8, 3), np.uint8)
    masks = np.zeros((2, 8, 8), bool)
    masks[0, :4, :4] = True  # mug 1 fills the top-left patch
    masks[1, 4:, 4:6] = True  # mug 2 covers half of the bottom-right patch
    sample = PatchWordSample("s", image, masks, np.array([11, 11]), np.array([21, 22]))
    table = PatchWordSample("t", image, np.zeros((0, 8, 8), bool), np.zeros(0, np.int64), np.zeros(0, np.int64))
    batch = collate_patch_words([sample, table], processor, 2, category_words=[10, 11], instance_words=[21, 22])
    assert batch["category_targets"][0].tolist() == [[0, 1], [1, 0], [1, 0], [0.5, 0.5]]
    assert batch["instance_targets"][0, [0, 3]].tolist() == [[1, 0], [0, 1]]
    assert batch["instance_weights"][0].tolist() == [1, 0, 0, 0.5]
    assert batch["category_targets"][1].tolist() == [[1, 0]] * 4 and not batch["instance_weights"][1].any()
    assert batch["clip_images"].shape == (2, 3, tiny.config.clip_image_size, tiny.config.clip_image_size)


def test_a_word_outside_the_candidates_is_named_with_its_sample(tiny):
    masks = np.ones((1, 8, 8), bool)
    sample = PatchWordSample("img_7", np.zeros((8, 8, 3), np.uint8), masks, np.array([12]), np.array([21]))
    with pytest.raises(ValueError, match=r"img_7 names token\(s\) \[12\]"):
        collate_patch_words([sample], ImageProcessor(tiny.config), 2, category_words=[10, 11], instance_words=[21])


def test_label_words_are_the_category_and_instance_words_of_an_answer():
    tokenizer = train_tokenizer(["the mug_1 and the mug_2 are on the table"] * 20, vocab_size=300)
    add_special_tokens(tokenizer, False)
    mug_2 = tokenizer(" mug_2", add_special_tokens=False)["input_ids"]
    in_answer = tokenizer("the mug_2", add_special_tokens=False)["input_ids"]
    assert label_words(tokenizer, "mug_2") == (mug_2[0], mug_2[-1])
    assert in_answer[-len(mug_2):] == mug_2  # the same tokens the answer's label has
    assert label_words(tokenizer, "mug_1")[0] == label_words(tokenizer, "mug_2")[0]
    assert label_words(tokenizer, "mug_1")[1] != label_words(tokenizer, "mug_2")[1]


def test_training_moves_patch_tokens_to_their_words_and_leaves_the_words_alone(tiny):
    torch.manual_seed(0)
    model, _ = build_preset("tiny")
    apply_trainable_policy(model, "clip_alignment")
    processor = ImageProcessor(model.config)
    rng = np.random.default_rng(0)
    samples = []
    for i in range(4):  # a red square (word 11) somewhere on grey, instance word 21 or 22
        image = np.full((64, 64, 3), 128, np.uint8)
        masks = np.zeros((1, 64, 64), bool)
        y, x = rng.integers(0, 32, 2)
        masks[0, y:y + 32, x:x + 32] = True
        image[masks[0]] = (220, 30, 30) if i % 2 else (30, 30, 220)
        samples.append(PatchWordSample(str(i), image, masks, np.array([11]), np.array([21 + i % 2])))
    batch = collate_patch_words(samples, processor, 8, category_words=[10, 11], instance_words=[21, 22])
    embeddings = model.llm.get_input_embeddings().weight.detach().clone()
    before = patch_word_accuracy(model, batch)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(60):
        optimizer.zero_grad()
        patch_word_forward(model, batch).loss.backward()
        optimizer.step()
    after = patch_word_accuracy(model, batch)
    assert after["category"] > 0.9 and after["background"] > 0.9 and after["instance"] > 0.9, (before, after)
    assert torch.equal(model.llm.get_input_embeddings().weight, embeddings)
    # per true instance word: the object patches split between "1" and "2", averaging to the whole
    named = patch_word_accuracy(model, batch, ["1", "2"])
    counts = [named["patches_instance_1"], named["patches_instance_2"]]
    assert min(counts) > 0
    mean = (named["instance_1"] * counts[0] + named["instance_2"] * counts[1]) / sum(counts)
    assert mean == pytest.approx(named["instance"])
    with pytest.raises(ValueError, match="1 instance names for 2 instance words"):
        patch_word_accuracy(model, batch, ["1"])


def _scene(labels: list[str], image_path: Path):
    """Return a mask_annotations record of a 4 x 4 image holding objects ``labels`` and one part."""
    from m2sa_core.data.records import SegRecord, TargetAnnotation
    from m2sa_core.data.rle import encode_mask
    from PIL import Image

    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(image_path)
    rle = encode_mask(np.ones((4, 4), bool))

    def target(label, part=""):
        name = label.rsplit("_", 1)[0]
        return TargetAnnotation(label=label + (f"'s {part}" if part else ""),
                                category_name=name + (f":{part}" if part else ""), object_name=name,
                                instance=int(label.rsplit("_", 1)[1]), part_name=part,
                                granularity="part" if part else "object", mask_rle=rle)

    targets = [target(label) for label in labels] + [target(labels[0], "handle")]
    return SegRecord(source="mask_annotations", split="train", image_path=image_path, image_id=1,
                     question_index=0, question="", answer_template="", targets=targets, height=4, width=4)


@pytest.mark.parametrize("kind, numbers", [("ordinal", ["1", "2", "1"]), ("count", ["2", "2", "1"])])
def test_instance_words_say_the_objects_own_number_or_how_many_of_its_kind_there_are(kind, numbers, tmp_path):
    from m2sa_core.data.patch_words import PatchWordSampleBuilder

    corpus = ["the mug_1 , the mug_2 and the laptop_1 , the mug_3 on the table"] * 20
    tokenizer = train_tokenizer(corpus, vocab_size=300)
    add_special_tokens(tokenizer, False)
    scene = _scene(["mug_1", "mug_2", "laptop_1"], tmp_path / "scene.png")
    builder = PatchWordSampleBuilder(tokenizer, [scene], instance_words=kind)
    sample = builder.build(scene)
    assert [tokenizer.decode([w]) for w in sample.instance_words] == numbers  # the part is not an object
    labels = ("mug_1", "mug_2", "laptop_1")
    assert sample.category_words.tolist() == [label_words(tokenizer, label)[0] for label in labels]
    assert sorted(tokenizer.decode([w]) for w in builder.instance_candidates) == sorted(set(numbers))


def test_an_unknown_kind_of_instance_word_is_refused():
    from m2sa_core.data.patch_words import PatchWordSampleBuilder

    with pytest.raises(ValueError, match="one of \\('ordinal', 'count'\\)"):
        PatchWordSampleBuilder(None, [], instance_words="cardinal")
