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
Quantized loading of the language model (int8, int4) through bitsandbytes, as LISA does.

Why only the language model: it is 88-93 % of M2SA's weights at 7b/13b (6.7 B of
7.7 B, 13 B of 14 B parameters) and what bounds memory and decode time, while the CLIP
tower, the projector, SAM and phi are small and feed the masks directly. LISA's 8-/4-bit
loading (bitsandbytes, ``llm_int8_skip_modules=["visual_model"]``) quantizes the Llama
body with its ``lm_head`` and leaves SAM in half precision. Here every ``nn.Linear``
under ``model.llm`` (attention, MLP, ``lm_head``) is replaced by a bitsandbytes layer;
the token embedding, the norms, ``vision_tower``, ``mm_projector``, ``sam``, ``fusion``,
``seg_projector`` and ``mask_type_head`` stay in the model dtype. LoRA adapters
(``lora_A``/``lora_B``), where a checkpoint keeps them unmerged, stay float too.

Modes (docs/PERFORMANCE.md, "Quantized loading"), LISA's settings for each:

* ``none`` - the model dtype throughout.
* ``int8`` - ``Linear8bitLt``: LLM.int8(), int8 weights per output row with the
  mixed-precision decomposition of activation outliers above 6.0 (bitsandbytes'
  default ``llm_int8_threshold``).
* ``int4`` - ``Linear4bit``: NF4 weights in blocks of 64 with double-quantized
  scales (``bnb_4bit_quant_type="nf4"``, ``bnb_4bit_use_double_quant=True``), two
  values per byte; matmuls run in the model dtype.

bitsandbytes (>= 0.48) runs both on CPU as well as on CUDA, which is why it was chosen
over torchao: torchao 0.18 has no packed int4 linear for x86 CPUs, so its int4 could not
be tested here; it is also imported by transformers at start-up whenever installed.

Loading onto a GPU never holds the language model's float weights there: each linear
layer is replaced on the host and moved to the device, which quantizes it on arrival
(bitsandbytes quantizes in ``.to(device)``), so a 13b model whose bf16 weights (26 GB)
exceed a 24 GB GPU arrives as ~13 GB of int8. The float model is staged in host memory.

The decode step of a quantized model is not replayed as a CUDA graph: LLM.int8()'s
outlier columns have a data-dependent shape (a host sync), which capture forbids, and
the 4-bit kernels are not verified under capture. ``decoder="auto"`` therefore means
the dynamic KV cache for a quantized model and ``decoder="graph"`` is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import logging

import torch
from torch import nn

MODES = ("none", "int8", "int4")
LLM_INT8_THRESHOLD = 6.0  # bitsandbytes' and LISA's default outlier threshold
INT4_QUANT_TYPE = "nf4"
INT4_BLOCKSIZE = 64
BITSANDBYTES_PIN = "bitsandbytes==0.50.2"
DEVICES = ("cpu", "cuda")


class UnsupportedQuantization(ValueError):
    """A valid mode this device, dtype, decoder or installation cannot run."""


@dataclass
class QuantizationReport:
    """What :func:`quantize_language_model` did: layers replaced and the weights' bytes before and after."""

    mode: str
    layers: int
    bytes_before: int
    bytes_after: int

    @property
    def ratio(self) -> float:
        """How many times smaller the language model's linear weights became."""
        return self.bytes_before / self.bytes_after if self.bytes_after else float("inf")


def check_mode(mode: str) -> str:
    """``mode`` if it names a quantization mode; ValueError listing the modes otherwise."""
    if mode not in MODES:
        raise ValueError(f"quantization must be one of {MODES}, got {mode!r}")
    return mode


def check_supported(mode: str, device: str | torch.device, dtype: torch.dtype, decoder: str = "auto") -> str:
    """
    Refuse, before any weight is read, a mode that cannot run with these settings.

    Checked first so that a 13b checkpoint is not read for minutes only to fail at the end.

    :raises ValueError: unknown mode.
    :raises UnsupportedQuantization: bitsandbytes missing, a device other than CPU or CUDA, a
        non-float dtype, or the CUDA-graph decoder with a quantized model.
    """
    check_mode(mode)
    if mode == "none":
        return mode
    device = torch.device(device)
    if device.type not in DEVICES:
        raise UnsupportedQuantization(f"quantization {mode!r} runs on {DEVICES} only, got device {device.type!r}")
    if not dtype.is_floating_point:
        raise UnsupportedQuantization(f"quantization {mode!r} needs a floating-point model dtype, got {dtype}")
    if decoder == "graph":
        raise UnsupportedQuantization(
            f"quantization {mode!r} cannot use decoder 'graph': LLM.int8()'s outlier handling syncs with the host, "
            "which CUDA graph capture forbids; use decoder 'auto', 'dynamic' or 'static'")
    _bitsandbytes()
    return mode


def resolve_decoder(mode: str, decoder: str) -> str:
    """Return the decoder a segmenter should use: ``auto`` means ``dynamic`` for a quantized model (no CUDA graph)."""
    return "dynamic" if mode != "none" and decoder == "auto" else decoder


def _bitsandbytes():
    """Return the bitsandbytes package, imported on first use."""
    try:
        import bitsandbytes
    except ImportError as err:
        raise UnsupportedQuantization(
            f"quantized loading needs bitsandbytes ({BITSANDBYTES_PIN}, in requirements.lock): {err}") from err
    matmul_log = logging.getLogger("bitsandbytes.autograd._functions")
    if not any(isinstance(f, _ExpectedCast) for f in matmul_log.filters):
        matmul_log.addFilter(_ExpectedCast())
    return bitsandbytes


