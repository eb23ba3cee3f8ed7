"""Sampling ``n`` completions for each of a batch of prompts with a hand-written decode loop over a
Hugging Face causal LM's KV cache: the fast rollout engine (``rollout_engine: fast``).

What it saves over calling ``generate`` on ``tasks * n`` left-padded rows:

- the prompt is encoded once, not ``n`` times: the prompts' longest common token prefix (the
  system prompt, the chat template's opening) is run once at batch 1, each task's remainder once
  at batch ``tasks``, and the KV cache is then repeated ``n`` times per task;
- rows that have finished (EOS) leave the batch, so the decode steps shrink as answers end;
- no logits processors, stopping criteria or per-step bookkeeping beyond the sampling itself.

Sampling is the distribution ``generate`` samples with ``do_sample=True, top_k=0``:
``softmax(logits / temperature)``, restricted to the top-p nucleus when ``top_p < 1``, drawn
with torch's global RNG; ``greedy`` takes the argmax. The rows'
attention masks and position ids are those of left-padded prompts, so the log-probs a training
forward pass computes for the sampled tokens are those of the policy that sampled them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from .models import compute_float

__all__ = ["sample_completions", "sample_next", "next_token_probs", "shared_prefix_len"]


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


def next_token_probs(logits: torch.Tensor, *, temperature: float, top_p: float) -> torch.Tensor:
    """``[rows, vocab]`` float32 (float64 for float64 logits) probabilities ``generate`` samples from (``do_sample=True,
    top_k=0``): ``softmax(logits / temperature)`` restricted to the top-p nucleus (the most
    probable tokens whose mass reaches ``top_p``; at least one) and renormalised."""
    scores = compute_float(logits)
    if temperature != 1.0:
        scores = scores / temperature
    if top_p < 1.0:
        # Hugging Face's rule, on an ascending sort: drop the tail whose mass is <= 1 - top_p.
        sorted_scores, order = torch.sort(scores, descending=False)
        cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1.0 - top_p)
        remove_sorted[..., -1:] = False
        remove = remove_sorted.scatter(1, order, remove_sorted)
        scores = scores.masked_fill(remove, float("-inf"))
    return torch.softmax(scores, dim=-1)


def sample_next(logits: torch.Tensor, *, greedy: bool, temperature: float, top_p: float) -> torch.Tensor:
    """``[rows]`` next tokens from ``[rows, vocab]`` logits: the argmax when ``greedy``, else one
    draw per row from :func:`next_token_probs` by inverting its cumulative distribution at a
    uniform number from torch's global RNG. (``torch.multinomial`` draws an exponential number
    per vocabulary entry: for 32 rows of a 49k vocabulary that was 15% of a CPU rollout.)"""
    if greedy:
        return logits.argmax(dim=-1)
    probs = next_token_probs(logits, temperature=temperature, top_p=top_p)
    cdf = probs.double().cumsum(dim=-1)
    u = torch.rand((probs.shape[0], 1), dtype=torch.float64, device=probs.device) * cdf[:, -1:]
    # The first index whose cumulative mass exceeds u: never a zero-probability token.
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=probs.shape[1] - 1)


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
            if self.is_initialized:
                keys, values = self._expose()
                self._rebuild(keys[indices], values[indices], self.capacity)

    return ReservedLayer


def _reserved_cache(model: Any, capacity: int) -> Any:
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
    out = model(
        input_ids=ids,
        attention_mask=attn,
        position_ids=pos,
        use_cache=True,
        logits_to_keep=1,
        **_cache_kw(model, cache),
    )
    return compute_float(out.logits[:, -1, :])


def sample_completions(
    model: Any,
    prompts: Sequence[Sequence[int]],
    n: int,
    *,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    greedy: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    compact_fraction: float = 0.125,
    return_logprobs: bool = False,
) -> Any:
    """``[len(prompts) * n, T]`` completion tokens (rows task-major: prompt i's are rows
    ``i*n .. i*n+n-1``), each up to and including its first EOS, ``pad_id`` after it; ``T`` is
    the longest completion (at most ``max_new_tokens``). ``prompts`` are token ids without
    padding. Call it under ``torch.inference_mode()`` with the model in eval mode.

    Finished rows are dropped from the KV cache once they make up ``compact_fraction`` of the
    rows still decoding (dropping costs a copy of the cache; 0 drops them every step).

    With ``return_logprobs`` the result is ``(tokens, logprobs)``: ``logprobs[r, t]`` is the
    log-probability of token ``tokens[r, t]`` under ``softmax(logits / temperature)`` as the
    decode loop computed it (0 on padding), what the loss's forward pass recomputes."""
    if n < 1 or max_new_tokens < 1 or not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError(
            f"sample_completions: needs n >= 1, max_new_tokens >= 1 and non-empty prompts, got n={n}, "
            f"max_new_tokens={max_new_tokens}, prompt lengths {[len(p) for p in prompts]}"
        )
    device = next(model.parameters()).device
    tasks = len(prompts)
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    cache = _reserved_cache(model, max(len(p) for p in prompts) + max_new_tokens)

    # 1. The shared prefix, once (at least one token of each prompt is left for step 2, which
    #    must produce each prompt's last-position logits).
    shared = min(shared_prefix_len(prompts), min(len(p) for p in prompts) - 1)
    if shared > 0:
        prefix = torch.tensor([list(prompts[0][:shared])], dtype=torch.long, device=device)
        model(input_ids=prefix, use_cache=True, logits_to_keep=1, **_cache_kw(model, cache))
        if tasks > 1:
            cache.batch_repeat_interleave(tasks)
    # 2. Each prompt's remainder, left padded (padding between the prefix and the remainder is
    #    masked out, and the position ids skip it, as they skip a left-padded prompt's padding).
    rest = [list(p[shared:]) for p in prompts]
    width = max(len(r) for r in rest)
    ids = torch.full((tasks, width), pad_id, dtype=torch.long, device=device)
    rest_mask = torch.zeros((tasks, width), dtype=torch.long, device=device)
    for i, r in enumerate(rest):
        ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long, device=device)
        rest_mask[i, width - len(r) :] = 1
    attn = torch.cat([torch.ones((tasks, shared), dtype=torch.long, device=device), rest_mask], dim=1)
    pos = (shared + rest_mask.cumsum(-1) - 1).clamp(min=0)
    logits = _forward(model, ids, attn, pos, cache)
    # 3. n rows per prompt.
    if n > 1:
        cache.batch_repeat_interleave(n)
        logits = logits.repeat_interleave(n, dim=0)
        attn = attn.repeat_interleave(n, dim=0)
    rows = torch.arange(tasks * n, device=device)  # the output row of each cache row
    next_pos = attn.sum(-1, keepdim=True)  # [rows, 1]: the next token's position
    finished = torch.zeros(tasks * n, dtype=torch.bool, device=device)
    out = torch.full((tasks * n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    out_logp = torch.zeros((tasks * n, max_new_tokens), dtype=logits.dtype, device=device) if return_logprobs else None
    steps = 0
    # 4. Decode.
    for t in range(max_new_tokens):
        tok = sample_next(logits, greedy=greedy, temperature=temperature, top_p=top_p)
        live = ~finished
        out[rows[live], t] = tok[live]
        if out_logp is not None:
            logp = torch.log_softmax(logits / temperature, dim=-1).gather(1, tok.unsqueeze(1)).squeeze(1)
            out_logp[rows[live], t] = logp[live]
        steps = t + 1
        finished = finished | torch.isin(tok, eos)
        done = int(finished.sum())
        if done == finished.numel() or t == max_new_tokens - 1:
            break
        if done and done >= compact_fraction * finished.numel():
            keep = (~finished).nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            rows, attn, next_pos, tok, finished = rows[keep], attn[keep], next_pos[keep], tok[keep], finished[keep]
        attn = torch.cat([attn, torch.ones((attn.shape[0], 1), dtype=attn.dtype, device=device)], dim=1)
        logits = _forward(model, tok.unsqueeze(1), attn, next_pos, cache)
        next_pos = next_pos + 1
    if out_logp is not None:
        return out[:, :steps], out_logp[:, :steps]
    return out[:, :steps]
