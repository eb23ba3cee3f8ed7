"""Knapsack-RL, rollout budgets per task chosen as a knapsack (Li et al., arXiv 2509.25849).

The batch is the data loader's (an epoch-order walk of the pool); what Knapsack-RL chooses is how
many rollouts each of its prompts gets, out of the budget uniform allocation would spend
(``batch_size x n_rollouts``). Each prompt is an item whose value, given ``N`` rollouts and success
rate ``p``, is the probability that its group has a nonzero GRPO gradient times the expected gain
from learning on it:

    Value(N, p) = (1 - p**N - (1 - p)**N) * p * (1 - p)**2

with ``p`` estimated from the prompt's recent rollouts. Value has decreasing increments in ``N``,
so handing the budget out one rollout at a time to the largest increment is an exact solution of
this knapsack; that is what :func:`allocate` does, vectorised. :func:`sampling_budget` is the
authors' whole allocation around it:

- a prompt without an estimate gets ``n_rollouts``; one estimated at 0 < p < 1 gets ``n_low``
  plus its knapsack share; one estimated at 0 or 1 gets ``n_low`` (the scripts' negative_n and
  positive_n);
- the knapsack is given only the prompts' estimated cost, ``sum min(n_high, log(0.1) /
  log(max(p, 1 - p)))`` (the rollouts that find a disagreeing group with probability 0.9), when
  that is less than what is left; the rest (the fallback) goes evenly to the prompts estimated at
  0 (else to every prompt outside the knapsack), without a cap;
- when no prompt is at 0 < p < 1, what is left goes evenly to the prompts at 0, or, when there
  are none, every prompt gets ``n_rollouts``.

The estimate is the authors' reward buffer: the mean of a prompt's most recent 16 rewards (its
latest group alone when that has 16 or more), trusted once the prompt has 8 rewards in all.
Rollout outcomes are counts here, so a buffer that mixes groups takes the older group's share at
its rate. Defaults n_low = 2 and n_high = 128 (the paper reports budgets up to 93).

Given reference pass rates (``prior``: the scoreboard's shared-information setting), a prompt
starts from that estimate instead of none, so the knapsack applies from its first rollout.

Reference lines (liziniu/KnapsackRL@ca5d5f5, the authors' code): ``verl/trainer/ppo/exploration_utils.py:L75-104``
(a prompt without an estimate gets n; 0 < p < 1 gets min_n plus its knapsack share; p = 0 and
p = 1 get negative_n / positive_n; value ``p (1 - p)**3`` at L99), ``L170-177,L241-242`` (the
knapsack over ``(1 - p**N - (1 - p)**N) p (1 - p)**2``), ``L137-167`` (fallback);
``verl/utils/dataset/rl_dataset.py:L169-237`` (the reward buffer and when an estimate counts);
``examples/knapsack_trainer/run_knapsack_grpo_7b.sh:L71-80`` (min_n = negative_n = positive_n = 2,
max_n 128, a per-prompt reward buffer of 16 needing 8).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..._portable import int_power
from ...errors import CheckpointError, InvalidArgumentError
from ...parameters import ROLLOUTS, SEED, Parameter
from ..method import Method, RolloutMode, needs_rollout, references
from ..protocol import RolledBatch
from .base import FloatArray, Groups, IdArray, SelfRolling, prior_rates, saved_array
from .dapo import EpochOrder

__all__ = ["KnapsackAllocation", "allocate", "task_value", "sampling_budget"]

N_LOW = Parameter("n_low", "int", 2, "Knapsack-RL: fewest rollouts a prompt gets", 1)
N_HIGH = Parameter("n_high", "int", 128, "Knapsack-RL: most rollouts a prompt gets", 1)


def task_value(n: npt.ArrayLike, p: npt.ArrayLike) -> FloatArray:
    """Knapsack-RL's value of ``n`` rollouts of a prompt with success rate ``p``."""
    n_, p_ = np.asarray(n, dtype=np.float64), np.asarray(p, dtype=np.float64)
    nonzero = 1.0 - int_power(p_, n_) - int_power(1.0 - p_, n_)  # the same bits on every CPU
    return np.asarray(nonzero * p_ * (1.0 - p_) ** 2, dtype=np.float64)


def _rollouts_to_confidence(q: FloatArray, n_high: int) -> npt.NDArray[np.int64]:
    """Per task, how many rollouts m in 1..n_high keep q**m >= 1 - COST_CONFIDENCE."""
    count = np.zeros(q.shape, dtype=np.int64)
    power = np.ones(q.shape, dtype=np.float64)
    for _ in range(int(n_high)):
        power = power * q
        count += power >= 1.0 - COST_CONFIDENCE
    return count


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


#: The authors' cost estimate: the rollouts that find a disagreeing group with this probability.
COST_CONFIDENCE = 0.9
#: The authors' reward buffer: a prompt's estimate is the mean of its last 16 rewards, trusted once
#: it has had 8 (run_knapsack_grpo_7b.sh: REWARD_BUFFER_LENGTH, MIN_BUFFER_LENGTH).
BUFFER_LENGTH, MIN_BUFFER_LENGTH = 16, 8


def _spread(counts: npt.NDArray[np.int64], who: npt.NDArray[np.int64], budget: int) -> None:
    """``budget`` rollouts spread evenly over the prompts ``who`` (the remainder to the first)."""
    if budget <= 0 or who.size == 0:
        return
    counts[who] += budget // who.size
    counts[who[: budget % who.size]] += 1


