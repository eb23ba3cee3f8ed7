"""Optional supervised warm-up on the pool's gold answers, before RL: a model that never earns
a reward gives GRPO nothing to learn from (every group has zero variance). The completion is
``sft_template`` with the ground truth filled in, followed by EOS; the loss covers the
completion only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data import TaskPool
from ..llm.models import apply_chat_template, compute_float
from .config import SFTWarmup
from .policy import autocast, position_ids

__all__ = ["sft_warmup"]


def _batch(
    tok: Any, prompts: list[str], targets: list[str], device: torch.device, max_prompt: int | None
) -> dict[str, torch.Tensor]:
    rows, labels = [], []
    for p, t in zip(prompts, targets):
        p_ids = tok(p, add_special_tokens=False)["input_ids"]
        if max_prompt is not None:
            p_ids = p_ids[-max_prompt:]
        t_ids = tok(t, add_special_tokens=False)["input_ids"] + [int(tok.eos_token_id)]
        rows.append(p_ids + t_ids)
        labels.append([-100] * len(p_ids) + t_ids)
    width = max(len(r) for r in rows)
    pad = int(tok.pad_token_id)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows], device=device)  # left padding
    lab = torch.tensor([[-100] * (width - len(r)) + r for r in labels], device=device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows], device=device)
    return {"input_ids": ids, "labels": lab, "attention_mask": mask}


def sft_warmup(
    model: Any,
    tok: Any,
    pool: TaskPool,
    chats: list[Any],
    cfg: SFTWarmup,
    device: torch.device,
    snapshots: Mapping[int, Callable[[], None]] | None = None,
) -> list[float]:
    """``cfg.steps`` AdamW steps of next-token loss on gold completions of random training
    rows; returns the loss curve. Uses its own RNG so that RL's random streams are unaffected.
    ``snapshots[k]()`` is called after step k: the learning rate is constant, so the model there
    is exactly what a warm-up of k steps gives (a weaker reference and the policy's start from one
    stream)."""
    rng = np.random.default_rng(cfg.seed + 7919)
    truths = pool.ground_truths()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=0.0)
    losses: list[float] = []
    model.train()
    for step in tqdm(range(1, cfg.steps + 1), desc="sft warm-up", unit="step", disable=not cfg.progress):
        rows = rng.choice(len(pool), size=min(cfg.batch_size, len(pool)), replace=False)
        prompts = [apply_chat_template(tok, chats[r]) for r in rows]
        targets = [cfg.template.format(answer=truths[r]) for r in rows]
        b = _batch(tok, prompts, targets, device, cfg.max_prompt_tokens)
        with autocast(device, cfg.bf16):
            logits = model(
                input_ids=b["input_ids"],
                attention_mask=b["attention_mask"],
                position_ids=position_ids(b["attention_mask"]),
                use_cache=False,
            ).logits
        loss = torch.nn.functional.cross_entropy(
            compute_float(logits[:, :-1]).reshape(-1, logits.shape[-1]),
            b["labels"][:, 1:].reshape(-1),
            ignore_index=-100,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        losses.append(float(loss.detach()))
        if snapshots and step in snapshots:
            snapshots[step]()
    return losses
