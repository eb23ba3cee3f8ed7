"""The KV cache of the decode loops (:mod:`.generation`, :mod:`.speculative`) for a Hugging Face
causal LM: how a batch of prompts is laid out in cache positions (their common prefix once, each
remainder left padded), a cache written in place into buffers reserved for the whole generation,
and the cached forward passes over it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from .models import compute_float

__all__ = ["shared_prefix_len", "PromptLayout", "prompt_layout", "prefill", "reserved_cache", "forward_logits"]


def shared_prefix_len(prompts: Sequence[Sequence[int]]) -> int:
    """The length of the longest token prefix every prompt starts with."""
    if not prompts:
        return 0
    first = prompts[0]
    limit = min(len(p) for p in prompts)
    for i in range(limit):
        tok = first[i]
        if any(p[i] != tok for p in prompts):
            return i
    return limit


def _reserved_layer_class() -> Any:
    from transformers.cache_utils import DynamicLayer

    class ReservedLayer(DynamicLayer):  # type: ignore[misc]
        """One layer's KV cache written in place into buffers reserved for the whole generation:
        a decode step appends its token without re-allocating and copying the layer's cache, as
        ``DynamicLayer``'s ``torch.cat`` does (on CPU that copy, a fresh multi-megabyte buffer
        per layer and step, took most of a decode step). ``keys``/``values`` are views of the
        filled part."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self.capacity = capacity
            self.length = 0

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
            self.dtype, self.device = key_states.dtype, key_states.device
            self._k = key_states.new_empty((*key_states.shape[:2], self.capacity, key_states.shape[-1]))
            self._v = value_states.new_empty((*value_states.shape[:2], self.capacity, value_states.shape[-1]))
            self.length = 0
            self.is_initialized = True
            self._expose()

        def _expose(self) -> tuple[torch.Tensor, torch.Tensor]:
            keys, values = self._k[:, :, : self.length], self._v[:, :, : self.length]
            self.keys, self.values = keys, values
            return keys, values

        def _rebuild(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
            """New buffers of ``capacity`` positions holding ``keys``/``values``."""
            self.capacity = capacity
            self._k = keys.new_empty((*keys.shape[:2], capacity, keys.shape[-1]))
            self._v = values.new_empty((*values.shape[:2], capacity, values.shape[-1]))
            self._k[:, :, : self.length] = keys
            self._v[:, :, : self.length] = values
            self._expose()

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            end = self.length + key_states.shape[-2]
            if end > self.capacity:
                self._rebuild(*self._expose(), max(end, 2 * self.capacity))
            self._k[:, :, self.length : end] = key_states
            self._v[:, :, self.length : end] = value_states
            self.length = end
            return self._expose()

        def get_seq_length(self) -> int:
            return self.length if self.is_initialized else 0

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove > 0:
                raise ValueError(f"crop: expected a number of tokens <= 0 to remove, got {tokens_to_remove}")
            if self.is_initialized:
                self.length = max(0, self.length + tokens_to_remove)
                self._expose()

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.is_initialized:
                keys, values = self._expose()
                self._rebuild(keys.repeat_interleave(repeats, 0), values.repeat_interleave(repeats, 0), self.capacity)

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self.is_initialized:  # one copy of the selected rows' buffers
                self._k, self._v = self._k[indices], self._v[indices]
                self._expose()

    return ReservedLayer


def reserved_cache(model: Any, capacity: int) -> Any:
    """A ``DynamicCache`` for ``model`` whose full-attention layers reserve ``capacity``
    positions up front (sliding-window layers, if any, keep their own kind)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=model.config)
    reserved = _reserved_layer_class()
    cache.layers = [reserved(capacity) if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def _cache_kw(model: Any, cache: Any) -> dict[str, Any]:
    """The KV cache as the model's forward names it: ``cache`` in transformers releases that
    renamed it (5.24 warns that ``past_key_values`` goes away in 5.40), ``past_key_values`` before."""
    model_class: Any = type(model)
    return {_cache_parameter(model_class): cache}


@functools.cache
def _cache_parameter(model_class: Any) -> str:
    """Read once per model class, not at every decode step."""
    import inspect

    try:
        takes_cache = "cache" in inspect.signature(model_class.forward).parameters
    except (AttributeError, TypeError, ValueError):
        takes_cache = False
    return "cache" if takes_cache else "past_key_values"


def _forward(model: Any, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, cache: Any) -> torch.Tensor:
    """Last-position logits ``[rows, vocab]`` (float32, or float64 for a float64 model) of one cached
    forward pass."""
    return forward_logits(model, ids, attn, pos, cache, keep=1)[:, -1, :]


def forward_logits(
    model: Any, ids: torch.Tensor, attn: torch.Tensor, pos: torch.Tensor, cache: Any, *, keep: int
) -> torch.Tensor:
    """The logits ``[rows, keep, vocab]`` of the last ``keep`` positions of ``ids`` (float32, or
    float64 for a float64 model), from one forward pass that appends ``ids`` to ``cache``."""
    out = model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=pos,
        use_cache=True,
        logits_to_keep=keep,
        **_cache_kw(model, cache),
    )
    return compute_float(out.logits[:, -keep:, :])


class PromptLayout(NamedTuple):
    """How a batch of prompts is laid out in cache positions: their common prefix once (at least
    one token of each prompt is left after it), then each prompt's remainder left padded."""

    prefix: torch.Tensor  # [1, shared] the common prefix's token ids
    rest: torch.Tensor  # [tasks, width] each remainder, left padded
    mask: torch.Tensor  # [tasks, shared + width] attention mask over the cache positions
    rest_positions: torch.Tensor  # [tasks, width] position ids of the remainders (padding skipped)

    @property
    def shared(self) -> int:
        return int(self.prefix.shape[1])


def prompt_layout(prompts: Sequence[Sequence[int]], *, pad_id: int, device: torch.device) -> PromptLayout:
    """The :class:`PromptLayout` of ``prompts`` (token ids without padding)."""
    tasks = len(prompts)
    shared = min(shared_prefix_len(prompts), min(len(p) for p in prompts) - 1)
    rest = [list(p[shared:]) for p in prompts]
    width = max(len(r) for r in rest)
    ids = torch.full((tasks, width), pad_id, dtype=torch.long, device=device)
    rest_mask = torch.zeros((tasks, width), dtype=torch.long, device=device)
    for i, r in enumerate(rest):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long, device=device)
        rest_mask[i, width - len(r) :] = 1
    return PromptLayout(
        prefix=torch.tensor([list(prompts[0][:shared])], dtype=torch.long, device=device),
        rest=ids,
        mask=torch.cat([torch.ones((tasks, shared), dtype=torch.long, device=device), rest_mask], dim=1),
        rest_positions=(shared + rest_mask.cumsum(-1) - 1).clamp(min=0),
    )


def prefill(model: Any, layout: PromptLayout, n: int, cache: Any) -> torch.Tensor:
    """Encode the prompts of ``layout`` into ``cache`` and repeat each ``n`` times (rows
    task-major): the last prompt position's logits ``[tasks * n, vocab]``. The common prefix is
    run once at batch 1, each remainder once (the padding between prefix and remainder is masked
    out and skipped by the position ids, as a left-padded prompt's padding is)."""
    tasks = layout.rest.shape[0]
    if layout.shared > 0:
        model(input_ids=layout.prefix, use_cache=True, logits_to_keep=1, **_cache_kw(model, cache))
        if tasks > 1:
            cache.batch_repeat_interleave(tasks)
    logits = _forward(model, layout.rest, layout.mask, layout.rest_positions, cache)
    if n > 1:
        cache.batch_repeat_interleave(n)
        logits = logits.repeat_interleave(n, dim=0)
    return logits
