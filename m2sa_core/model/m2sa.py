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
The M2SA model: LLaVA v1 (Llama + CLIP + linear projector) driving SAM through [SEG] tokens.

Layout of the module tree (and thus of our checkpoints' keys):

* ``llm``            transformers ``LlamaForCausalLM`` (LoRA layers injected by peft when used)
* ``vision_tower``   transformers ``CLIPVisionModel``
* ``mm_projector``   ``Linear(clip_hidden, llm_hidden)`` (LLaVA v1)
* ``sam``            ``segment_anything`` ``Sam`` (image encoder, prompt encoder, mask decoder)
* ``fusion``         early local feature fusion (authors' ``mask_decoder.compress_vit``)
* ``seg_projector``  phi, [SEG] hidden state -> prompt embedding (authors' ``text_hidden_fcs.0``)
* ``mask_type_head`` [SEG] hidden state -> (modal, amodal) logits: which mask the command asked for
* ``refiner``        optional image-guided 2x upsampling of SAM's masks (``sam.refiner_channels`` > 0)

Each [SEG] gets two masks from one pass of SAM's unmodified mask decoder: mask token 0
is the visible (modal) mask, the one ``multimask_output=False`` returns, so checkpoints
of the authors keep their meaning; mask token 1 is the amodal (complete) mask.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
import contextlib
from dataclasses import dataclass, field

from m2sa_core.model.config import M2SAConfig
from m2sa_core.model.losses import answer_ce, answer_token_count, M2SALoss
from m2sa_core.model.refiner import MaskRefiner
from m2sa_core.model.sam import build_fusion, build_sam, encode_with_early_features
from m2sa_core.prompt import IGNORE_INDEX, IMAGE_PLACEHOLDER_ID
from m2sa_core.types import MASK_TYPES
import torch
from torch import nn
import torch.nn.functional as F
from transformers import CLIPVisionModel, LlamaForCausalLM

BATCH_KEYS = (
    "sam_images",
    "clip_images",
    "input_ids",
    "attention_mask",
    "labels",
    "gt_masks",
    "resize_sizes",
    "original_sizes",
    "sample_ids",
)
# Optional batch keys: ``gt_amodal_masks`` (B entries, a [n_i, H_i, W_i] tensor or None)
# and ``mask_types`` (B entries, "modal" | "amodal" | None); losses skip None entries.

VISIBLE_MASK_TOKEN = 0  # SAM's single-mask output token
AMODAL_MASK_TOKEN = 1  # first of SAM's multimask tokens, trained on complete shapes


@dataclass
class FrameFeatures:
    """Per-image features that do not depend on the command (what the frame cache holds)."""

    image_embeddings: torch.Tensor  # [B, P, h, w] SAM neck output
    early_features: torch.Tensor  # [B, C_vit, h, w] output of the early global block
    clip_embeds: torch.Tensor  # [B, N, d] projected CLIP patch embeddings
    upsampling_weights: torch.Tensor | None = None  # [B, 9, 4, 4h, 4w] the refiner's, when the model has one

    def select(self, index: int) -> "FrameFeatures":
        upsampling = None if self.upsampling_weights is None else self.upsampling_weights[index:index + 1]
        return FrameFeatures(
            self.image_embeddings[index:index + 1],
            self.early_features[index:index + 1],
            self.clip_embeds[index:index + 1],
            upsampling,
        )


@dataclass
class M2SAOutput:
    """Training forward output. Losses are scalars; masks are logits at original size."""

    loss: torch.Tensor
    ce_loss: torch.Tensor
    bce_loss: torch.Tensor
    dice_loss: torch.Tensor
    pred_masks: list[torch.Tensor] = field(default_factory=list)  # B x [n_i, H_i, W_i] logits
    pred_ious: list[torch.Tensor] = field(default_factory=list)  # B x [n_i]
    logits: torch.Tensor | None = None  # [B, L', V] over the image-expanded sequence
    num_masks: int = 0
    amodal_bce_loss: torch.Tensor | None = None  # zero when no sample has amodal ground truth
    amodal_dice_loss: torch.Tensor | None = None
    mask_type_loss: torch.Tensor | None = None  # zero when no sample has a mask type
    pred_amodal_masks: list[torch.Tensor] = field(default_factory=list)  # B x [n_i, H_i, W_i] logits
    pred_mask_types: list[torch.Tensor] = field(default_factory=list)  # B x [n_i, 2] (modal, amodal) logits
    num_amodal_masks: int = 0
    iou_loss: torch.Tensor | None = None  # zero when the IoU head is not trained
    pred_amodal_ious: list[torch.Tensor] = field(default_factory=list)  # B x [n_i] predicted IoU of the amodal masks
    exclusion_loss: torch.Tensor | None = None  # zero when the exclusion term is off
    # [8] the loss's weighted terms and [8] the items each averages (m2sa_core.model.losses.LossParts)
    loss_terms: torch.Tensor | None = None
    loss_counts: torch.Tensor | None = None


def _detached_inputs(module: nn.Module, args: tuple) -> tuple:
    """Forward pre-hook: the module reads its inputs without passing gradient back to them."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    previous = torch.get_default_dtype()
    if dtype is not None and dtype.is_floating_point:
        torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class M2SAModel(nn.Module):
    """LLaVA + SAM with early local feature fusion and multiple [SEG] tokens."""

    def __init__(self, config: M2SAConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.llm = LlamaForCausalLM(config.llama_config)
        self.vision_tower = CLIPVisionModel(config.clip_config)
        self.mm_projector = nn.Linear(config.mm_hidden_size, config.hidden_size)
        self.sam = build_sam(config)
        # The IoU head scores masks and learns from them (iou_head_loss_weight); it never moves them.
        self.sam.mask_decoder.iou_prediction_head.register_forward_pre_hook(_detached_inputs)
        self.fusion = build_fusion(config.sam.embed_dim, config.sam.prompt_embed_dim)
        d, p = config.hidden_size, config.sam.prompt_embed_dim
        self.seg_projector = nn.Sequential(nn.Linear(d, d), nn.ReLU(inplace=True), nn.Linear(d, p), nn.Dropout(0.0))
        self.mask_type_head = nn.Linear(d, len(MASK_TYPES))
        # Zero init: an untrained head (checkpoints without it) ties and reads as "modal".
        nn.init.zeros_(self.mask_type_head.weight)
        nn.init.zeros_(self.mask_type_head.bias)
        # Built last, so a model without it draws every other weight as before from one seed.
        sam = config.sam
        self.refiner = MaskRefiner(sam.refiner_channels, sam.patch_size // 8) if sam.refiner_channels else None

    @classmethod
    def build(
        cls, config: M2SAConfig, device: str | torch.device = "cpu", dtype: torch.dtype | None = None
    ) -> "M2SAModel":
        """
        Construct with random weights directly on ``device`` in ``dtype``.

        Allocating on the target device (``torch.device`` context) lets a 7B model be
        built on a GPU without first materialising 28 GB of fp32 weights on the host.
        """
        with _default_dtype(dtype), torch.device(device):
            model = cls(config)
        return model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)

    # -- accessors -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.mm_projector.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.mm_projector.weight.dtype

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings; placeholder ids (negative) embed as id 0 and are replaced later."""
        return self.llm.get_input_embeddings()(input_ids.clamp(min=0))

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute LLM and CLIP activations in backward (memory for compute)."""
        for module in (self.llm, self.vision_tower):
            if not enabled:
                module.gradient_checkpointing_disable()
            elif hasattr(module, "activation_checkpointing_enable"):  # transformers >= 5.x
                module.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

    # -- image features ------------------------------------------------------------
    def encode_sam(self, sam_images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(image embedding [B,P,h,w], early features [B,C_vit,h,w]); no graph when SAM's encoder is frozen."""
        encoder = self.sam.image_encoder
        trainable = torch.is_grad_enabled() and any(p.requires_grad for p in encoder.parameters())
        with torch.set_grad_enabled(trainable):
            return encode_with_early_features(
                encoder, sam_images.to(self.device, self.dtype), self.config.early_layer_index
            )

    def encode_clip(self, clip_images: torch.Tensor) -> torch.Tensor:
        """Projected CLIP patch embeddings [B, N, d] (layer ``vision_feature_layer``, CLS dropped)."""
        size = self.config.clip_image_size
        if clip_images.ndim != 4 or tuple(clip_images.shape[1:]) != (3, size, size):
            raise ValueError(f"CLIP images must be [B, 3, {size}, {size}], got {tuple(clip_images.shape)}")
        trainable = torch.is_grad_enabled() and any(p.requires_grad for p in self.vision_tower.parameters())
        with torch.set_grad_enabled(trainable):
            out = self.vision_tower(clip_images.to(self.device, self.dtype), output_hidden_states=True)
            patches = out.hidden_states[self.config.vision_feature_layer][:, 1:]
        return self.mm_projector(patches)

    def encode_upsampling_weights(self, sam_images: torch.Tensor) -> torch.Tensor | None:
        """Return the refiner's upsampling weights [B, 9, 4, 4h, 4w] of SAM's input images; None without a refiner."""
        if self.refiner is None:
            return None
        trainable = torch.is_grad_enabled() and any(p.requires_grad for p in self.refiner.parameters())
        with torch.set_grad_enabled(trainable):
            return self.refiner.encode(sam_images.to(self.device, self.dtype))

    def encode_images(self, sam_images: torch.Tensor, clip_images: torch.Tensor) -> FrameFeatures:
        emb, early = self.encode_sam(sam_images)
        return FrameFeatures(emb, early, self.encode_clip(clip_images), self.encode_upsampling_weights(sam_images))

    def fuse(self, image_embeddings: torch.Tensor, early_features: torch.Tensor) -> torch.Tensor:
        """Early local feature fusion: final embedding + convs(early features)."""
        if not self.config.use_early_fusion:
            return image_embeddings
        return image_embeddings + self.fusion(early_features)

    # -- text ------------------------------------------------------------------------
    def merge_image_embeddings(
        self,
        input_ids: torch.Tensor,
        image_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sample_ids: Sequence[str] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """
        Splice the N image embeddings at the single IMAGE_PLACEHOLDER_ID of each row.

        Returns (inputs_embeds [B, L+N-1, d], attention_mask, labels); image positions
        are attended and never supervised.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        text = self.embed_tokens(input_ids)
        n_img = image_embeds.shape[1]
        embeds, masks, labs = [], [], []
        for b in range(input_ids.shape[0]):
            where = (input_ids[b] == IMAGE_PLACEHOLDER_ID).nonzero().flatten()
            if where.numel() != 1:
                name = sample_ids[b] if sample_ids is not None else f"row {b}"
                raise ValueError(
                    f"sample {name}: input_ids must hold exactly one image placeholder "
                    f"({IMAGE_PLACEHOLDER_ID}), found {where.numel()}"
                )
            p = int(where)
            img = image_embeds[b].to(text.dtype)
            embeds.append(torch.cat([text[b, :p], img, text[b, p + 1:]]))
            ones = attention_mask.new_ones(n_img)
            masks.append(torch.cat([attention_mask[b, :p], ones, attention_mask[b, p + 1:]]))
            if labels is not None:
                ign = labels.new_full((n_img,), IGNORE_INDEX)
                labs.append(torch.cat([labels[b, :p], ign, labels[b, p + 1:]]))
        merged_labels = torch.stack(labs) if labels is not None else None
        return torch.stack(embeds), torch.stack(masks), merged_labels

    def seg_hidden_positions(self, labels: torch.Tensor) -> torch.Tensor:
        """Bool [B, L]: positions t whose next label is [SEG] (the states that predict it)."""
        seg = self.config.seg_token_id
        if seg is None:
            raise ValueError("config.seg_token_id is not set: attach a tokenizer with [SEG] first")
        pos = torch.zeros_like(labels, dtype=torch.bool)
        pos[:, :-1] = labels[:, 1:] == seg
        return pos

    # -- masks ----------------------------------------------------------------------
    def decode_mask_pair(
        self, fused_embedding: torch.Tensor, seg_hidden: torch.Tensor, upsampling: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Low-res logits [n, 2, g, g] (visible, amodal) and IoU predictions [n, 2] for one image.

        Each [SEG] state goes through phi and prompts SAM's mask decoder as one sparse
        prompt embedding (see :meth:`decode_prompt_pair`).
        """
        return self.decode_prompt_pair(fused_embedding, self.seg_projector(seg_hidden.to(self.dtype)),
                                       upsampling=upsampling)

    def decode_prompt_pair(
        self, fused_embedding: torch.Tensor, prompts: torch.Tensor, mask_input: torch.Tensor | None = None,
        upsampling: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Run SAM's decoder on prompt embeddings already through phi: logits [n, 2, g, g], IoU [n, 2].

        ``g`` is ``config.sam.mask_grid_size``: SAM's 4h, or 8h when the model refines its
        masks with the frame's ``upsampling`` weights [1, 9, 4, 4h, 4w] (:meth:`encode_upsampling_weights`).
        ``prompts`` [n, P] are what a command's [SEG] states become; kept, they segment
        the same targets on any later frame without the language model (tracking).
        ``mask_input`` [n, 1, g, g] (low-res logits, e.g. the previous frame's visible
        masks) is SAM's dense mask prompt, resized to SAM's 4h when refined; without it
        the dense prompt is SAM's own "no mask" embedding. One call of ``predict_masks``
        yields every mask token; token 0 is exactly what ``multimask_output=False``
        returns, token 1 is the amodal mask.
        """
        if fused_embedding.shape[0] != 1:
            raise ValueError(f"decode_masks takes one image at a time, got {fused_embedding.shape[0]}")
        masks = None if mask_input is None else mask_input.to(fused_embedding.dtype)
        sam_grid = tuple(self.sam.prompt_encoder.mask_input_size)
        if masks is not None and tuple(masks.shape[-2:]) != sam_grid:
            masks = F.interpolate(masks, size=sam_grid, mode="bilinear", align_corners=False, antialias=True)
        _, dense = self.sam.prompt_encoder(points=None, boxes=None, masks=masks)
        low_res, iou = self.sam.mask_decoder.predict_masks(
            image_embeddings=fused_embedding,
            image_pe=self.dense_positional_encoding().to(fused_embedding.dtype),
            sparse_prompt_embeddings=prompts.to(fused_embedding.dtype)[:, None, :],
            dense_prompt_embeddings=dense.to(fused_embedding.dtype),
        )
        keep = [VISIBLE_MASK_TOKEN, AMODAL_MASK_TOKEN]
        return self.refine_masks(low_res[:, keep], upsampling), iou[:, keep]

    def refine_masks(self, low_res: torch.Tensor, upsampling: torch.Tensor | None) -> torch.Tensor:
        """Upsample SAM's logits [n, k, 4h, 4w] of one image to [n, k, 8h, 8w] by the refiner if the model has one."""
        if self.refiner is None:
            return low_res
        if upsampling is None:
            raise ValueError("this model refines its masks with the image: pass the frame's upsampling weights "
                             "(M2SAModel.encode_upsampling_weights)")
        return self.refiner(low_res, upsampling)

    def decode_masks(
        self, fused_embedding: torch.Tensor, seg_hidden: torch.Tensor, upsampling: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Visible masks only: low-res logits [n, 1, g, g] and IoU predictions [n]."""
        low_res, iou = self.decode_mask_pair(fused_embedding, seg_hidden, upsampling)
        return low_res[:, VISIBLE_MASK_TOKEN:VISIBLE_MASK_TOKEN + 1], iou[:, VISIBLE_MASK_TOKEN]

    def mask_type_logits(self, seg_hidden: torch.Tensor) -> torch.Tensor:
        """(modal, amodal) logits [n, 2] per [SEG] state: which mask the command asked for."""
        return self.mask_type_head(seg_hidden.to(self.dtype))

    def dense_positional_encoding(self) -> torch.Tensor:
        """
        Return SAM's dense positional encoding [1, P, h, w], computed in float32.

        segment_anything builds its coordinate grid in float32, so with bf16/fp16
        weights its random Fourier matrix is lifted to float32 for the call.
        """
        prompt_encoder = self.sam.prompt_encoder
        pe_layer = prompt_encoder.pe_layer
        matrix = pe_layer.positional_encoding_gaussian_matrix
        if matrix.dtype == torch.float32:
            return prompt_encoder.get_dense_pe()
        pe_layer.positional_encoding_gaussian_matrix = matrix.float()
        try:
            return prompt_encoder.get_dense_pe()
        finally:
            pe_layer.positional_encoding_gaussian_matrix = matrix

    def upscale_masks(
        self, low_res: torch.Tensor, resize_size: Sequence[int], original_size: Sequence[int]
    ) -> torch.Tensor:
        """Low-res logits [n,1,h,w] -> logits [n, H, W] at the original image size."""
        out = self.sam.postprocess_masks(low_res, tuple(resize_size), tuple(original_size))
        return out[:, 0]

    # -- training ---------------------------------------------------------------------
    def forward(self, batch: dict) -> M2SAOutput:
        """
        Teacher-forced forward with CE on answer tokens and BCE + Dice on masks.

        Visible masks train on ``gt_masks``; amodal masks on ``gt_amodal_masks`` where a
        sample has them; the mask-type head on ``mask_types`` where set. A sample whose
        command asks for the complete shape (mask type "amodal") carries that shape in
        ``gt_masks`` (the data's convention: the mask the command asks for), so it trains
        the amodal output and leaves the visible loss out.

        ``batch`` follows the contract in :data:`BATCH_KEYS` (see the module docs of
        the training collate). Per sample the number of [SEG] in ``labels`` must equal
        the number of ground-truth masks.
        """
        missing = [k for k in BATCH_KEYS if k not in batch]
        if missing:
            raise KeyError(f"M2SAModel.forward: batch lacks {missing}")
        cfg = self.config
        input_ids = batch["input_ids"].to(self.device)
        labels = batch["labels"].to(self.device)
        sample_ids = list(batch["sample_ids"])
        seg_in = (labels == cfg.seg_token_id).sum(1).tolist()
        for b, sid in enumerate(sample_ids):
            n_gt = int(batch["gt_masks"][b].shape[0])
            if seg_in[b] != n_gt:
                raise ValueError(
                    f"sample {sid}: {seg_in[b]} [SEG] tokens in the supervised answer but {n_gt} ground-truth masks"
                )

        clip_embeds = self.encode_clip(batch["clip_images"])
        # A batch of conversations answered in words (language pretraining) never needs SAM.
        fused = upsampling = None
        if any(int(m.shape[0]) for m in batch["gt_masks"]):
            fused = self.fuse(*self.encode_sam(batch["sam_images"]))
            upsampling = self.encode_upsampling_weights(batch["sam_images"])
        embeds, attn, merged_labels = self.merge_image_embeddings(
            input_ids, clip_embeds, batch["attention_mask"].to(self.device), labels, sample_ids
        )
        hidden = self.llm.model(inputs_embeds=embeds, attention_mask=attn, use_cache=False).last_hidden_state
        logits = self.llm.lm_head(hidden)
        ce_loss = answer_ce(logits, merged_labels)

        gt_amodal, mask_types = self._optional_targets(batch, sample_ids)
        seg_pos = self.seg_hidden_positions(merged_labels)
        pred_masks, pred_ious, pred_amodal, pred_amodal_ious, pred_types = [], [], [], [], []
        losses = M2SALoss(cfg)
        for b in range(len(sample_ids)):
            gt = batch["gt_masks"][b]
            if gt.shape[0] == 0:
                empty = hidden.new_zeros((0, *batch["original_sizes"][b]))
                pred_masks.append(empty)
                pred_amodal.append(empty)
                pred_ious.append(hidden.new_zeros((0,)))
                pred_amodal_ious.append(hidden.new_zeros((0,)))
                pred_types.append(hidden.new_zeros((0, len(MASK_TYPES))))
                continue
            states = hidden[b, seg_pos[b]]
            low_res, iou = self.decode_mask_pair(fused[b:b + 1], states,
                                                 None if upsampling is None else upsampling[b:b + 1])
            both = self.upscale_masks(
                low_res.flatten(0, 1)[:, None], batch["resize_sizes"][b], batch["original_sizes"][b]
            )
            both = both.unflatten(0, (low_res.shape[0], 2))
            masks, amodal = both[:, VISIBLE_MASK_TOKEN], both[:, AMODAL_MASK_TOKEN]
            gt = gt.to(masks.device)
            if tuple(gt.shape[-2:]) != tuple(masks.shape[-2:]):
                raise ValueError(
                    f"sample {sample_ids[b]}: gt masks are {tuple(gt.shape[-2:])} but original_size is "
                    f"{tuple(masks.shape[-2:])}"
                )
            type_logits = self.mask_type_logits(states)
            pred_masks.append(masks)
            pred_amodal.append(amodal)
            pred_ious.append(iou[:, VISIBLE_MASK_TOKEN])
            pred_amodal_ious.append(iou[:, AMODAL_MASK_TOKEN])
            pred_types.append(type_logits)
            losses.add_sample(sample_ids[b], masks, amodal, type_logits, gt, gt_amodal[b], mask_types[b], iou)
        parts = losses.total(ce_loss, answer_token_count(merged_labels))
        return M2SAOutput(
            parts.loss, parts.ce, parts.bce, parts.dice, pred_masks, pred_ious, logits, parts.num_masks,
            amodal_bce_loss=parts.amodal_bce, amodal_dice_loss=parts.amodal_dice, mask_type_loss=parts.mask_type,
            pred_amodal_masks=pred_amodal, pred_mask_types=pred_types, num_amodal_masks=parts.num_amodal_masks,
            iou_loss=parts.iou, pred_amodal_ious=pred_amodal_ious, loss_terms=parts.terms, loss_counts=parts.counts,
            exclusion_loss=parts.exclusion,
        )

    @staticmethod
    def _optional_targets(batch: dict, sample_ids: list[str]) -> tuple[list, list]:
        """Check and return ``gt_amodal_masks`` and ``mask_types`` of a batch, None per sample when absent."""
        n = len(sample_ids)
        gt_amodal = batch.get("gt_amodal_masks")
        gt_amodal = [None] * n if gt_amodal is None else list(gt_amodal)
        mask_types = batch.get("mask_types")
        mask_types = [None] * n if mask_types is None else list(mask_types)
        for key, values in (("gt_amodal_masks", gt_amodal), ("mask_types", mask_types)):
            if len(values) != n:
                raise ValueError(f"M2SAModel.forward: batch[{key!r}] has {len(values)} entries for {n} samples")
        for sid, value in zip(sample_ids, mask_types):
            if value is not None and value not in MASK_TYPES:
                raise ValueError(f"sample {sid}: mask_types entry must be one of {MASK_TYPES} or None, got {value!r}")
        return gt_amodal, mask_types
