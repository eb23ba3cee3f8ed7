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

from .config import GRPOUpdate
from .distributed import Dist
from .grpo import group_advantages, grpo_loss
from .policy import autocast, sequence_logprobs
from .rollout import PlannedRollouts, Rollouts

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


def loss_dtype(model: Any) -> torch.dtype:
    """The precision of log-probs, advantages and the loss: float64 for a float64 policy, float32
    for every other (bf16 autocast included)."""
    return torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32


def _logprobs_nograd(model: Any, ro: Rollouts, cfg: GRPOUpdate, device: torch.device) -> torch.Tensor:
    """``[S, T]`` log-probs of the completions under ``model``, without a graph."""
    out = torch.zeros(ro.completion_mask.shape, dtype=loss_dtype(model), device=device)
    mb = cfg.micro_batch_size
    with torch.no_grad():
        for s in range(0, ro.input_ids.shape[0], mb):
            sl = slice(s, s + mb)
            ids, attn, cm, plen = _trim(ro.input_ids[sl], ro.attention_mask[sl], ro.completion_mask[sl], ro.prompt_len)
            with autocast(device, cfg.bf16):
                lp = sequence_logprobs(model, ids, attn, plen, cfg.temperature)
            out[sl, : cm.shape[1]] = lp
    return out


def grpo_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    ro: Rollouts | PlannedRollouts,
    cfg: GRPOUpdate,
    dist: Dist,
    device: torch.device,
    ref_model: Any = None,
) -> dict[str, float]:
    """Train ``model`` on this rank's scored rollouts ``ro`` (collective under data parallelism);
    returns the mean loss terms over the optimizer updates, token-weighted clip fraction and
    ratio, mean grad norm, the number of updates and the tokens trained on.

    ``ro`` may be a plan's :class:`PlannedRollouts` (tasks with their own counts): each part is a
    batch of equal counts, so each task's advantages are normalised within its own group as
    always. The planned tasks, in the plan's order, are split into as many mini-batches as
    ``batch_size / mini_batch_size`` (the updates the same config makes with fixed counts; fewer
    when the plan has fewer tasks), and
    each update accumulates the gradient over every part's micro-batches with the normaliser of
    the whole mini-batch: under ``token-mean`` every completion token of the mini-batch weighs
    the same, under ``seq-mean-token-mean`` every sequence does, whichever group it belongs to
    (a task with twice the rollouts weighs twice, as two tasks would)."""
    if isinstance(ro, PlannedRollouts):
        parts = list(ro.parts)
        tasks = list(ro.order)
        updates_per_epoch = max(cfg.batch_size // cfg.mini_batch, 1)
        per_mini = max(-(-len(tasks) // updates_per_epoch), 1)
    else:
        parts = [ro]
        tasks = [(0, i) for i in range(ro.num_tasks)]
        per_mini = cfg.mini_batch // dist.world
    assert all(p.rewards is not None for p in parts), "optimise needs scored rollouts"
    advs = [group_advantages(p.rewards.to(device), cfg.adv_eps, loss_dtype(model)).reshape(-1) for p in parts]  # type: ignore[union-attr]
    parts = [p.to(device) for p in parts]
    minis = [tasks[s : s + per_mini] for s in range(0, len(tasks), per_mini)]
    # One mini-batch, one epoch: the policy is still the generation policy, so its own
    # (detached) log-probs are the old ones and the extra forward pass is saved.
    olds = [_logprobs_nograd(model, p, cfg, device) if (cfg.ppo_epochs > 1 or len(minis) > 1) else None for p in parts]
    refs = [_logprobs_nograd(ref_model, p, cfg, device) if ref_model is not None else None for p in parts]
    sums: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio": 0.0}
    grad_norms: list[float] = []
    count = 0
    train_tokens = 0
    model.train()
    for _ in range(cfg.ppo_epochs):
        for mini in minis:
            # Each part's sequences of the mini-batch's tasks (a part without any is left out).
            part_seqs = [
                (q, torch.tensor([i * p.n + j for k, i in mini if k == q for j in range(p.n)], device=device))
                for q, p in enumerate(parts)
            ]
            part_seqs = [(q, seqs) for q, seqs in part_seqs if len(seqs)]
            local_tokens = sum(float(parts[q].completion_mask[seqs].sum()) for q, seqs in part_seqs)
            if cfg.loss_agg == "token-mean":
                # DDP averages gradients over ranks: normalise by the global token count.
                denom = max(dist.sum(local_tokens), 1.0) / dist.world
            else:
                denom = float(sum(len(seqs) for _, seqs in part_seqs))
            micro = [
                (q, seqs[s : s + cfg.micro_batch_size])
                for q, seqs in part_seqs
                for s in range(0, len(seqs), cfg.micro_batch_size)
            ]
            for k, (q, mi) in enumerate(micro):
                ro_q, old, ref = parts[q], olds[q], refs[q]
                ids, attn, cm, plen = _trim(
                    ro_q.input_ids[mi], ro_q.attention_mask[mi], ro_q.completion_mask[mi], ro_q.prompt_len
                )
                with dist.no_sync(model, skip=k < len(micro) - 1):
                    with autocast(device, cfg.bf16):
                        logp = sequence_logprobs(model, ids, attn, plen, cfg.temperature)
                    old_mi = old[mi, : cm.shape[1]] if old is not None else logp.detach()
                    loss, st = grpo_loss(
                        logp,
                        old_mi,
                        advs[q][mi],
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
