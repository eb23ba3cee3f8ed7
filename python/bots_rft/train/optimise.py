"""The optimise stage of a GRPO step: a scored batch of rollouts in, updated weights and the
step's loss statistics out.

Group-normalised advantages; then ``ppo_epochs`` passes over mini-batches of tasks, each one
optimizer update of the clipped surrogate (plus the KL penalty when a reference model is
given) against the generation policy's log-probs, its gradient accumulated over micro-batches
of sequences, clipped by norm. Under data parallelism each rank optimises its share of the
batch and DDP/FSDP average the gradients."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .config import TrainConfig
from .distributed import Dist
from .grpo import group_advantages, grpo_loss
from .model import autocast, sequence_logprobs
from .rollout import Rollouts

__all__ = ["grpo_update"]


def _trim(
    ids: torch.Tensor, attn: torch.Tensor, cmask: torch.Tensor, plen: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Drop columns that are padding in every row of a micro-batch (left of the prompts, right
    of the completions): less compute, same log-probs."""
    first = int(attn[:, :plen].any(0).long().argmax()) if plen else 0
    used = cmask.any(0)
    last = int(used.nonzero().max()) + 1 if bool(used.any()) else 1
    return ids[:, first : plen + last], attn[:, first : plen + last], cmask[:, :last], plen - first


def _logprobs_nograd(model: Any, ro: Rollouts, cfg: TrainConfig, device: torch.device) -> torch.Tensor:
    """``[S, T]`` log-probs of the completions under ``model``, without a graph."""
    out = torch.zeros(ro.completion_mask.shape, dtype=torch.float32, device=device)
    mb = cfg.micro_batch_size
    with torch.no_grad():
        for s in range(0, ro.input_ids.shape[0], mb):
            sl = slice(s, s + mb)
            ids, attn, cm, plen = _trim(ro.input_ids[sl], ro.attention_mask[sl], ro.completion_mask[sl], ro.prompt_len)
            with autocast(device, cfg.bf16):
                lp = sequence_logprobs(model, ids, attn, plen, cfg.temperature)
            out[sl, : cm.shape[1]] = lp.float()
    return out


def grpo_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    ro: Rollouts,
    cfg: TrainConfig,
    dist: Dist,
    device: torch.device,
    ref_model: Any = None,
) -> dict[str, float]:
    """Train ``model`` on this rank's scored rollouts ``ro`` (collective under data parallelism);
    returns the mean loss terms over the optimizer updates, token-weighted clip fraction and
    ratio, mean grad norm, the number of updates and the tokens trained on."""
    n = cfg.rollouts
    assert ro.rewards is not None, "optimise needs scored rollouts"
    rewards = ro.rewards
    ro = ro.to(device)
    adv = group_advantages(rewards.to(device), cfg.adv_eps).reshape(-1)
    m = cfg.mini_batch // dist.world
    minis = [list(range(s, min(s + m, ro.num_tasks))) for s in range(0, ro.num_tasks, m)]
    # One mini-batch, one epoch: the policy is still the generation policy, so its own
    # (detached) log-probs are the old ones and the extra forward pass is saved.
    old = _logprobs_nograd(model, ro, cfg, device) if (cfg.ppo_epochs > 1 or len(minis) > 1) else None
    ref = _logprobs_nograd(ref_model, ro, cfg, device) if ref_model is not None else None
    sums: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio": 0.0}
    grad_norms: list[float] = []
    count = 0
    train_tokens = 0
    model.train()
    for _ in range(cfg.ppo_epochs):
        for mini in minis:
            seqs = torch.tensor([i * n + j for i in mini for j in range(n)], device=device)
            local_tokens = float(ro.completion_mask[seqs].sum())
            if cfg.loss_agg == "token-mean":
                # DDP averages gradients over ranks: normalise by the global token count.
                denom = max(dist.sum(local_tokens), 1.0) / dist.world
            else:
                denom = float(len(seqs))
            micro = [seqs[s : s + cfg.micro_batch_size] for s in range(0, len(seqs), cfg.micro_batch_size)]
            for k, mi in enumerate(micro):
                ids, attn, cm, plen = _trim(
                    ro.input_ids[mi], ro.attention_mask[mi], ro.completion_mask[mi], ro.prompt_len
                )
                with dist.no_sync(model, skip=k < len(micro) - 1):
                    with autocast(device, cfg.bf16):
                        logp = sequence_logprobs(model, ids, attn, plen, cfg.temperature)
                    old_mi = old[mi, : cm.shape[1]] if old is not None else logp.detach()
                    loss, st = grpo_loss(
                        logp,
                        old_mi,
                        adv[mi],
                        cm,
                        clip_eps=cfg.clip_eps,
                        ref_logp=ref[mi, : cm.shape[1]] if ref is not None else None,
                        kl_coef=cfg.kl_coef,
                        loss_agg=cfg.loss_agg,
                        denom=denom,
                    )
                    loss.backward()
                train_tokens += int(attn.sum())
                sums["loss"] += float(loss.detach())
                sums["pg_loss"] += st.pg_loss
                sums["kl"] += st.kl
                sums["clip_frac"] += st.clip_frac * st.tokens
                sums["ratio"] += st.ratio_mean * st.tokens
                count += st.tokens
            if dist.is_fsdp(model):
                gn = model.clip_grad_norm_(cfg.grad_clip)
            else:
                gn = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            grad_norms.append(float(gn))
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    updates = max(len(minis) * cfg.ppo_epochs, 1)
    return {
        "loss": sums["loss"] / updates,
        "pg_loss": sums["pg_loss"] / updates,
        "kl": sums["kl"] / updates,
        "clip_frac": sums["clip_frac"] / max(count, 1),
        "ratio_mean": sums["ratio"] / max(count, 1),
        "grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
        "optimizer_updates": float(updates),
        "train_tokens": float(train_tokens),
    }
