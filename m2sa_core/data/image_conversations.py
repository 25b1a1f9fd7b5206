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
Reader for image conversations: questions about an image answered in words, no masks.

What the language model and the projector pretrain on (the role of LLaVA's caption and
instruction data): descriptions and questions about the objects and parts of an image.
The project layout (docs/DATASETS.md) is

    {"dataset": "image_conversations", "version": 1, "split": "train",
     "images": [{"image_id": 7, "file_name": "000007.png", "height": 256, "width": 256,
                 "conversations": [{"question": "What is in this image?",
                                    "answer": "I see the mug_1 and the laptop_computer_1."}]}]}

Each conversation becomes a record with no targets: its answer is supervised as text and
the model's mask losses are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from m2sa_core.data.image_list_json import LayoutImage, read_layout_records
from m2sa_core.data.mmr import SEG_PLACEHOLDER
from m2sa_core.data.records import require, SegDataset, SegRecord

DATASET = "image_conversations"


class ImageConversationDataset(SegDataset):
    """Records of one image-conversation file (one per question)."""


def read_image_conversations(json_path: str | Path, image_root: str | Path,
                             strict: bool = False) -> ImageConversationDataset:
    """Read an image-conversation file; a bad entry is reported with its image and index."""
    json_path = Path(json_path)
    records, problems = read_layout_records(json_path, image_root, strict, DATASET, "conversations", _parse)
    return ImageConversationDataset(records, problems, json_path)


def _parse(item: Any, index: int, image: LayoutImage) -> SegRecord:
    what = f"conversations[{index}]"
    question = require(item, "question", str, what).strip()
    answer = require(item, "answer", str, what).strip()
    if not question or not answer:
        raise ValueError(f"{what}: question and answer must not be empty")
    if SEG_PLACEHOLDER in answer:
        raise ValueError(f"{what}['answer'] holds {SEG_PLACEHOLDER}: conversations carry no masks")
    return image.record(DATASET, index, question=question, answer_template=answer, targets=[])