def sampling_budget(
    p: FloatArray, known: npt.NDArray[np.bool_], n: int, n_low: int, n_high: int
) -> npt.NDArray[np.int64]:
    """Rollouts per prompt of a batch as the authors' ``sampling_budget_by_knapsack`` allocates
    ``len(p) * n`` of them (module docstring): ``p`` the estimates, ``known`` which count."""
    m = p.size
    counts = np.where(known, n_low, n).astype(np.int64)
    effective = np.flatnonzero(known & (p > 0) & (p < 1))
    zero = np.flatnonzero(known & (p <= 0))
    left = m * n - int(counts.sum())
    if left <= 0:
        return counts
    if effective.size == 0:
        if zero.size:
            _spread(counts, zero, left)
        else:
            counts[:] = n
        return counts
    q = np.maximum(p[effective], 1.0 - p[effective])
    # floor(min(n_high, log(1 - c) / log q)): the number of m in 1..n_high with q**m >= 1 - c
    # (q**m falls with m), counted with products rather than np.log, whose float64 kernel
    # differs between CPUs.
    estimated = int(np.sum(_rollouts_to_confidence(q, n_high)))
    if estimated < left:
        others = zero if zero.size else np.setdiff1d(np.arange(m), effective)
        _spread(counts, others, left - estimated)
        left = estimated
    counts[effective] = allocate(p[effective], effective.size * n_low + left, n_low, n_high)
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
        seed: int = SEED.default,
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
        # The reward buffer (module docstring): successes and rewards among each prompt's latest
        # BUFFER_LENGTH rewards, and the rewards it has had in all. A prior (a reference model's
        # pass rate) counts as a full buffer at that rate.
        n = self.num_tasks
        self.buffer_successes: FloatArray = np.zeros(n)
        self.buffer_rewards: FloatArray = np.zeros(n)
        self.rewards_seen: FloatArray = np.zeros(n)
        if prior is not None:
            rates = prior_rates(prior, n)
            have = ~np.isnan(rates)
            self.buffer_rewards[have] = self.rewards_seen[have] = BUFFER_LENGTH
            self.buffer_successes[have] = BUFFER_LENGTH * rates[have]

    @property
    def estimate(self) -> FloatArray:
        """Each prompt's estimated success rate, NaN where it does not count yet (fewer than
        MIN_BUFFER_LENGTH rewards seen)."""
        rate = np.divide(
            self.buffer_successes,
            self.buffer_rewards,
            out=np.full(self.num_tasks, np.nan),
            where=self.buffer_rewards > 0,
        )
        return np.where(self.rewards_seen >= MIN_BUFFER_LENGTH, rate, np.nan)

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        ids = self._order.select(batch_size, exclude=None if allowed is None else ~allowed)
        p = self.estimate[ids]
        counts = sampling_budget(p, ~np.isnan(p), self.n_rollouts, self.n_low, self.n_high)
        succ = self._roll(ids, counts)
        trials = counts.astype(np.float64)
        return RolledBatch(ids, succ, trials, rollouts=self._spent), (ids, succ, trials)

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        # The latest group enters the buffer whole (or its rate, when it alone fills it); what room
        # is left keeps the older rewards at their rate.
        t_old, s_old = self.buffer_rewards[task_ids], self.buffer_successes[task_ids]
        keep = np.clip(BUFFER_LENGTH - trials, 0.0, None)
        share = np.divide(np.minimum(keep, t_old), t_old, out=np.zeros_like(t_old), where=t_old > 0)
        fills = trials >= BUFFER_LENGTH
        self.buffer_successes[task_ids] = np.where(fills, successes * BUFFER_LENGTH / trials, successes + s_old * share)
        self.buffer_rewards[task_ids] = np.where(fills, BUFFER_LENGTH, trials + t_old * share)
        self.rewards_seen[task_ids] += trials

    def _extra_state(self) -> dict[str, Any]:
        return {
            "order": self._order.state_dict(),
            "buffer_successes": self.buffer_successes.copy(),
            "buffer_rewards": self.buffer_rewards.copy(),
            "rewards_seen": self.rewards_seen.copy(),
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        n = self.num_tasks
        s = saved_array(state, "buffer_successes", (n,), np.float64)
        t = saved_array(state, "buffer_rewards", (n,), np.float64)
        seen = saved_array(state, "rewards_seen", (n,), np.float64)
        if np.any(~np.isfinite(s)) or np.any(s < 0) or np.any(s > t) or np.any(t > BUFFER_LENGTH) or np.any(seen < t):
            raise CheckpointError("state: has an inconsistent Knapsack-RL reward buffer")
        order = EpochOrder(n, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._order = order
        self.buffer_successes, self.buffer_rewards, self.rewards_seen = s, t, seen


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    refs = references(m, weak, strong)  # the weak reference's rate is the first estimate, when given
    return KnapsackAllocation(n, needs_rollout(m, rollout), **p, prior=None if refs is None else refs[0])


METHOD = Method(
    name="knapsack",
    label="Knapsack-RL",
    summary="rollouts per task chosen as a knapsack over expected value and cost, same total budget",
    params=(ROLLOUTS, N_LOW, N_HIGH, SEED),
    references="optional",
    rollout_mode=RolloutMode.CALLBACK,
    aliases=("knapsack-rl",),
    implementation="bots_rft.selector.peers.knapsack:KnapsackAllocation",
    builder=_build,
)
