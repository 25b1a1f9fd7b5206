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
Quantized loading: int8 / int4 language model through bitsandbytes, on CPU at tiny size.

The quality figures compare the shipped tiny model quantized against itself unquantized
on the demo's held-out scenes (bench/bench_quantization.py, 3 scenes, 14 commands, 48
tokens). Measured on this CPU (2026-11-22, the single-stage model): int8 token agreement
1.000, mask IoU 0.999 (16 masks); int4 (NF4) token agreement 0.931, mask IoU 0.992. The
staged model of run 5 (2026-11-23) loses more to NF4: int4 token agreement 0.756, mask
IoU 0.835 (22 masks); int8 stays above 0.9. The model of run 11 (2026-11-23): int8
token agreement 0.897 (12 of 14 answers identical), mask IoU 0.946 (20 masks); int4 0.840
and 0.920. The model of run 37 (2026-11-26): int4 token agreement 0.642 (run 24's: 0.668),
mask IoU above 0.99. With 14 answers one early divergence costs about 0.05 of agreement, so the
int8 floor leaves room for one more and the int4 floor for two. A broken quantization (wrong
scales, a transposed weight, a layer skipped) gives noise: agreement near 0.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
import sys

from m2sa_core.inference import Segmenter
from m2sa_core.model.presets import build_preset
from m2sa_core.model.quantization import (
    is_quantized,
    language_model_linears,
    language_model_weight_bytes,
    packs_for_cpu,
    quantize_language_model,
    UnsupportedQuantization,
)
from m2sa_core.shipped_model import SHIPPED_MODEL
import pytest
import torch
from torch import nn

pytest.importorskip("bitsandbytes")

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "bench_quantization.py"
# Measured minus a margin (see the module docstring); noise scores near 0.
THRESHOLDS = {"int8": {"token_agreement": 0.85, "mask_iou": 0.9},
              "int4": {"token_agreement": 0.55, "mask_iou": 0.75}}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_quantization", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _bench()


@pytest.fixture(scope="module")
def inputs(bench):
    return bench.demo_inputs(3)


@pytest.fixture(scope="module")
def reference(bench, inputs):
    return bench.run_mode(str(SHIPPED_MODEL), "none", inputs, torch.device("cpu"), torch.float32, 48)


@pytest.mark.parametrize("mode,weight_dtype", [("int8", torch.int8), ("int4", torch.uint8)])
def test_only_the_language_model_linears_are_quantized(mode, weight_dtype):
    seg = Segmenter.from_pretrained("tiny", quantization=mode)
    model = seg.model
    layers = dict(language_model_linears(model))
    assert "lm_head" in layers and len(layers) == 4 * 7 + 1  # q k v o gate up down per layer, lm_head
    for name, layer in layers.items():
        assert is_quantized(layer) and layer.weight.dtype == weight_dtype, name
    assert model.llm.get_input_embeddings().weight.dtype == torch.float32
    for part in (model.vision_tower, model.mm_projector, model.sam, model.fusion, model.seg_projector,
                 model.mask_type_head):
        for name, p in part.named_parameters():
            assert type(p) is nn.Parameter and p.dtype == torch.float32, name
    assert seg.decoder == "dynamic"  # no CUDA graph for a quantized model


@pytest.mark.parametrize("mode,ratio", [("int8", 3.8), ("int4", 7.0)])
def test_language_model_weights_shrink(mode, ratio):
    model = Segmenter.from_pretrained("tiny").model
    before = language_model_weight_bytes(model)
    report = quantize_language_model(model, mode)
    assert report.bytes_before == before and report.layers == 29
    # fp32 -> int8 + one fp32 scale per row: ~3.9x; -> NF4 + double-quantized block scales: ~7.2x
    assert report.ratio >= ratio, report
    assert language_model_weight_bytes(model) == report.bytes_after


def test_int4_layers_of_every_width_give_the_float_layers_output():
    """
    The tiny language model's MLP is 352 wide, not a multiple of the 64-value blocks.

    On a CPU with AVX512-BF16, bitsandbytes' packed kernel fails on such a layer at its first
    call, so it must run the generic path there; the other layers keep the fast one.
    """
    model = Segmenter.from_pretrained("tiny").model
    floats = {name: layer.weight.detach().clone() for name, layer in language_model_linears(model)}
    quantize_language_model(model, "int4")
    torch.manual_seed(0)
    for name, layer in language_model_linears(model):
        weight = floats[name]
        assert getattr(layer, "support_avx512bf16_for_cpu", False) is False or packs_for_cpu(*weight.shape[::-1])
        x = torch.randn(5, weight.shape[1])
        with torch.no_grad():
            out = layer(x)
        expected = x @ weight.T
        # NF4 keeps a layer's output to a cosine of about 0.97 on these random weights; a broken
        # kernel (wrong scales, a transposed weight) gives noise near 0
        assert torch.nn.functional.cosine_similarity(out.flatten(), expected.flatten(), dim=0) > 0.9, name
    assert not packs_for_cpu(352, 128) and packs_for_cpu(4096, 11008) and packs_for_cpu(11008, 4096)


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_quantized_model_answers_like_the_float_one(bench, inputs, reference, mode):
    run = bench.run_mode(str(SHIPPED_MODEL), mode, inputs, torch.device("cpu"), torch.float32, 48)
    figures = bench.compare(reference, run)
    assert figures["masks_compared"] >= 5
    for key, floor in THRESHOLDS[mode].items():
        assert figures[key] >= floor, (key, figures)


def test_unknown_mode_and_unsupported_settings_are_refused_before_loading():
    with pytest.raises(ValueError, match=r"quantization must be one of \('none', 'int8', 'int4'\), got 'int3'"):
        Segmenter.from_pretrained("tiny", quantization="int3")
    with pytest.raises(UnsupportedQuantization, match="decoder 'graph'"):
        Segmenter.from_pretrained("tiny", quantization="int8", decoder="graph")
    with pytest.raises(UnsupportedQuantization, match="runs on .* only, got device 'meta'"):
        Segmenter.from_pretrained("tiny", device="meta", quantization="int4")
    assert issubclass(UnsupportedQuantization, ValueError)  # CLIs turn it into one line


def test_a_model_in_memory_is_wrapped_as_from_pretrained_wraps_a_checkpoint():
    """
    ``from_model`` is ``from_pretrained`` without the read.

    Same quantization, same decoder choice, same refusals, so a caller holding weights
    need not repeat its steps.
    """
    model, tokenizer = build_preset("tiny", device="cpu", dtype=torch.float32)
    with pytest.raises(UnsupportedQuantization, match="decoder 'graph'"):
        Segmenter.from_model(model, tokenizer, quantization="int8", decoder="graph")
    assert all(type(layer) is nn.Linear for _, layer in language_model_linears(model))  # refused before touching
    seg = Segmenter.from_model(model, tokenizer, quantization="int8", max_new_tokens=12)
    loaded = Segmenter.from_pretrained("tiny", quantization="int8", max_new_tokens=12)
    assert seg.model is model and seg.max_new_tokens == 12
    assert (seg.decoder, seg.dtype, seg.device) == (loaded.decoder, loaded.dtype, loaded.device) == (
        "dynamic", torch.float32, torch.device("cpu"))
    kinds = lambda s: [type(layer).__name__ for _, layer in language_model_linears(s.model)]  # noqa: E731
    assert kinds(seg) == kinds(loaded) and "Linear8bitLt" in kinds(seg)


def test_none_leaves_the_model_untouched():
    seg = Segmenter.from_pretrained("tiny", quantization="none")
    assert all(type(layer) is nn.Linear for _, layer in language_model_linears(seg.model))


def test_bench_writes_its_section(tmp_path, bench):
    results = tmp_path / "RESULTS.md"
    report = bench.main(["--scenes", "1", "--modes", "int8", "--max-new-tokens", "16", "--results", str(results)])
    assert set(report["modes"]) == {"none", "int8"}
    text = results.read_text()
    assert "## bench_quantization: preset tiny" in text and "| int8 |" in text


def test_bench_draws_random_weights_once_and_gives_each_mode_a_copy(bench):
    """
    A 7b/13b run draws its random weights once, and each mode gets a copy.

    Drawing them per mode on an H200's host stopped two GPU runs at their caps
    (bench/RESULTS.md): every mode starts from the same weights, and loading one mode
    leaves the host copy whole for the next.
    """
    host_model = bench.build_preset("tiny", device="cpu", dtype=torch.float32)
    before = {k: v.clone() for k, v in host_model[0].state_dict().items()}
    loaded = {mode: bench.load("tiny", mode, torch.device("cpu"), torch.float32, 8, host_model=host_model)
              for mode in ("none", "int8")}
    after = host_model[0].state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    reference, quantized = (loaded[m].model.state_dict() for m in ("none", "int8"))
    shared = [k for k in before if k.startswith(("sam.", "vision_tower.", "mm_projector."))]
    assert shared and all(torch.equal(reference[k], before[k]) and torch.equal(quantized[k], before[k])
                          for k in shared)
    assert loaded["int8"].model is not loaded["none"].model is not host_model[0]


def test_eval_cli_takes_the_flag(tmp_path):
    from m2sa_core.data.synthetic import main as synth_main
    from training.evaluate import main as eval_main

    synth = tmp_path / "data"
    synth_main(["--out", str(synth), "--images", "10", "--seed", "5", "--quiet"])
    data = str(synth / "MMR_test_mixed.json")
    out = tmp_path / "eval.json"
    assert eval_main(["--model", str(SHIPPED_MODEL), "--data", data, "--image-root", str(synth / "images"),
                      "--out", str(out), "--device", "cpu", "--max-items", "2", "--max-new-tokens", "16",
                      "--quantization", "int8"]) == 0
    assert out.is_file()
    with pytest.raises(SystemExit):
        eval_main(["--model", str(SHIPPED_MODEL), "--data", data, "--out", str(out), "--quantization", "int5"])


def test_node_parameter_loads_the_language_model_quantized():
    """The node's ``quantization`` parameter reaches Segmenter.from_pretrained (the node's own factory)."""
    pytest.importorskip("rclpy")
    from m2sa_core.model.quantization import MODES
    from m2sa_ros.model.model_source import resolve_model_source
    from m2sa_ros.params.node_params import ParameterError, PARAMETERS, QUANTIZATIONS, validate
    from m2sa_ros.perception_node import load_segmenter

    assert QUANTIZATIONS == MODES
    defaults = {spec.name: spec.default for spec in PARAMETERS}
    params = validate({**defaults, "quantization": "int8"})
    seg = load_segmenter(params, resolve_model_source(str(SHIPPED_MODEL), ""))
    assert all(is_quantized(layer) for _, layer in language_model_linears(seg.model))
    with pytest.raises(ParameterError, match="quantization='int3': must be one of"):
        validate({**defaults, "quantization": "int3"})
