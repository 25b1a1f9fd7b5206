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
LISA-style single-[SEG] samples, for the paper's Table 6 ablation.

LISA answers with one [SEG] however many targets a question has, and its one mask must
cover them all. Turning an M2SA sample into that form (same image, same question, one
[SEG], the union mask) isolates what multiple [SEG] tokens buy.
"""

from __future__ import annotations

import dataclasses

from m2sa_core.prompt import build_conversation, SEG_TOKEN, tokenize_conversation
import numpy as np

SINGLE_SEG_ANSWER = f"Sure, it is {SEG_TOKEN}."


def to_single_seg(sample, tokenizer, use_im_start_end: bool = False):
    """Return the same question answered with one [SEG] whose mask is the union of all targets."""
    prompt, answer_turn = build_conversation(sample.command, SINGLE_SEG_ANSWER, use_im_start_end)
    input_ids, labels = tokenize_conversation(tokenizer, prompt, answer_turn)
    union = sample.masks.any(axis=0, keepdims=True)
    amodal = None if sample.amodal_masks is None else sample.amodal_masks.any(axis=0, keepdims=True)
    return dataclasses.replace(sample, answer=SINGLE_SEG_ANSWER, prompt=prompt, input_ids=input_ids,
                               labels=labels, masks=union.astype(np.bool_), amodal_masks=amodal,
                               target_labels=["+".join(sample.target_labels)])
