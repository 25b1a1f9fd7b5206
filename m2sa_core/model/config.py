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
Configuration of an M2SA model: LLaVA v1 (Llama + CLIP + projector) and SAM.

One JSON-serialisable object describes every shape the model needs, so a checkpoint
directory (``config.json`` + weights) can be rebuilt anywhere without downloads. The
text and vision parts stay plain ``LlamaConfig`` / ``CLIPVisionConfig`` dicts so that
configs of published checkpoints can be pasted in unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
import json
from pathlib import Path
from typing import Any

from transformers import CLIPVisionConfig, LlamaConfig

CONFIG_NAME = "config.json"

# Loss weights (w_ce, w_bce, w_dice). "authors" is the default of the released code
# (inherited from LISA); "paper" is what the MMR paper's text states.
LOSS_WEIGHT_PRESETS: dict[str, tuple[float, float, float]] = {
    "authors": (1.0, 2.0, 0.5),
    "paper": (1.0, 0.5, 2.0),
}

# The request the authors append to every segmentation question in evaluation (and, among
# a few variants, in training): see docs/FIDELITY.md, item 1.
AUTHORS_SEG_REQUEST = "Please output segmentation mask."
QUESTION_TEMPLATE_STYLES = ("plain", "authors")
RESIZE_BACKENDS = ("cv2", "pil")
# Dice smoothing: the authors' dice (scale 1000, eps 1e-6) equals an additive smoothing
# of 1e-3 in pixel units; the tiny model was trained with 1.0.
AUTHORS_DICE_SMOOTH = 1e-3

SAM_PIXEL_MEAN = (123.675, 116.28, 103.53)
SAM_PIXEL_STD = (58.395, 57.12, 57.375)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass
class SamConfig:
    """
    Shapes of SAM's image encoder, prompt encoder and mask decoder.

    Field names follow the arguments of ``segment_anything.modeling`` so that
    ``build_sam`` can pass them through without translation.
    """

    image_size: int = 1024
    patch_size: int = 16
    embed_dim: int = 1280
    depth: int = 32
    num_heads: int = 16
    mlp_ratio: float = 4.0
    window_size: int = 14
    global_attn_indexes: list[int] = field(default_factory=lambda: [7, 15, 23, 31])
    use_rel_pos: bool = True
    prompt_embed_dim: int = 256  # out_chans of the encoder neck = prompt dim
    mask_in_chans: int = 16
    decoder_depth: int = 2
    decoder_mlp_dim: int = 2048
    decoder_num_heads: int = 8
    num_multimask_outputs: int = 3
    iou_head_depth: int = 3
    iou_head_hidden_dim: int = 256
    # Not SAM's: channels of the guided 2x refinement of its masks (m2sa_core.model.refiner);
    # 0 keeps SAM's own 4x-embedding masks, as every released checkpoint has them.
    refiner_channels: int = 0

    @property
    def embedding_size(self) -> int:
        """Side of the (square) image embedding grid."""
        return self.image_size // self.patch_size

    @property
    def mask_grid_size(self) -> int:
        """Side of the low-res masks: 4x the embedding, 8x with the refiner."""
        return self.embedding_size * (8 if self.refiner_channels else 4)

    def validate(self) -> None:
        if self.image_size % self.patch_size:
            raise ValueError(
                f"SamConfig.image_size ({self.image_size}) must be a multiple of patch_size ({self.patch_size})"
            )
        if self.embed_dim % self.num_heads:
            raise ValueError(f"SamConfig.embed_dim ({self.embed_dim}) must divide by num_heads ({self.num_heads})")
        bad = [i for i in self.global_attn_indexes if not 0 <= i < self.depth]
        if bad:
            raise ValueError(f"SamConfig.global_attn_indexes {bad} outside 0..{self.depth - 1}")
        if not self.global_attn_indexes:
            raise ValueError("SamConfig.global_attn_indexes is empty: early fusion needs a global block")
        if self.refiner_channels < 0:
            raise ValueError(f"SamConfig.refiner_channels must be >= 0, got {self.refiner_channels}")
        if self.refiner_channels and self.patch_size % 8:
            raise ValueError(f"SamConfig.refiner_channels needs a patch_size divisible by 8, got {self.patch_size}")
        if self.num_multimask_outputs < 1:
            raise ValueError(
                f"SamConfig.num_multimask_outputs ({self.num_multimask_outputs}) must be >= 1: "
                "mask token 1 of the decoder is the amodal mask"
            )


