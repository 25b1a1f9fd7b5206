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
Incremental decoders for greedy generation: a dynamic KV cache, or a static one with CUDA graphs.

Both expose ``prefill(embeds, attention)`` and ``step(ids)``, each returning the last
hidden state and its argmax token, so the generation loop does not care which is used.
On a GPU the per-token cost of a 7B model in eager PyTorch is dominated by launching ~30
small kernels per layer from Python, not by reading the weights; the static decoder
keeps every tensor of the decode step at a fixed address (static KV cache, 4-D mask,
position, slot and input-id buffers updated in place on the device) so that the whole
step - embedding, transformer, lm_head and argmax - is captured once in a CUDA graph
and replayed per token with no host work in between.
"""

from __future__ import annotations

import warnings

import torch
from transformers import DynamicCache, LlamaForCausalLM, StaticCache


class DynamicDecoder:
    """transformers' DynamicCache; works everywhere, grows per token."""

    def __init__(self, llm: LlamaForCausalLM) -> None:
        self.llm = llm

    def prefill(self, embeds: torch.Tensor, attention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the (left-padded) prompts; ``attention`` is the 2-D padding mask."""
        self.attention = attention
        self.positions = (attention.cumsum(-1) - 1).clamp(min=0)
        self.cache = DynamicCache(config=self.llm.config)
        return self._run(embeds)

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed one token id per row ([B])."""
        self.attention = torch.cat([self.attention, self.attention.new_ones((self.attention.shape[0], 1))], dim=1)
        self.positions = self.positions[:, -1:] + 1
        return self._run(self.llm.get_input_embeddings()(ids[:, None]))

    def _run(self, embeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.llm.model(inputs_embeds=embeds, attention_mask=self.attention, position_ids=self.positions,
                             past_key_values=self.cache, use_cache=True)
        return _head(self.llm, out.last_hidden_state[:, -1])


class StaticDecoder:
    """
    Static KV cache of ``max_len`` slots for ``batch`` rows; the step optionally replayed as a CUDA graph.

    One instance serves many generations of the same (batch, max_len): the cache and the
    step's input buffers keep their addresses, so the graph is captured once and replayed
    for every later token and command. The masks are built here as 4-D boolean tensors
    (True = attend), which transformers passes through unchanged; a padded query position
    attends to itself so no attention row is empty (an empty row gives NaN, which would
    leak through the cache).
    """

    def __init__(self, llm: LlamaForCausalLM, batch: int, max_len: int, cuda_graph: bool) -> None:
        self.llm = llm
        self.batch = batch
        self.max_len = max_len
        self.cuda_graph = cuda_graph
        self.cache = StaticCache(config=llm.config, max_cache_len=max_len)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.mask: torch.Tensor | None = None

    def prefill(self, embeds: torch.Tensor, attention: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch, length, _ = embeds.shape
        if batch != self.batch or length >= self.max_len:
            raise ValueError(f"StaticDecoder for {self.batch} x {self.max_len} got {batch} x {length}")
        device = embeds.device
        self.cache.reset()
        valid = attention.bool()
        causal = torch.ones(length, length, dtype=torch.bool, device=device).tril()
        prompt_mask = torch.zeros(batch, 1, length, self.max_len, dtype=torch.bool, device=device)
        prompt_mask[:, 0, :, :length] = causal & valid[:, None, :]
        prompt_mask[:, 0, torch.arange(length), torch.arange(length)] = True
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = self.llm.model(inputs_embeds=embeds, attention_mask=prompt_mask, position_ids=positions,
                             past_key_values=self.cache, use_cache=True)
        if self.mask is None:  # buffers of the decode step, updated in place so a captured graph sees them
            self.mask = torch.zeros(batch, 1, 1, self.max_len, dtype=torch.bool, device=device)
            self.positions = torch.zeros(batch, 1, dtype=torch.long, device=device)
            self.slot = torch.zeros(1, dtype=torch.long, device=device)
            self.ids = torch.zeros(batch, 1, dtype=torch.long, device=device)
        self.mask.zero_()
        self.mask[:, 0, 0, :length] = valid
        self.positions.copy_(positions[:, -1:])
        self.slot.fill_(length)
        self.next_slot = length
        return _head(self.llm, out.last_hidden_state[:, -1])

    def step(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed one token id per row ([B]); no host synchronisation (the ids may still be in flight)."""
        if self.next_slot >= self.max_len:
            raise RuntimeError(f"static KV cache full ({self.max_len} slots)")
        self.next_slot += 1
        self.ids.copy_(ids[:, None])
        if not self.cuda_graph:
            return self._forward()
        if self.graph is None:
            try:
                self._capture()
            except RuntimeError as err:  # e.g. an op that syncs with the host inside the step
                warnings.warn(f"CUDA graph capture of the decode step failed, decoding eagerly: {err}",
                              stacklevel=2)
                self.cuda_graph = False
                return self._forward()
        self.graph.replay()
        return self.output

    def _forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One decode step, entirely on the device: the new slot, position and token come from buffers."""
        self.mask.index_fill_(3, self.slot, True)
        self.positions.add_(1)
        embeds = self.llm.get_input_embeddings()(self.ids)
        out = self.llm.model(inputs_embeds=embeds, attention_mask=self.mask, position_ids=self.positions,
                             past_key_values=self.cache, use_cache=True)
        self.slot.add_(1)
        return _head(self.llm, out.last_hidden_state[:, -1])

    def _state(self) -> list[torch.Tensor]:
        """Device counters a step advances (the cache's write positions, ours), rewound around capture."""
        return [layer.cumulative_length for layer in self.cache.layers] + [self.positions, self.slot]

    def _capture(self) -> None:
        """Warm up on a side stream (rewinding the counters), then capture one step."""
        saved = [c.clone() for c in self._state()]

        def rewind() -> None:
            for counter, value in zip(self._state(), saved):
                counter.copy_(value)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                self._forward()  # rewrites the same slot with the same token: idempotent once rewound
                rewind()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.output = self._forward()
        rewind()  # capture records, it does not run; the real step is the first replay
        self.graph = graph


def _head(llm: LlamaForCausalLM, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return the last hidden state and its greedy token."""
    return hidden, llm.lm_head(hidden).argmax(-1)


def static_length(prompt_length: int, max_new_tokens: int, bucket: int = 128) -> int:
    """Cache length rounded up to ``bucket`` so prompts of similar length share one decoder (and graph)."""
    need = prompt_length + max_new_tokens + 1
    return -(-need // bucket) * bucket
