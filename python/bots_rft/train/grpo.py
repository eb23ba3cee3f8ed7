"""GRPO's arithmetic, free of models and data: group-normalised advantages, per-token log-probs,
the clipped surrogate loss with an optional k3 KL term, and its diagnostics."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..llm.models import compute_float

__all__ = ["group_advantages", "token_logprobs", "LossStats", "grpo_loss"]


def group_advantages(rewards: torch.Tensor, eps: float = 1e-6, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``[B, n]`` rewards -> ``[B, n]`` advantages ``(r - mean_g) / (std_g + eps)`` per group
    (task), with the unbiased std as verl's GRPO, computed in ``dtype`` (the policy's loss
    precision). A group whose rewards are all equal carries no signal: its advantages are
    exactly 0 (also when n == 1)."""
    if rewards.ndim != 2:
        raise ValueError(f"rewards: expected shape [B, n], got {tuple(rewards.shape)}")
    r = rewards.to(dtype)
    mean = r.mean(dim=1, keepdim=True)
    if r.shape[1] < 2:
        return torch.zeros_like(r)
    std = r.std(dim=1, keepdim=True, unbiased=True)
    adv = (r - mean) / (std + eps)
    return torch.where(std > 0, adv, torch.zeros_like(adv))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each ``targets[b, t]`` under ``logits[b, t]`` (already aligned: the
    logits that predicted the token), at the sampling temperature, in float32 (float64 logits stay
    float64)."""
    logits = compute_float(logits)
    if temperature != 1.0:
        logits = logits / temperature
    # logsumexp + gather: never materialises the full [B, T, V] log-softmax twice.
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)


@dataclass
class LossStats:
    """Diagnostics of one loss evaluation (floats, detached)."""

    pg_loss: float
    kl: float
    clip_frac: float
    ratio_mean: float
    tokens: int


def _aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, denom: float | None) -> torch.Tensor:
    if mode == "token-mean":
        total = denom if denom is not None else mask.sum().clamp(min=1.0)
        return (values * mask).sum() / total
    if mode == "seq-mean-token-mean":
        per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / (denom if denom is not None else max(values.shape[0], 1))
    raise ValueError(f"loss_agg: unknown mode {mode!r}")


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps: float = 0.2,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    loss_agg: str = "token-mean",
    denom: float | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The clipped surrogate ``-min(ρA, clip(ρ, 1-ε, 1+ε)A)`` per completion token with
    ``ρ = exp(logp - old_logp)`` (old = the generation policy), plus ``kl_coef`` times the k3
    estimator of KL(π || π_ref) when ``ref_logp`` is given, aggregated over ``mask``.

    ``logp``, ``old_logp``, ``ref_logp``, ``mask``: ``[S, T]``; ``advantages``: ``[S]`` (one per
    sequence, broadcast over its tokens). ``denom`` fixes the normaliser (tokens for token-mean,
    sequences for seq-mean-token-mean) when a mini-batch is split into micro-batches, so that the
    accumulated gradient equals that of the whole mini-batch.
    """
    mask = mask.to(logp.dtype)
    adv = advantages.to(logp.dtype).unsqueeze(-1)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv
    per_token = -torch.minimum(unclipped, clipped)
    pg = _aggregate(per_token, mask, loss_agg, denom)
    loss = pg
    kl_value = torch.zeros((), dtype=logp.dtype, device=logp.device)
    if ref_logp is not None and kl_coef > 0:
        d = ref_logp - logp
        kl_tok = torch.exp(d) - d - 1.0  # k3: unbiased, non-negative
        kl_value = _aggregate(kl_tok, mask, loss_agg, denom)
        loss = loss + kl_coef * kl_value
    with torch.no_grad():
        n_tok = mask.sum().clamp(min=1.0)
        clip_frac = (((ratio - 1.0).abs() > clip_eps).to(logp.dtype) * mask).sum() / n_tok
        ratio_mean = (ratio * mask).sum() / n_tok
    stats = LossStats(
        pg_loss=float(pg.detach()),
        kl=float(kl_value.detach()),
        clip_frac=float(clip_frac),
        ratio_mean=float(ratio_mean),
        tokens=int(mask.sum().item()),
    )
    return loss, stats
