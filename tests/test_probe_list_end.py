"""scripts/probe_list_end.py: the bias lowers the full stop only where it would close a list of targets."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from m2sa_core.model.decoding import DynamicDecoder

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "probe_list_end.py"
SEG = 7


def _probe_module():
    spec = importlib.util.spec_from_file_location("probe_list_end", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _llm() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    return LlamaForCausalLM(config).eval()


def _next_after(decoder: DynamicDecoder, llm: LlamaForCausalLM, prompt: torch.Tensor, fed: int) -> int:
    embeds = llm.get_input_embeddings()(prompt)
    decoder.prefill(embeds, torch.ones(prompt.shape, dtype=torch.long))
    return int(decoder.step(torch.tensor([fed]))[1])


def test_the_bias_changes_the_choice_after_seg_and_nowhere_else():
    llm = _llm()
    prompt = torch.tensor([[1, 2, 3]])
    plain_after_seg = _next_after(DynamicDecoder(llm), llm, prompt, SEG)
    plain_after_word = _next_after(DynamicDecoder(llm), llm, prompt, 4)
    probe = _probe_module()

    # The token the plain decoder would emit after [SEG] plays the full stop: a large bias
    # must move the greedy choice off it there ...
    biased = probe.list_end_decoder(SEG, plain_after_seg, bias=1e4)
    with torch.no_grad():
        assert _next_after(biased(llm), llm, prompt, SEG) != plain_after_seg
        # ... and leave every other position's choice as it was.
        other = probe.list_end_decoder(SEG, plain_after_word, bias=1e4)
        assert _next_after(other(llm), llm, prompt, 4) == plain_after_word
        # No bias: the plain decoder's choice.
        assert _next_after(probe.list_end_decoder(SEG, plain_after_seg, bias=0.0)(llm), llm, prompt, SEG) \
            == plain_after_seg
