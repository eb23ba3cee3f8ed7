"""Knapsack-RL, rollout budgets per task chosen as a knapsack (Li et al., arXiv 2509.25849).

The batch is the data loader's (an epoch-order walk of the pool); what Knapsack-RL chooses is how
many rollouts each of its prompts gets, out of the budget uniform allocation would spend
(``batch_size x n_rollouts``). Each prompt is an item whose value, given ``N`` rollouts and success
rate ``p``, is the probability that its group has a nonzero GRPO gradient times the expected gain
from learning on it:

    Value(N, p) = (1 - p**N - (1 - p)**N) * p * (1 - p)**2

with ``p`` estimated from the prompt's previous rollouts (the paper uses the success rate of the
previous epoch). Every prompt gets between ``n_low`` and ``n_high`` rollouts. Value has decreasing
increments in ``N``, so handing the budget out one rollout at a time to the largest increment is
an exact solution of this knapsack; that is what :func:`allocate` does, vectorised.

Choices where the paper leaves room (named, and in docs/peers.md): a prompt never rolled out has no
estimate and gets the uniform ``n_rollouts``, outside the knapsack; prompts whose estimate is 0
or 1 have value 0 and get ``n_low``, except that budget left once every increment is zero goes to
the never-solved prompts first, then evenly to all, up to ``n_high`` (the authors' code falls
back differently, below). Defaults n_low = 2 and n_high = 128 (the paper reports budgets up to 93).

Given reference pass rates (``prior``: the scoreboard's shared-information setting), a prompt
starts from that estimate instead of none, so the knapsack applies from its first rollout.

Reference lines (liziniu/KnapsackRL@ca5d5f5, the authors' code): ``verl/trainer/ppo/exploration_utils.py:L75-104``
(a prompt without an estimate gets n; 0 < p < 1 gets min_n plus its knapsack share; p = 0 and
p = 1 get negative_n / positive_n; value ``p (1 - p)**3`` at L99), ``L170-177,L241-242`` (the
knapsack over ``(1 - p**N - (1 - p)**N) p (1 - p)**2``), ``L137-167`` (fallback);
``examples/knapsack_trainer/run_knapsack_grpo_7b.sh:L71-80`` (min_n = negative_n = positive_n = 2,
max_n 128, a per-prompt reward buffer of 16 needing 8). Two differences, in docs/peers.md: the
reference's fallback reserves for the prompts with 0 < p < 1 only their estimated cost
(``sum min(max_n, log(0.1) / log(max(p, 1 - p)))``) and gives the rest of the budget to the p = 0
prompts (else to all the others) before the knapsack runs, where this one moves budget only once
every increment is zero; and the reference estimates p from that reward buffer, this one from
the prompt's latest group.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..baselines import EpochOrder, RolledBatch
from ..errors import CheckpointError, InvalidArgumentError
from ..parameters import N_HIGH, N_LOW, ROLLOUTS
from .base import FloatArray, Groups, IdArray, SelfRolling, prior_rates, saved_array

__all__ = ["KnapsackAllocation", "allocate", "task_value"]


def task_value(n: npt.ArrayLike, p: npt.ArrayLike) -> FloatArray:
    """Knapsack-RL's value of ``n`` rollouts of a prompt with success rate ``p``."""
    n_, p_ = np.asarray(n, dtype=np.float64), np.asarray(p, dtype=np.float64)
    nonzero = 1.0 - p_**n_ - (1.0 - p_) ** n_
    return np.asarray(nonzero * p_ * (1.0 - p_) ** 2, dtype=np.float64)


def allocate(p: FloatArray, budget: int, n_low: int, n_high: int) -> npt.NDArray[np.int64]:
    """Rollouts per prompt maximising the summed :func:`task_value` with ``sum == budget`` (as long
    as ``n_low * len(p) <= budget <= n_high * len(p)``). Budget no increment values goes first to the
    prompts estimated at 0 (never solved), then to all, evenly, within ``n_high``."""
    m = p.size
    counts = np.full(m, n_low, dtype=np.int64)
    left = budget - n_low * m
    if m == 0 or left <= 0:
        return counts
    steps = np.arange(n_low, n_high)  # the increment N -> N + 1
    gain = task_value(steps[None, :] + 1, p[:, None]) - task_value(steps[None, :], p[:, None])
    flat = gain.ravel()
    positive = int((flat > 1e-15).sum())
    take = min(left, positive)
    if take:
        # The largest increments (stable: ties go to the earlier prompt); each row is decreasing,
        # so the chosen ones are a prefix of every row.
        best = np.argsort(-flat, kind="stable")[:take]
        counts += np.bincount(best // gain.shape[1], minlength=m)
        left -= take
    for group in (p <= 0.0, np.ones(m, dtype=bool)):  # fallback: unsolved prompts first, then all
        while left > 0:
            room = group & (counts < n_high)
            k = int(room.sum())
            if k == 0:
                break
            share = np.zeros(m, dtype=np.int64)
            idx = np.flatnonzero(room)
            share[idx] = left // k
            share[idx[: left % k]] += 1
            share = np.minimum(share, n_high - counts)
            counts += share
            left -= int(share.sum())
    return counts


class KnapsackAllocation(SelfRolling):
    """Knapsack-RL as a selector that rolls out itself (module docstring: rule, defaults, choices)."""

    kind = "knapsack"

    def __init__(
        self,
        num_tasks: int,
        rollout: Any,
        *,
        n_rollouts: int = ROLLOUTS.default,
        n_low: int = N_LOW.default,
        n_high: int = N_HIGH.default,
        seed: int = 0,
        prior: npt.ArrayLike | None = None,
    ) -> None:
        super().__init__(num_tasks, rollout, seed=seed)
        self.n_rollouts = ROLLOUTS.check(n_rollouts)
        self.n_low = N_LOW.check(n_low)
        self.n_high = N_HIGH.check(n_high)
        if not self.n_low <= self.n_rollouts <= self.n_high:
            raise InvalidArgumentError(
                f"n_low: need n_low <= n_rollouts <= n_high, got {self.n_low}, {self.n_rollouts}, {self.n_high}",
                "n_low",
            )
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        #: Each prompt's success rate at its last rollout (NaN: never rolled out), or, before its
        #: first rollout, the ``prior`` given (a reference model's pass rate; NaN: none).
        self.estimate: FloatArray = np.full(self.num_tasks, np.nan) if prior is None else prior_rates(prior, num_tasks)

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        ids = self._order.select(batch_size, exclude=None if allowed is None else ~allowed)
        p = self.estimate[ids]
        known = ~np.isnan(p)
        counts = np.full(ids.size, self.n_rollouts, dtype=np.int64)
        counts[known] = allocate(p[known], int(known.sum()) * self.n_rollouts, self.n_low, self.n_high)
        succ = self._roll(ids, counts)
        trials = counts.astype(np.float64)
        return RolledBatch(ids, succ, trials, rollouts=self._spent), (ids, succ, trials)

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        self.estimate[task_ids] = successes / trials

    def _extra_state(self) -> dict[str, Any]:
        return {"order": self._order.state_dict(), "estimate": self.estimate.copy()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        estimate = saved_array(state, "estimate", (self.num_tasks,), np.float64)
        known = estimate[~np.isnan(estimate)]
        if np.any((known < 0) | (known > 1)):
            raise CheckpointError("state: has success-rate estimates outside [0, 1]")
        order = EpochOrder(self.num_tasks, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._order, self.estimate = order, estimate
