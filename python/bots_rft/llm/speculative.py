"""Speculative sampling with a bfloat16 draft of the model: the same distribution as sampling the
model token by token, in fewer passes over its weights (``rollout_engine: speculative``).

Decoding a few dozen rows of a small model on a CPU is bound by reading the weights from memory:
every step streams all of them (540 MB for SmolLM2-135M in float32) to produce one token per row,
and a forward pass over five tokens per row costs well under five single-token passes. So a draft
(the same model with bfloat16 weights: half the bytes, and fast matrix instructions where the CPU
has them) proposes ``lookahead`` tokens per row one at a time, the model scores all of them in one
pass, and the standard rejection step (Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding"; Chen et al. 2023) keeps proposal ``d`` with probability
``min(1, p(d) / q(d))`` and replaces the first rejected one by a draw from ``max(0, p - q)``
renormalised (after ``lookahead`` acceptances, one more token is drawn from ``p``). Every token the
loop returns is then distributed exactly as a draw from the model's own ``p`` (temperature and
top-p applied as :func:`next_token_probs` applies them), whatever the draft proposes: the draft
decides only how many tokens a pass yields. Greedy decoding keeps a proposal when it is the
model's argmax, so it yields the model's greedy tokens.

The KV caches of both models hold one position per token fed; a rejected proposal's position
stays in the cache and is masked out of attention (the attention mask covers cache positions,
the position ids count only accepted tokens), so rows that accept different numbers of tokens
share one batch without copying the cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .decoders import Decoder, decoder_for
from .generation import draw_from, next_token_probs
from .kv_cache import prompt_layout

__all__ = ["bf16_draft", "sample_completions_speculative", "accept_proposals", "DEFAULT_LOOKAHEAD"]

#: Tokens the draft proposes per pass of the model (at a draft acceptance of ~98%, as bfloat16
#: SmolLM2 against float32, four proposals yield ~4.9 tokens a pass).
DEFAULT_LOOKAHEAD = 4


def bf16_draft(model: Any) -> Decoder:
    """The draft of ``model``: the model with bfloat16 weights (see :func:`.decoders.decoder_for`;
    kept until the model's weights change)."""
    return decoder_for(model, torch.bfloat16)


def accept_proposals(p: torch.Tensor, q: torch.Tensor, proposals: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The rejection step. ``p``: the model's probabilities ``[rows, k + 1, vocab]`` after the last
    accepted token and after each of the ``k`` proposals; ``q``: the draft's ``[rows, k, vocab]``
    from which ``proposals`` ``[rows, k]`` were drawn. Returns ``(accepted, token)``: how many
    leading proposals each row keeps (0..k) and the token that follows them, drawn from
    ``max(0, p - q)`` renormalised at the first rejected position, or from ``p`` after ``k``
    acceptances. Each kept or drawn token is distributed as a draw from ``p`` at its position."""
    rows, k, vocab = q.shape
    p_d = p[:, :k].gather(2, proposals.unsqueeze(2)).squeeze(2).double()
    q_d = q.gather(2, proposals.unsqueeze(2)).squeeze(2).double()
    u = torch.rand((rows, k), dtype=torch.float64, device=p.device)
    keep = u * q_d < p_d  # u < p(d) / q(d); q(d) > 0 since d was drawn from q
    accepted = keep.long().cumprod(dim=1).sum(dim=1)
    at = accepted.view(rows, 1, 1).expand(rows, 1, vocab)
    p_at = p.gather(1, at).squeeze(1).double()
    q_at = q.gather(1, at.clamp(max=k - 1)).squeeze(1).double() * (accepted < k).unsqueeze(1)
    residual = (p_at - q_at).clamp_(min=0)
    # A rejection has probability sum(max(0, q - p)) = sum(max(0, p - q)), so a residual of mass 0
    # is never drawn from; guard against rounding all the same.
    empty = residual.sum(dim=1, keepdim=True) <= 0
    residual = torch.where(empty, p_at, residual)
    return accepted, draw_from(residual)


def sample_completions_speculative(
    model: Any,
    draft: Decoder,
    prompts: Sequence[Sequence[int]],
    n: int,
    *,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    greedy: bool = False,
    temperature: float = 1.0,
    top_p: float = 1.0,
    lookahead: int = DEFAULT_LOOKAHEAD,
    compact_fraction: float = 0.125,
    return_logprobs: bool = False,
) -> Any:
    """What :func:`~bots_rft.llm.generation.sample_completions` returns (``[len(prompts) * n, T]``
    completion tokens, rows task-major, each up to and including its first EOS, then ``pad_id``;
    with ``return_logprobs`` also their log-probabilities under the model's
    ``softmax(logits / temperature)``), sampled from the same distribution, with ``draft``
    proposing ``lookahead`` tokens per pass of ``model`` (:func:`bf16_draft` of it). Call it under ``torch.inference_mode()`` with the model in eval mode."""
    if n < 1 or max_new_tokens < 1 or lookahead < 1 or not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError(
            f"sample_completions_speculative: needs n >= 1, max_new_tokens >= 1, lookahead >= 1 and non-empty "
            f"prompts, got n={n}, max_new_tokens={max_new_tokens}, lookahead={lookahead}, "
            f"prompt lengths {[len(p) for p in prompts]}"
        )
    device = next(model.parameters()).device
    k = lookahead
    total = len(prompts) * n
    eos = torch.tensor(list(eos_ids), dtype=torch.long, device=device)
    # a position per token, plus the rejected proposals' (about one a pass); the caches grow if needed
    capacity = max(len(p) for p in prompts) + max_new_tokens + max_new_tokens // 2 + k + 1
    layout = prompt_layout(prompts, pad_id=pad_id, device=device)
    target = decoder_for(model)
    logits = target.start(layout, n, capacity=capacity)
    draft.start(layout, n, capacity=capacity)
    valid = layout.mask.repeat_interleave(n, dim=0)

    out = torch.full((total, max_new_tokens), pad_id, dtype=torch.long, device=device)
    out_logp = torch.zeros((total, max_new_tokens), dtype=logits.dtype, device=device) if return_logprobs else None
    written = torch.zeros(total, dtype=torch.long, device=device)  # tokens written per output row

    def emit(
        rows: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor, scores: torch.Tensor, live: torch.Tensor
    ) -> torch.Tensor:
        """Write each live row's first ``lengths`` ``tokens`` (cut after the first EOS and at
        ``max_new_tokens``); ``scores[:, j]`` are the model's logits token j was drawn from.
        Returns which rows have finished."""
        width = tokens.shape[1]
        idx = torch.arange(width, device=device)
        is_eos = torch.isin(tokens, eos) & (idx < lengths.unsqueeze(1))
        hit = is_eos.any(dim=1)
        until_eos = torch.where(hit, is_eos.long().argmax(dim=1) + 1, lengths)
        room = max_new_tokens - written[rows]
        take = torch.minimum(until_eos, room) * live
        for j in range(width):
            sel = take > j
            if not bool(sel.any()):
                break
            dest, col = rows[sel], written[rows[sel]] + j
            out[dest, col] = tokens[sel, j]
            if out_logp is not None:
                logp = torch.log_softmax(scores[sel, j] / temperature, dim=-1)
                out_logp[dest, col] = logp.gather(1, tokens[sel, j].unsqueeze(1)).squeeze(1)
        written[rows] += take
        return (hit & (until_eos <= room)) | (written[rows] >= max_new_tokens)

    rows = torch.arange(total, device=device)  # the output row of each cache row
    first = (
        logits.argmax(dim=-1) if greedy else draw_from(next_token_probs(logits, temperature=temperature, top_p=top_p))
    )
    finished = emit(rows, first.unsqueeze(1), torch.ones_like(rows), logits.unsqueeze(1), torch.ones_like(rows))
    tok = first  # each row's last token, not yet fed to either model
    next_pos = valid.sum(dim=-1)  # its position
    pending: torch.Tensor | None = None  # the draft's last proposal, not yet fed to the draft
    while not bool(finished.all()):
        done = int(finished.sum())
        if done and done >= compact_fraction * finished.numel():
            keep = (~finished).nonzero().squeeze(1)
            target.keep_rows(keep)
            draft.keep_rows(keep)
            rows, valid, next_pos, tok, finished = rows[keep], valid[keep], next_pos[keep], tok[keep], finished[keep]
            pending = None if pending is None else pending[keep]
        live = (~finished).long()
        base = valid.shape[1]  # the model's cache length: ``tok`` goes to position index ``base``
        valid = torch.cat([valid, torch.ones((valid.shape[0], k + 1), dtype=valid.dtype, device=device)], dim=1)
        # The draft proposes k tokens. Its cache lacks the previous pass's last proposal (masked
        # out if it was rejected), which it is fed first, together with ``tok``.
        if pending is None:
            ids, pos = tok.unsqueeze(1), next_pos.unsqueeze(1)
        else:
            ids, pos = torch.stack([pending, tok], dim=1), torch.stack([(next_pos - 1).clamp(min=0), next_pos], dim=1)
        proposals: list[torch.Tensor] = []
        q: list[torch.Tensor] = []
        for j in range(k):
            if j:
                ids, pos = proposals[-1].unsqueeze(1), (next_pos + j).unsqueeze(1)
            draft_logits = draft.logits(ids, valid[:, : base + 1 + j], pos)[:, -1]
            if greedy:
                proposals.append(draft_logits.argmax(dim=-1))
            else:
                q.append(next_token_probs(draft_logits, temperature=temperature, top_p=top_p))
                proposals.append(draw_from(q[-1]))
        drafted = torch.stack(proposals, dim=1)  # [rows, k]
        # The model scores ``tok`` and the k proposals in one pass.
        ids = torch.cat([tok.unsqueeze(1), drafted], dim=1)
        scores = target.logits(ids, valid, next_pos.unsqueeze(1) + torch.arange(k + 1, device=device), keep=k + 1)
        if greedy:
            best = scores.argmax(dim=-1)
            accepted = (best[:, :k] == drafted).long().cumprod(dim=1).sum(dim=1)
            new = best.gather(1, accepted.unsqueeze(1)).squeeze(1)
        else:
            width = scores.shape[0] * (k + 1)
            p = next_token_probs(scores.reshape(width, -1), temperature=temperature, top_p=top_p)
            accepted, new = accept_proposals(p.view(scores.shape), torch.stack(q, dim=1).to(p.dtype), drafted)
        # Rejected proposals' positions are masked out of both caches from now on.
        valid[:, base + 1 :] = (torch.arange(k, device=device) < accepted.unsqueeze(1)).to(valid.dtype)
        tokens = torch.cat([drafted, drafted[:, :1]], dim=1).scatter(1, accepted.unsqueeze(1), new.unsqueeze(1))
        finished = finished | emit(rows, tokens, accepted + 1, scores, live)
        tok, next_pos, pending = new, next_pos + accepted + 1, drafted[:, -1]
    steps = int(written.max())
    if out_logp is not None:
        return out[:, :steps], out_logp[:, :steps]
    return out[:, :steps]