class _ExpectedCast(logging.Filter):
    """
    Drops LLM.int8()'s per-matmul notice that fp32/bf16 activations are cast to fp16.

    The cast is how int8 runs in a non-fp16 model (documented above); logged on every
    linear call, it would flood a node's log with one line per layer per token.
    """

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - the name logging.Filter calls
        return "during quantization" not in record.getMessage()


def is_language_model_linear(module: nn.Module, name: str) -> bool:
    """Return the Llama's float ``nn.Linear`` layers, LoRA adapters excepted (what quantization replaces)."""
    return type(module) is nn.Linear and not any(part.startswith("lora_") for part in name.split("."))


def language_model_linears(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(name under ``model.llm``, layer) for every linear layer of the language model, quantized or not."""
    for name, module in model.llm.named_modules():
        if isinstance(module, nn.Linear) and not any(part.startswith("lora_") for part in name.split(".")):
            yield name, module


def _tensors(obj: object, depth: int = 0) -> Iterator[torch.Tensor]:
    """Tensors held by a bitsandbytes weight: its data and its statistics (SCB, quant_state, nested state)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and hasattr(obj, "__dict__"):
        for value in vars(obj).values():
            yield from _tensors(value, depth + 1)


def weight_bytes(weight: torch.Tensor) -> int:
    """Bytes a linear layer's weight holds in memory, scales and statistics included."""
    seen: dict[tuple[int, int], int] = {}
    for tensor in [weight.data, *_tensors(getattr(weight, "SCB", None)),
                   *_tensors(getattr(weight, "quant_state", None))]:
        if tensor.device.type != "meta":
            seen[(tensor.untyped_storage().data_ptr(), tensor.numel())] = tensor.numel() * tensor.element_size()
    return sum(seen.values())


def is_quantized(layer: nn.Module) -> bool:
    """Return True for a bitsandbytes 8- or 4-bit linear layer whose weight is quantized."""
    dtype = getattr(getattr(layer, "weight", None), "dtype", None)
    return type(layer) is not nn.Linear and dtype in (torch.int8, torch.uint8)


def language_model_weight_bytes(model: nn.Module) -> int:
    """In-memory bytes of the language model's linear weights (biases excluded: Llama has none)."""
    return sum(weight_bytes(layer.weight) for _, layer in language_model_linears(model))


def packs_for_cpu(in_features: int, out_features: int) -> bool:
    """
    Whether bitsandbytes' AVX512-BF16 CPU kernel can take an int4 layer of this shape.

    On a CPU with AVX512-BF16, bitsandbytes (0.50) repacks each 4-bit weight on its first
    call, reading its scales as (out, in // blocksize) and its rows in groups of 32; for
    other shapes it fails ("shape '[128, 5]' is invalid", the tiny model's 352-wide MLP).
    Such layers keep the generic 4-bit path, which every CPU runs; the 7b/13b shapes
    (4096, 11008, 5120, 13824) all pack.
    """
    return in_features % INT4_BLOCKSIZE == 0 and out_features % 32 == 0


def _quantized_linear(linear: nn.Linear, mode: str, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """Return a bitsandbytes layer holding ``linear``'s weights, quantized on its way to ``device``."""
    bnb = _bitsandbytes()
    weight = linear.weight.detach()
    bias = linear.bias is not None
    if mode == "int8":
        layer = bnb.nn.Linear8bitLt(linear.in_features, linear.out_features, bias=bias, has_fp16_weights=False,
                                    threshold=LLM_INT8_THRESHOLD, device="meta")
        layer.weight = bnb.nn.Int8Params(weight, requires_grad=False, has_fp16_weights=False)
    else:
        layer = bnb.nn.Linear4bit(linear.in_features, linear.out_features, bias=bias, compute_dtype=dtype,
                                  compress_statistics=True, quant_type=INT4_QUANT_TYPE, device="meta")
        layer.weight = bnb.nn.Params4bit(weight, requires_grad=False, blocksize=INT4_BLOCKSIZE,
                                         compress_statistics=True, quant_type=INT4_QUANT_TYPE, module=layer)
        if not packs_for_cpu(linear.in_features, linear.out_features):
            layer.support_avx512bf16_for_cpu = False
    if bias:
        layer.bias = nn.Parameter(linear.bias.detach().to(dtype), requires_grad=False)
    return layer.to(device)


def quantize_language_model(model: nn.Module, mode: str, device: str | torch.device | None = None
                            ) -> QuantizationReport:
    """
    Replace ``model.llm``'s linear layers by ``mode``'s bitsandbytes layers, in place, on ``device``.

    One layer at a time: its float weight is read where it lies (the host, for a GPU
    load) and quantized as it moves to ``device`` (default: where it lies), so the float
    language model never sits whole on the device. The rest of ``model`` stays where it
    is (``Segmenter`` moves it). Call :func:`check_supported` first for a clear error.
    """
    check_mode(mode)
    before = language_model_weight_bytes(model)
    if mode == "none":
        return QuantizationReport(mode, 0, before, before)
    names = [name for name, layer in model.llm.named_modules() if is_language_model_linear(layer, name)]
    with torch.no_grad():
        for name in names:  # by name, so each float layer is freed once replaced
            parent_name, _, child = name.rpartition(".")
            parent = model.llm.get_submodule(parent_name) if parent_name else model.llm
            linear = getattr(parent, child)
            target = torch.device(device) if device is not None else linear.weight.device
            setattr(parent, child, _quantized_linear(linear, mode, target, linear.weight.dtype))
            del linear
        if device is not None:
            model.llm.to(device)  # embeddings and norms follow the quantized layers
    return QuantizationReport(mode, len(names), before, language_model_weight_bytes(model))
