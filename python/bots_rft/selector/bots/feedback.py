"""Feedback as evidence: ``update``'s inputs checked and turned into arrays, and reward matrices
mapped to successes and trials (graded rewards as fractional evidence, a declared reward range
rescaled, or a success threshold). Shared by every selector backend's ``update`` and
``update_rewards``."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from ... import _core
from ..._validation import FloatArray, IntArray, as_floats, as_ids, as_real, describe, host_array
from ...errors import InvalidArgumentError, InvalidTypeError


def feedback_arrays(task_ids: Any, successes: Any, trials: Any) -> tuple[IntArray, FloatArray, FloatArray]:
    """``update``'s inputs as arrays (trials: one value, or one per entry), each checked and
    named; the lengths are the core's to check. Shared by every backend's ``update``."""
    ids = nonempty(as_ids(task_ids, "task_ids"))
    succ = as_floats(successes, "successes")
    trials = host_array(trials)
    if np.ndim(trials) == 0:
        return ids, succ, np.array([_scalar_trials(trials)], dtype=np.float64)
    return ids, succ, as_floats(trials, "trials")


def nonempty(ids: IntArray) -> IntArray:
    """Refuse an update of no tasks: the update's decay (λ) applies to every task, so an empty
    step would still move every posterior toward its prior, which a step without results should
    not. A trainer with nothing to report skips the call."""
    if ids.size == 0:
        raise InvalidArgumentError(
            "task_ids: empty; an update needs at least one task (an empty step would still decay every "
            "task's evidence by lam: skip the call when a step has no results)",
            "task_ids",
        )
    return ids


def _scalar_trials(trials: Any) -> float:
    value = trials.item() if isinstance(trials, np.ndarray | np.generic) else trials
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidTypeError(f"trials: must be a number or an array, got {value!r}", "trials")
    return float(value)


class RewardMap(NamedTuple):
    """How rewards become evidence in [0, 1]: rescaled from [low, high], or thresholded."""

    low: float = 0.0
    high: float = 1.0
    threshold: float | None = None

    def evidence(self, values: np.ndarray, row: int | None = None) -> np.ndarray:
        if self.threshold is not None:
            bad = ~np.isfinite(values)
            if bad.any():
                _reject_reward(values, bad, row, "must be finite")
            return (values >= self.threshold).astype(np.float64)
        bad = ~((values >= self.low) & (values <= self.high))  # NaN fails both comparisons
        if bad.any():
            _reject_reward(values, bad, row, f"must be in [{self.low:g}, {self.high:g}]")
        if (self.low, self.high) == (0.0, 1.0):
            return values
        return (values - self.low) / (self.high - self.low)


def reward_map(reward_range: Any, success_threshold: Any) -> RewardMap:
    if reward_range is not None and success_threshold is not None:
        raise InvalidArgumentError("reward_range: give reward_range or success_threshold, not both", "reward_range")
    if success_threshold is not None:
        threshold = as_real(success_threshold, "success_threshold")
        if not math.isfinite(threshold):
            raise InvalidArgumentError(f"success_threshold: must be finite, got {threshold}", "success_threshold")
        return RewardMap(threshold=threshold)
    if reward_range is None:
        return RewardMap()
    try:
        low, high = (as_real(v, "reward_range") for v in reward_range)
    except (TypeError, ValueError):
        raise InvalidTypeError(
            f"reward_range: must be a pair (low, high), got {reward_range!r}", "reward_range"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InvalidArgumentError(
            f"reward_range: must be finite with low < high, got {reward_range!r}", "reward_range"
        )
    return RewardMap(low, high)


def _reject_reward(values: np.ndarray, bad: np.ndarray, row: int | None, why: str) -> None:
    where = tuple(int(x) for x in np.argwhere(bad)[0])
    pos = where if row is None else (row, *where)
    raise InvalidArgumentError(f"rewards: {why}, got {values[where]} at {pos}", "rewards")


def reward_counts(rewards: Any, b: int, mapping: RewardMap | None = None) -> tuple[FloatArray, FloatArray]:
    """Successes (row sums of the rewards as evidence) and trials (row lengths), from a [B, n]
    array or B sequences of varying length."""
    mapping = mapping or RewardMap()
    rewards = host_array(rewards)
    try:
        arr: np.ndarray | None = np.asarray(rewards)
    except (ValueError, TypeError):  # rows of different lengths
        arr = None
    if arr is not None and arr.dtype == object:  # rows of different lengths (older numpy)
        arr = None
    if arr is not None:
        # Read as given, then converted: np.asarray(["1"], dtype=float) would parse strings,
        # which update() refuses.
        if arr.dtype.kind not in "biuf":
            raise InvalidTypeError(f"rewards: must be numeric, got {describe(rewards)}", "rewards")
        arr = arr.astype(np.float64)  # the common case, checked and summed without a loop over rows
        if arr.ndim != 2:
            raise InvalidTypeError(f"rewards: must be 2-D [batch, rollouts], got shape {arr.shape}", "rewards")
        if arr.shape[0] != b:
            raise InvalidTypeError(f"rewards: has {arr.shape[0]} rows, expected {b} (one per task id)", "rewards")
        if arr.shape[1] == 0 and b:
            raise InvalidArgumentError("rewards: rows are empty (no rollouts)", "rewards")
        return mapping.evidence(arr).sum(axis=1), np.full(b, float(arr.shape[1]))
    if not isinstance(rewards, (list, tuple)) or len(rewards) != b:
        raise InvalidTypeError(f"rewards: must be a [batch, rollouts] array, got {type(rewards).__name__}", "rewards")
    rows = [as_floats(r, "rewards") for r in rewards]
    for i, r in enumerate(rows):
        if r.size == 0:
            raise InvalidArgumentError(f"rewards: row {i} is empty (no rollouts)", "rewards")
    evidence = [mapping.evidence(r, row=i) for i, r in enumerate(rows)]
    return np.array([e.sum() for e in evidence]), np.array([float(r.size) for r in rows])


def aggregate(num_tasks: int, ids: IntArray, successes: FloatArray, trials: FloatArray) -> _core.Batch:
    """One step's feedback as the core's batch: validated (ids in the pool, 0 ≤ successes ≤
    trials, trials > 0, matching lengths), repeated ids summed, ids ascending. Every backend
    checks a batch this way, so all of them accept and refuse the same feedback."""
    return _core.aggregate(num_tasks, ids, successes, trials)
