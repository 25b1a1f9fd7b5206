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
LISA-style question and answer templates for datasets without text answers.

ReasonSeg and R2SM give a query but no answer text, so the sample builder wraps the
query in a question template and picks an answer template with one ``[SEG]``. The
lists are tuples: a template list that a caller could mutate in place would silently
change every later sample (and differ between dataloader workers).
"""

from __future__ import annotations

from m2sa_core.prompt import SEG_TOKEN

# For short queries (a class name or a phrase): "{class_name}" is filled in.
SHORT_QUESTION_TEMPLATES: tuple[str, ...] = (
    "Can you segment the {class_name} in this image?",
    "Please segment the {class_name} in this image.",
    "What is {class_name} in this image? Please respond with segmentation mask.",
    "What is {class_name} in this image? Please output segmentation mask.",
)

# For long reasoning sentences: "{sent}" is the query itself.
LONG_QUESTION_TEMPLATES: tuple[str, ...] = (
    "{sent} Please respond with segmentation mask.",
    "{sent} Please output segmentation mask.",
)

# The authors' training also draws from these for MMR questions (use_expand_question_list).
EXPAND_LONG_QUESTION_TEMPLATES: tuple[str, ...] = (
    "{sent} Provide the segmentation mask.",
    "{sent} Output the segmentation mask.",
    "{sent} Please show the segmentation mask.",
    "{sent} I'd appreciate segmentation masks.",
    "{sent} Please highlight the segmentation mask.",
)

# What the authors' training wraps an MMR question in: one of these, drawn per sample.
AUTHORS_MMR_QUESTION_TEMPLATES: tuple[str, ...] = LONG_QUESTION_TEMPLATES + EXPAND_LONG_QUESTION_TEMPLATES

# The authors' validation question for a short query (a class name); the request follows.
AUTHORS_EVAL_SHORT_QUESTION = "What is {class_name} in this image?"

# Answers for a single target: exactly one [SEG] each.
ANSWER_TEMPLATES: tuple[str, ...] = (
    f"It is {SEG_TOKEN}.",
    f"Sure, {SEG_TOKEN}.",
    f"Sure, it is {SEG_TOKEN}.",
    f"Sure, the segmentation result is {SEG_TOKEN}.",
    f"{SEG_TOKEN}.",
)


def all_template_texts() -> tuple[str, ...]:
    """Every template string, for building a tokenizer corpus."""
    return SHORT_QUESTION_TEMPLATES + AUTHORS_MMR_QUESTION_TEMPLATES + ANSWER_TEMPLATES
