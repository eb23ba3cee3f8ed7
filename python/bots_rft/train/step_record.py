"""A training step's metrics record: one function, the same fields for every rollout mode.

:func:`step_record` turns a step's :class:`~.step_batches.StepBatch` (what was trained on and
what it cost), its :class:`StepResults` (rewards, lengths, verifier errors over all ranks) and
the optimizer's statistics into the record that ``metrics.jsonl`` gets. Mode-specific fields come
from the batch itself (a plan's or a self-rolling selector's rollout counts, its generation
rounds), so nothing here asks which method ran.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import Picks
from ..metrics import effective_ratios
from ..metrics.calibration import calibration_metrics
from ..metrics.step import pick_distributions
from .distributed import Dist
from .rollout import PlannedRollouts
from .scoring import VerifierErrors
from .step_batches import StepBatch

__all__ = ["StepTimes", "StepResults", "gather_results", "step_record"]


@dataclass
class StepTimes:
    """One rank's time and work in the step's stages so far."""

    select_s: float = 0.0  # in the selector's select (rank 0)
    gen_s: float = 0.0
    reward_s: float = 0.0
    gen_tokens: int = 0
    # What BOTS drew for the step's picks (rank 0; BOTS only): logged as distributions.
    picks: list[Picks] = field(default_factory=list)


@dataclass
class StepResults:
    """The batch's outcome over all ranks, on every rank."""

    successes: npt.NDArray[np.float64]  # [B]: each task's rewards summed
    reward_mean: float  # over every rollout of the batch
    lengths: list[int]  # completion tokens per rollout
    errors: VerifierErrors
    gen_s: float  # the slowest rank's
    reward_s: float
    gen_tokens: int  # all ranks'


def gather_results(dist: Dist, batch: StepBatch, times: StepTimes, errors: VerifierErrors, n: int) -> StepResults:
    """Every rank's rewards, response lengths, timings and verifier errors, on every rank
    (collective); ``n``: rollouts per task (a plan's or a self-rolling selector's batch, on one
    process, carries each task's own count)."""
    ro = batch.rollouts
    if isinstance(ro, PlannedRollouts):  # one process: each task its own count
        task_rewards = ro.task_rewards()
        flat = np.asarray([r for rs in task_rewards for r in rs], dtype=np.float64)
        return StepResults(
            successes=np.asarray([sum(rs) for rs in task_rewards], dtype=np.float64),
            reward_mean=float(flat.mean()),
            lengths=[x for ls in ro.task_lengths() for x in ls],
            errors=errors,
            gen_s=times.gen_s,
            reward_s=times.reward_s,
            gen_tokens=times.gen_tokens,
        )
    parts = dist.gather(
        (
            [] if ro is None else ro.rewards.tolist(),  # type: ignore[union-attr]
            [] if ro is None else ro.completion_mask.sum(1).tolist(),
            times,
            errors,
        )
    )
    rewards = np.asarray([r for p in parts for r in p[0]], dtype=np.float64).reshape(len(batch.task_ids), n)
    return StepResults(
        successes=rewards.sum(axis=1),
        reward_mean=float(rewards.mean()),
        lengths=[x for p in parts for x in p[1]],
        errors=VerifierErrors.merged(p[3] for p in parts),
        gen_s=max(p[2].gen_s for p in parts),
        reward_s=max(p[2].reward_s for p in parts),
        gen_tokens=int(sum(p[2].gen_tokens for p in parts)),
    )


def pick_record(picks: list[Picks]) -> dict[str, float]:
    """Quantiles of what BOTS drew for a step's picks: ``pick_mean_p*`` (posterior means),
    ``pick_theta_p*`` (the sampled rates ranked), ``pick_predicted_p*`` (the estimator's p̃)."""
    if not picks:
        return {}
    alpha = np.concatenate([p.alpha for p in picks])
    beta = np.concatenate([p.beta for p in picks])
    theta = np.concatenate([p.theta for p in picks])
    out = pick_distributions(alpha / (alpha + beta), theta, np.concatenate([p.predicted for p in picks]))
    return {key.removeprefix("bots/"): value for key, value in out.items()}