@dataclass
class LoraSettings:
    """LoRA on the LLM; the paper's setting is r 8, alpha 16, dropout 0.05 on q_proj/v_proj."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])


@dataclass
class M2SAConfig:
    """
    Everything needed to build an :class:`~m2sa_core.model.m2sa.M2SAModel`.

    ``seg_token_id`` and the image start/end ids are filled in when a tokenizer is
    attached (:func:`m2sa_core.model.tokenizer.add_special_tokens`); ``text_config
    ["vocab_size"]`` then equals the tokenizer length.
    """

    text_config: dict[str, Any] = field(default_factory=dict)
    vision_config: dict[str, Any] = field(default_factory=dict)
    sam: SamConfig = field(default_factory=SamConfig)
    vision_feature_layer: int = -2  # LLaVA v1: penultimate CLIP layer, patch tokens only
    early_layer_index: int | None = None  # None -> first global-attention block of SAM's ViT
    seg_token_id: int | None = None
    im_start_token_id: int | None = None
    im_end_token_id: int | None = None
    use_im_start_end: bool = False
    use_early_fusion: bool = True  # False: plain SAM embedding (LISA), for the paper's Table 6 ablation
    loss_weights: str = "authors"
    ce_loss_weight: float = 1.0
    bce_loss_weight: float = 2.0
    dice_loss_weight: float = 0.5
    # Amodal mask (decoder mask token 1) and mask-type intent (R2SM). None: follow the
    # visible weights, so switching the loss preset moves both mask losses together.
    amodal_bce_weight: float | None = None
    amodal_dice_weight: float | None = None
    mask_type_weight: float = 1.0
    # SAM's IoU head learning each mask's measured IoU (SAM's MSE) on the decoder's
    # detached output: the masks train as without it. 0 (the authors'): the head keeps
    # whatever it had, SAM's pretrained one in real checkpoints.
    iou_head_loss_weight: float = 0.0
    # Two targets of one answer share no visible pixels: each mask's share of the other
    # targets' pixels (m2sa_core.model.losses.exclusion_per_mask). 0 (the authors'): no such term.
    exclusion_loss_weight: float = 0.0
    # The share a mask may claim before the term counts it: above a boundary's spill onto a
    # neighbour, below a mask drawn on another instance. Without a margin the term pulls
    # every edge off its neighbours.
    exclusion_margin: float = 0.0
    pixel_mean: list[float] = field(default_factory=lambda: list(SAM_PIXEL_MEAN))
    pixel_std: list[float] = field(default_factory=lambda: list(SAM_PIXEL_STD))
    clip_mean: list[float] = field(default_factory=lambda: list(CLIP_MEAN))
    clip_std: list[float] = field(default_factory=lambda: list(CLIP_STD))
    pad_clip_to_square: bool = True
    # Resizing of both image branches: "pil" is the authors' (PIL bicubic for CLIP via
    # transformers, PIL bilinear for SAM via torchvision; antialiased when shrinking),
    # "cv2" is cv2 without antialiasing (what the tiny model was trained with).
    resize_backend: str = "cv2"
    # Text appended to the user's command in prompts (inference, evaluation); empty = none.
    seg_request: str = ""
    # Inference: two instances of one category (or one part of two instances) whose visible
    # masks overlap by at least this IoU are one instance named twice, and the later goes
    # (m2sa_core/inference/duplicates.py). 0 = keep every target, as the authors' code does.
    duplicate_instance_iou: float = 0.0
    # "authors": training wraps questions that carry a text answer in the authors' long
    # question templates (each ends with a segmentation request) and teacher-forced
    # evaluation appends the final "." of the authors' validation answers; "plain": neither.
    question_templates: str = "plain"
    dice_smooth: float = AUTHORS_DICE_SMOOTH
    lora: LoraSettings | None = None  # set when LoRA adapters are present in the weights
    name: str = "custom"

    def __post_init__(self) -> None:
        if isinstance(self.sam, dict):
            self.sam = SamConfig(**self.sam)
        if isinstance(self.lora, dict):
            self.lora = LoraSettings(**self.lora)
        if self.early_layer_index is None:
            self.early_layer_index = min(self.sam.global_attn_indexes)
        if not 0.0 <= self.duplicate_instance_iou <= 1.0:
            raise ValueError(f"duplicate_instance_iou must be in [0, 1] (0 = off), got {self.duplicate_instance_iou}")

    # -- derived views -------------------------------------------------------------
    @property
    def llama_config(self) -> LlamaConfig:
        cfg = LlamaConfig(**self.text_config)
        cfg._attn_implementation = "sdpa"
        return cfg

    @property
    def clip_config(self) -> CLIPVisionConfig:
        cfg = CLIPVisionConfig(**self.vision_config)
        cfg._attn_implementation = "sdpa"
        return cfg

    @property
    def hidden_size(self) -> int:
        return int(self.text_config["hidden_size"])

    @property
    def mm_hidden_size(self) -> int:
        return int(self.vision_config["hidden_size"])

    @property
    def clip_image_size(self) -> int:
        return int(self.vision_config["image_size"])

    @property
    def num_image_tokens(self) -> int:
        """Patch tokens spliced into the prompt (CLS dropped, as in LLaVA v1)."""
        return (self.clip_image_size // int(self.vision_config["patch_size"])) ** 2

    @property
    def vocab_size(self) -> int:
        return int(self.text_config["vocab_size"])

    # -- loss weights --------------------------------------------------------------
    def set_loss_weights(self, preset: str) -> None:
        """Switch between the authors' code defaults and the paper's text."""
        if preset not in LOSS_WEIGHT_PRESETS:
            raise ValueError(f"unknown loss weight preset {preset!r}; choose from {sorted(LOSS_WEIGHT_PRESETS)}")
        self.loss_weights = preset
        self.ce_loss_weight, self.bce_loss_weight, self.dice_loss_weight = LOSS_WEIGHT_PRESETS[preset]

    @property
    def amodal_loss_weights(self) -> tuple[float, float]:
        """(w_bce, w_dice) of the amodal mask: the visible ones unless set."""
        bce = self.bce_loss_weight if self.amodal_bce_weight is None else self.amodal_bce_weight
        dice = self.dice_loss_weight if self.amodal_dice_weight is None else self.amodal_dice_weight
        return float(bce), float(dice)

    # -- checks --------------------------------------------------------------------
    def validate(self) -> None:
        """Raise ValueError naming the first inconsistent field."""
        self.sam.validate()
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
            if key not in self.text_config:
                raise ValueError(f"M2SAConfig.text_config lacks {key!r}")
        for key in ("hidden_size", "image_size", "patch_size", "num_hidden_layers"):
            if key not in self.vision_config:
                raise ValueError(f"M2SAConfig.vision_config lacks {key!r}")
        if self.early_layer_index not in range(self.sam.depth):
            raise ValueError(
                f"M2SAConfig.early_layer_index {self.early_layer_index} outside SAM depth {self.sam.depth}"
            )
        n_layers = int(self.vision_config["num_hidden_layers"])
        if not -(n_layers + 1) <= self.vision_feature_layer <= n_layers:
            raise ValueError(f"M2SAConfig.vision_feature_layer {self.vision_feature_layer} "
                             f"outside CLIP depth {n_layers}")
        for name in ("pixel_mean", "pixel_std", "clip_mean", "clip_std"):
            if len(getattr(self, name)) != 3:
                raise ValueError(f"M2SAConfig.{name} must have 3 values")
        if self.resize_backend not in RESIZE_BACKENDS:
            raise ValueError(f"M2SAConfig.resize_backend {self.resize_backend!r} not in {RESIZE_BACKENDS}")
        if self.question_templates not in QUESTION_TEMPLATE_STYLES:
            raise ValueError(
                f"M2SAConfig.question_templates {self.question_templates!r} not in {QUESTION_TEMPLATE_STYLES}"
            )
        if not self.dice_smooth > 0:
            raise ValueError(f"M2SAConfig.dice_smooth must be > 0, got {self.dice_smooth}")
        if not self.exclusion_loss_weight >= 0:
            raise ValueError(f"M2SAConfig.exclusion_loss_weight must be >= 0, got {self.exclusion_loss_weight}")
        if not 0 <= self.exclusion_margin < 1:
            raise ValueError(f"M2SAConfig.exclusion_margin must be in [0, 1), got {self.exclusion_margin}")
        if self.seg_token_id is not None and not 0 <= self.seg_token_id < self.vocab_size:
            raise ValueError(f"M2SAConfig.seg_token_id {self.seg_token_id} outside vocab of {self.vocab_size}")

    # -- (de)serialisation ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "M2SAConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"M2SAConfig: unknown fields {unknown}")
        return cls(**data)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / CONFIG_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json_string() + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "M2SAConfig":
        """Load from a directory holding config.json or from the JSON file itself."""
        path = Path(path)
        if path.is_dir():
            path = path / CONFIG_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no M2SA config at {path}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{path} is not valid JSON: {err}") from err
        return cls.from_dict(data)
