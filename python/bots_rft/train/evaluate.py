"""Held-out evaluation: every held-out task decoded greedily, or sampled ``samples`` times at the
training temperature (avg@k), sharded over ranks and scored by its verifier; accuracy per
``data_source``, over all tasks, and macro-averaged over sources."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data import TaskPool
from ..rewards import RewardScorer
from .distributed import Dist
from .rollout import generate_rollouts
from .scoring import VerifierErrors, score_texts

__all__ = ["evaluate", "summarise_accuracy"]


def summarise_accuracy(sources: Sequence[str], rewards: Sequence[float]) -> dict[str, Any]:
    by: dict[str, list[float]] = defaultdict(list)
    for s, r in zip(sources, rewards):
        by[str(s)].append(float(r))
    per_source = {k: float(np.mean(v)) for k, v in sorted(by.items())}
    return {
        "accuracy": float(np.mean(rewards)) if len(rewards) else float("nan"),
        "macro_accuracy": float(np.mean(list(per_source.values()))) if per_source else float("nan"),
        "by_source": per_source,
        "tasks": len(rewards),
    }


def _devices(model: Any) -> list[Any]:
    """The CUDA device whose generator sampling draws from (none on CPU)."""
    device = next(model.parameters()).device
    return [device] if device.type == "cuda" else []


def evaluate(
    model: Any,
    tok: Any,
    pool: TaskPool,
    chats: Sequence[Any],
    rows: Sequence[int],
    scorer: RewardScorer,
    dist_: Dist,
    *,
    max_new_tokens: int,
    batch_size: int,
    max_prompt_tokens: int | None,
    bf16: bool,
    engine: str = "fast",
    samples: int = 0,
    temperature: float = 1.0,
    seed: int = 0,
) -> dict[str, Any] | None:
    """Collective; the summary on rank 0, None elsewhere. Greedy decoding (``samples=0``) draws no
    random numbers; sampling (``samples=k``) draws from a generator forked from torch's and
    seeded with ``seed`` alone, so evaluating never shifts the training run's random streams and a
    resumed run's evaluations equal an uninterrupted run's."""
    mine = dist_.shard(list(rows))
    rewards: list[float] = []
    errors = VerifierErrors()
    n = max(1, samples)
    with dist_.full_params(model), torch.random.fork_rng(devices=_devices(model)):
        if samples:
            torch.manual_seed(seed + dist_.rank)
        if mine:
            ro = generate_rollouts(
                model,
                tok,
                [chats[r] for r in mine],
                mine,
                n,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                batch_size=batch_size,
                max_prompt_tokens=max_prompt_tokens,
                greedy=samples == 0,
                bf16=bf16,
                engine=engine,
            )
            rewards = score_texts(scorer, pool, mine, ro.texts, n, errors).mean(axis=1).tolist()
    parts = dist_.gather((mine, rewards, errors))
    if not dist_.is_main:
        return None
    all_rows = [r for p in parts for r in p[0]]
    all_rewards = [x for p in parts for x in p[1]]
    summary = summarise_accuracy(pool.data_sources(all_rows).tolist(), all_rewards)
    summary.update(VerifierErrors.merged(p[2] for p in parts).record())
    return summary


def evaluate_policy(
    model: Any,
    tok: Any,
    pool: TaskPool,
    chats: Sequence[Any],
    rows: Sequence[int],
    scorer: Any,
    dist: Any,
    cfg: Any,
    step: int,
) -> dict[str, Any] | None:
    """A training run's held-out evaluation at ``step``: ``cfg.eval_samples`` samples a task at
    the rollout temperature (seeded by the run's seed and the step), plus greedy decoding when
    ``cfg.eval_greedy`` (``greedy_accuracy``, ``greedy_macro_accuracy``), and ``eval_s``."""
    t = time.perf_counter()

    def run(samples: int, **sampling: Any) -> dict[str, Any] | None:
        return evaluate(
            model,
            tok,
            pool,
            chats,
            rows,
            scorer,
            dist,
            max_new_tokens=cfg.eval_max_new_tokens or cfg.max_new_tokens,
            batch_size=cfg.generation_batch_size,
            max_prompt_tokens=cfg.max_prompt_tokens,
            bf16=cfg.bf16,
            engine=cfg.rollout_engine,
            samples=samples,
            **sampling,
        )

    res = run(cfg.eval_samples, temperature=cfg.temperature, seed=cfg.seed * 1_000_003 + step)
    if res is not None and cfg.eval_greedy and cfg.eval_samples:
        greedy = run(0)
        if greedy is not None:
            res["greedy_accuracy"] = greedy["accuracy"]
            res["greedy_macro_accuracy"] = greedy["macro_accuracy"]
    if res is not None:
        res["eval_s"] = time.perf_counter() - t
    return res


def resolve_eval_pool(cfg: Any) -> Path | None:
    """``eval_pool``, or ``eval.parquet`` beside a pool named ``train.parquet``."""
    if cfg.eval_pool:
        return Path(cfg.eval_pool)
    p = Path(cfg.pool)
    sibling = p.with_name("eval.parquet")
    return sibling if p.name == "train.parquet" and sibling.exists() else None


def held_out(cfg: Any) -> tuple[TaskPool | None, list[Any], list[int]]:
    """A training run's held-out set: its pool (:func:`resolve_eval_pool`; None without one), the
    prompts as chats, and the rows evaluated (all, or ``eval_limit`` of them drawn by a fixed
    seed, so every run of a comparison evaluates the same tasks)."""
    path = resolve_eval_pool(cfg)
    if path is None:
        return None, [], []
    pool = TaskPool.load(path)
    order = np.random.default_rng(12345).permutation(len(pool))
    return pool, pool.prompts(system_prompt=cfg.system_prompt), sorted(order[: cfg.eval_limit or len(order)].tolist())