def counts_record(counts: npt.NDArray[np.float64] | None) -> dict[str, Any]:
    """Rollouts per trained task when they differ by task (a plan, a self-rolling selector):
    ``rollout_counts`` (one per task id, in the record's order), their mean
    ``rollouts_per_task`` and ``rollout_count_hist`` ({count: tasks})."""
    if counts is None:
        return {}
    values, tasks = np.unique(counts.astype(np.int64), return_counts=True)
    return {
        "rollout_counts": counts.astype(np.int64).tolist(),
        "rollouts_per_task": float(counts.mean()),
        "rollout_count_hist": {str(v): int(c) for v, c in zip(values.tolist(), tasks.tolist())},
    }


def calibration_record(picks: list[Picks], task_ids: list[int], successes: Any, trials: Any) -> dict[str, float]:
    """How well BOTS predicted the step's groups (:mod:`bots_rft.metrics.calibration`): ``calibration_brier``,
    ``calibration_ece``, ``calibration_spearman`` of the picks' posterior means at selection time
    against their k/n, and ``zero_variance_share`` (every selector)."""
    predicted = np.full(len(task_ids), np.nan)
    if picks:
        ids = np.concatenate([p.ids for p in picks])
        alpha = np.concatenate([p.alpha for p in picks])
        means = alpha / (alpha + np.concatenate([p.beta for p in picks]))
        by_id = dict(zip(ids.tolist(), means.tolist()))
        predicted = np.array([by_id.get(t, np.nan) for t in task_ids], dtype=np.float64)
    step = calibration_metrics(predicted, successes, trials)
    return {key.removeprefix("bots/"): value for key, value in step.metrics().items()}


def step_record(
    *,
    step: int,
    method: str,
    rollouts_per_task: int,
    batch: StepBatch,
    results: StepResults,
    times: StepTimes,
    stats: dict[str, float],
    train_tokens: float,
    update_s: float,
    train_s: float,
    started: float,
    lr: float,
    capability: float | None,
    cum_rollouts: int,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The step's record. ``cum_rollouts`` includes this step's ``batch.charged``; ``extra``: the
    trainer's own fields (the guard's); ``stats``: the optimizer's (``train_tokens``, summed
    over ranks, is passed separately and only its rate is logged)."""
    counts = batch.trained_counts
    trials: Any = float(rollouts_per_task) if counts is None else counts
    successes = results.successes
    ratios = effective_ratios(successes, trials)
    gen_s, lengths = results.gen_s, results.lengths
    return {
        "kind": "train",
        "step": step,
        "method": method,
        "reward_mean": results.reward_mean,
        "etr": ratios.etr,
        "below_one": ratios.below_one,
        "above_zero": ratios.above_zero,
        "strict_valid": ratios.strict_valid,
        "below_15_16": ratios.below_15_16,
        "above_1_16": ratios.above_1_16,
        "effective_tasks": int(round(ratios.etr * len(batch.task_ids))),
        "select_ms": 1e3 * times.select_s,
        "update_ms": 1e3 * update_s,
        "gen_s": gen_s,
        "reward_s": results.reward_s,
        "train_s": train_s,
        "step_s": time.perf_counter() - started,
        "gen_tokens": results.gen_tokens,
        "gen_tokens_per_s": results.gen_tokens / gen_s if gen_s > 0 else None,
        "train_tokens_per_s": train_tokens / train_s if train_s > 0 else None,
        "response_len": float(np.mean(lengths)) if lengths else 0.0,
        "lr": lr,
        "capability": capability,
        "rollouts": batch.charged,
        "extra_rollouts": batch.extra,
        "cum_rollouts": cum_rollouts,
        "task_ids": batch.task_ids,
        "successes": successes.tolist(),
        **results.errors.record(),
        **pick_record(times.picks),
        **calibration_record(times.picks, batch.task_ids, successes, trials),
        **counts_record(counts),
        **batch.record,
        **extra,
        **{k: v for k, v in stats.items() if k != "train_tokens"},
    }
