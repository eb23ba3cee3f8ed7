"""Sampling ``n`` completions for each of a batch of prompts with a hand-written decode loop over a
causal LM's KV cache: the fast rollout engine (``rollout_engine: fast``).

What it saves over calling ``generate`` on ``tasks * n`` left-padded rows:

- the prompt is encoded once, not ``n`` times: the prompts' longest common token prefix (the
  system prompt, the chat template's opening) is run once at batch 1, each task's remainder once
  at batch ``tasks``, and the KV cache is then repeated ``n`` times per task;
- rows that have finished (EOS) leave the batch, so the decode steps shrink as answers end;
- no logits processors, stopping criteria or per-step bookkeeping beyond the sampling itself;
- on a CPU, Llama-style models run a written-out forward pass over packed weights
  (:class:`~bots_rft.llm.decoders.LeanDecoder`); others run their Hugging Face module.

Sampling is the distribution ``generate`` samples with ``do_sample=True, top_k=0``:
``softmax(logits / temperature)``, restricted to the top-p nucleus when ``top_p < 1``, drawn
with torch's global RNG; ``greedy`` takes the argmax. The rows'
attention masks and position ids are those of left-padded prompts, so the log-probs a training
forward pass computes for the sampled tokens are those of the policy that sampled them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .decoders import HFDecoder, decoder_for
from .kv_cache import prompt_layout, shared_prefix_len
from .models import compute_float

__all__ = ["sample_completions", "sample_next", "next_token_probs", "draw_from", "shared_prefix_len"]


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
    return draw_from(next_token_probs(logits, temperature=temperature, top_p=top_p))


def draw_from(weights: torch.Tensor) -> torch.Tensor:
    """One index per row of non-negative ``weights`` ``[rows, vocab]`` (need not sum to 1), drawn
    with probability proportional to its weight by inverting the cumulative sum at one uniform
    number from torch's global RNG."""
    cdf = weights.double().cumsum(dim=-1)
    u = torch.rand((weights.shape[0], 1), dtype=torch.float64, device=weights.device) * cdf[:, -1:]
    # The first index whose cumulative mass exceeds u: never an index of weight 0.
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=weights.shape[1] - 1)


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
    copy_weights: bool = True,
) -> Any:
    """``[len(prompts) * n, T]`` completion tokens (rows task-major: prompt i's are rows
    ``i*n .. i*n+n-1``), each up to and including its first EOS, ``pad_id`` after it; ``T`` is
    the longest completion (at most ``max_new_tokens``). ``prompts`` are token ids without
    padding. Call it under ``torch.inference_mode()`` with the model in eval mode.

    Finished rows are dropped from the KV cache once they make up ``compact_fraction`` of the
    rows still decoding (dropping costs a copy of the cache; 0 drops them every step).
    ``copy_weights=False`` decodes with the module itself, never a packed copy of its weights
    (FSDP's gathered weights exist only for the call).

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
    decoder = decoder_for(model) if copy_weights else HFDecoder(model)
    layout = prompt_layout(prompts, pad_id=pad_id, device=device)
    logits = decoder.start(layout, n, capacity=max(len(p) for p in prompts) + max_new_tokens)
    attn = layout.mask.repeat_interleave(n, dim=0)
    rows = torch.arange(tasks * n, device=device)  # the output row of each cache row
    next_pos = attn.sum(-1, keepdim=True)  # [rows, 1]: the next token's position
    finished = torch.zeros(tasks * n, dtype=torch.bool, device=device)
    out = torch.full((tasks * n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    out_logp = torch.zeros((tasks * n, max_new_tokens), dtype=logits.dtype, device=device) if return_logprobs else None
    steps = 0
    # Decode.
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
            decoder.keep_rows(keep)
            rows, attn, next_pos, tok, finished = rows[keep], attn[keep], next_pos[keep], tok[keep], finished[keep]
        attn = torch.cat([attn, torch.ones((attn.shape[0], 1), dtype=attn.dtype, device=device)], dim=1)
        logits = decoder.logits(tok.unsqueeze(1), attn, next_pos)[:, -1]
        next_pos = next_pos + 1
    if out_logp is not None:
        return out[:, :steps], out_logp[:, :steps]
    return out[:, :steps]
