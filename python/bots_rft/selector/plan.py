"""Tasks and rollout counts chosen together under a rollout budget (:meth:`bots_rft.BOTS.plan`).

GRPO learns only from *informative* groups: a task's n rollouts carry a signal when
0 < successes < n. A selector that picks B tasks and gives each the same n spends as much on a task
it expects to be nearly solved (where one more rollout may well be the first failure) as on one
near 1/2 (where a few rollouts almost surely disagree). A plan spends a budget of rollouts where
they buy the most informative groups.

**Objective.** For a task whose success rate is θ, n rollouts form an informative group with
probability ``f(θ, n) = 1 − θⁿ − (1 − θ)ⁿ`` (K ~ Binomial(n, θ)). A plan of tasks S with counts
n_i maximises ``Σ_{i∈S} f(θ_i, n_i)``, the expected number of informative groups, subject to
``Σ n_i ≤ budget`` and ``n_min ≤ n_i ≤ n_max``. θ_i is what the selection rule ranks by: the
task's Thompson draw (or its posterior mean with ``thompson=False``). Conditioning on the draw,
rather than averaging θ over the posterior (the Beta-binomial predictive), keeps Thompson
sampling's exploration — an uncertain task sometimes draws a θ near 1/2 and gets tried — and
makes a plan with a fixed count the same as :meth:`~bots_rft.BOTS.select`.

**Exactness.** Three facts make the optimum computable exactly:

1. f(θ, n) depends on θ only through |θ − 1/2| and decreases in it, for every n (θⁿ + (1 − θ)ⁿ
   is convex and even in θ − 1/2). So for any number m of tasks, and any counts, swapping a task
   for one nearer 1/2 never lowers the objective: the best m tasks are the m nearest 1/2 — a
   prefix of the selection rule's ranking when the target is 1/2. With another target the plan
   keeps the rule's ranking (the user asked for tasks near p*) and optimises within its prefixes.
2. For a fixed set, the gain of one more rollout, ``g(θ, n) = f(θ, n+1) − f(θ, n)
   = θⁿ(1 − θ) + θ(1 − θ)ⁿ``, decreases in n (θ, 1 − θ < 1): each task's value is concave above
   n_min. Giving the spare rollouts, one at a time, to the largest remaining gains is then
   optimal (the top ``budget − m·n_min`` gains of the set, taken as prefixes of each task's list).
3. Every m from 1 to ``budget // n_min`` is tried; the objective of each is kept up to date
   incrementally with two heaps (adding a task costs n_min spare rollouts, taken from the smallest
   gains held, and its own gains may displace others), so all m cost O((m·(n_min + Δ)) log m) at
   worst with Δ = n_max − n_min, and usually far less.

Ties go to more tasks (each task's rollouts also teach the selector) and to fewer spare rollouts
(a rollout that adds nothing is not spent), so a plan is a deterministic function of the draws.
With ``n_min = n_max = n`` and ``budget = B·n`` no spare rollout exists and f ≥ 0, so the plan is
the rule's first B tasks, each with n rollouts: exactly ``select(B)``.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import numpy.typing as npt

from .._portable import int_power
from .._validation import as_int
from ..errors import InvalidArgumentError, InvalidTypeError
from ..parameters import Parameter
from .protocol import Plan as Plan

__all__ = [
    "Plan",
    "PlannedBOTS",
    "informative_probability",
    "rollout_gain",
    "allocate_rollouts",
    "check_plan_args",
    "N_MIN",
    "N_MAX",
]

#: BOTS-Plan's bounds on the rollouts one task gets (its budget is batch × n, what BOTS spends).
N_MIN = Parameter("n_min", "int", 8, "BOTS-Plan: fewest rollouts a planned task gets", 1)
N_MAX = Parameter("n_max", "int", 32, "BOTS-Plan: most rollouts a planned task gets", 1)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def informative_probability(theta: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """P(0 < K < n) for K ~ Binomial(n, θ): the chance that n rollouts of a task that succeeds
    with probability θ form an informative group (0 for n ≤ 1)."""
    t = np.asarray(theta, dtype=np.float64)
    k = np.maximum(np.asarray(n, dtype=np.int64), 0)
    return np.asarray(np.where(k >= 1, 1.0 - int_power(t, k) - int_power(1.0 - t, k), 0.0), dtype=np.float64)


def rollout_gain(theta: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """f(θ, n + 1) − f(θ, n) = θⁿ(1 − θ) + θ(1 − θ)ⁿ for n ≥ 1: what one more rollout adds to the
    chance of an informative group (decreasing in n)."""
    t = np.asarray(theta, dtype=np.float64)
    k = np.asarray(n, dtype=np.int64)
    return np.asarray(int_power(t, k) * (1.0 - t) + t * int_power(1.0 - t, k), dtype=np.float64)


def check_plan_args(rollout_budget: object, n_min: object, n_max: object) -> tuple[int, int, int]:
    """The budget (an int ≥ 0) and the count bounds (ints, 1 ≤ n_min ≤ n_max), or a typed error
    naming the argument and its value."""
    budget = as_int(rollout_budget, "rollout_budget", minimum=0)
    lo = as_int(n_min, "n_min", minimum=1)
    hi = as_int(n_max, "n_max", minimum=1)
    if hi < lo:
        raise InvalidArgumentError(f"n_max: must be >= n_min={lo}, got {hi}", "n_max")
    return budget, lo, hi


def allocate_rollouts(theta: npt.ArrayLike, rollout_budget: int, n_min: int, n_max: int) -> IntArray:
    """The optimal counts for a ranked list of candidates (see the module docstring).

    ``theta``: the candidates' success rates, in the selection rule's order. Returns the counts of
    the first m candidates (m chosen by the optimisation; ``len(result)`` is m); the rest get
    none. ``Σ counts ≤ rollout_budget`` and ``n_min ≤ counts ≤ n_max`` always hold."""
    budget, lo, hi = check_plan_args(rollout_budget, n_min, n_max)
    t = np.asarray(theta, dtype=np.float64).reshape(-1)
    big_m = min(t.size, budget // lo)
    if big_m == 0:
        return np.zeros(0, dtype=np.int64)
    t = t[:big_m]
    spare_max = hi - lo
    base = informative_probability(t, lo)
    if spare_max == 0:
        best_m = _best_prefix(np.cumsum(base))
        return np.full(best_m, lo, dtype=np.int64)
    values = _prefix_values(t, base, budget, lo, spare_max)
    best_m = _best_prefix(values)
    return _counts_for(t[:best_m], budget - best_m * lo, lo, spare_max)


def _best_prefix(values: FloatArray) -> int:
    """The largest m (1-based) whose objective equals the best (ties: more tasks)."""
    best = float(np.max(values))
    # Sums of the same terms in different orders can differ in the last bits; within that, a
    # plan with more tasks counts as equal.
    tolerance = 1e-12 * max(1.0, abs(best))
    return int(np.flatnonzero(values >= best - tolerance)[-1]) + 1


def _prefix_values(t: FloatArray, base: FloatArray, budget: int, lo: int, spare_max: int) -> FloatArray:
    """The best objective with the first m candidates, for every m.

    The spare rollouts held form, for each task, a prefix of its gains (``held[i]`` of them).
    Two lazy heaps keep the smallest gain held (the next to give back) and the largest not held
    (the next to take); an entry is current when its position matches ``held``."""
    m_total = t.size
    held = [0] * m_total  # a list: this loop indexes it one entry at a time
    gains: list[list[float]] = rollout_gain(t[:, None], lo + np.arange(spare_max)[None, :]).tolist()
    given_back: list[tuple[float, int, int]] = []  # (gain, -task, -position): smallest first
    to_take: list[tuple[float, int, int]] = []  # (-gain, task, position): largest first
    values = np.empty(m_total, dtype=np.float64)
    size = 0
    spare_sum = 0.0
    base_sum = 0.0

    def top_held() -> tuple[float, int, int] | None:
        while given_back:
            g, neg_i, neg_c = given_back[0]
            if held[-neg_i] - 1 == -neg_c:
                return g, -neg_i, -neg_c
            heapq.heappop(given_back)
        return None

    def top_free() -> tuple[float, int, int] | None:
        while to_take:
            neg_g, i, c = to_take[0]
            if held[i] == c:
                return -neg_g, i, c
            heapq.heappop(to_take)
        return None

    def give_back(i: int) -> float:
        held[i] -= 1
        c = held[i]
        heapq.heappush(to_take, (-gains[i][c], i, c))
        if c > 0:
            heapq.heappush(given_back, (gains[i][c - 1], -i, -(c - 1)))
        return gains[i][c]

    def take(i: int) -> float:
        c = held[i]
        held[i] += 1
        heapq.heappush(given_back, (gains[i][c], -i, -c))
        if c + 1 < spare_max:
            heapq.heappush(to_take, (-gains[i][c + 1], i, c + 1))
        return gains[i][c]

    for m in range(1, m_total + 1):
        i = m - 1
        base_sum += float(base[i])
        heapq.heappush(to_take, (-gains[i][0], i, 0))
        spare = budget - m * lo
        while size > spare:  # the new task's n_min rollouts come out of the smallest gains held
            worst = top_held()
            assert worst is not None
            spare_sum -= give_back(worst[1])
            size -= 1
        while True:
            free = top_free()
            if free is None or free[0] <= 0.0:
                break
            if size < spare:
                spare_sum += take(free[1])
                size += 1
                continue
            worst = top_held()
            # Better: a larger gain, or an equal one earlier in (task, position) order.
            if worst is None or (free[0], -free[1], -free[2]) <= (worst[0], -worst[1], -worst[2]):
                break
            spare_sum -= give_back(worst[1])
            spare_sum += take(free[1])
        values[i] = base_sum + spare_sum
    return values


def _counts_for(t: FloatArray, spare: int, lo: int, spare_max: int) -> IntArray:
    """Counts for a fixed set: n_min each plus the ``spare`` largest positive gains (ties to the
    earlier task, then the earlier rollout, so each task's share is a prefix of its gains)."""
    m = t.size
    counts = np.full(m, lo, dtype=np.int64)
    if m == 0 or spare <= 0:
        return counts
    gains = rollout_gain(t[:, None], lo + np.arange(spare_max)[None, :])  # [m, spare_max]
    task = np.repeat(np.arange(m), spare_max)
    position = np.tile(np.arange(spare_max), m)
    flat = gains.reshape(-1)
    order = np.lexsort((position, task, -flat))
    chosen = order[:spare]
    chosen = chosen[flat[chosen] > 0.0]
    counts += np.bincount(task[chosen], minlength=m)
    return counts


class PlannedBOTS:
    """BOTS that plans each step's tasks *and* rollout counts (the ``bots-plan`` method), for loops
    that roll out through a callback (the simulator; see
    :class:`bots_rft.selector.protocol.RollsOut`).

    ``select(B)`` spends a budget of ``B × n_rollouts`` rollouts — what ``bots`` spends on B tasks
    — as :meth:`bots_rft.BOTS.plan` allocates it with ``n_min ≤ counts ≤ n_max``, rolls the plan
    out through ``rollout(task_ids, counts)``, and returns the planned ids (their number is the
    plan's, not necessarily B). :meth:`take_batch` then hands over the groups with their own
    trials; ``update`` feeds them back to the BOTS posterior. Its state is the BOTS state (plus the
    rollouts spent), so a checkpoint resumes exactly."""

    kind = "bots-plan"

    def __init__(self, selector: Any, rollout: Any, *, n_rollouts: int, n_min: int, n_max: int) -> None:
        if not callable(rollout):
            raise InvalidTypeError(f"rollout: must be callable, got {rollout!r}", "rollout")
        self.n_rollouts = as_int(n_rollouts, "n_rollouts", minimum=1)
        _, self.n_min, self.n_max = check_plan_args(0, n_min, n_max)
        self.selector = selector
        self.rollout = rollout
        #: Every rollout generated, summed over all selections.
        self.total_rollouts = 0
        self._pending: Any = None

    @property
    def num_tasks(self) -> int:
        return int(self.selector.num_tasks)

    # What the simulator and the step metrics read from a BOTS selector, passed through.
    @property
    def capability(self) -> float | None:
        return self.selector.capability  # type: ignore[no-any-return]

    def predicted(self) -> FloatArray | None:
        return self.selector.predicted()  # type: ignore[no-any-return]

    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        return self.selector.posterior(task_ids)  # type: ignore[no-any-return]

    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """Plan a budget of ``batch_size × n_rollouts`` rollouts, roll it out, return the ids."""
        from .._validation import batch_size as _check_batch
        from .._validation import selectable
        from .protocol import RolledBatch

        allowed = selectable(exclude, self.num_tasks)
        available = self.num_tasks if allowed is None else int(allowed.sum())
        b = _check_batch(batch_size, available)
        plan = self.selector.plan(b * self.n_rollouts, self.n_min, self.n_max, exclude=exclude)
        successes = np.asarray(self.rollout(plan.ids, plan.counts), dtype=np.float64)
        if successes.shape != plan.ids.shape or np.any(~(successes >= 0) | (successes > plan.counts)):
            raise InvalidArgumentError("rollout: must return one success count in [0, counts[i]] per task", "rollout")
        spent = plan.rollouts
        self.total_rollouts += spent
        self._pending = RolledBatch(plan.ids.copy(), successes, plan.counts.astype(np.float64), spent)
        return plan.ids.copy()

    def take_batch(self) -> Any:
        """The last selection's :class:`~bots_rft.selector.protocol.RolledBatch`, once; then None."""
        pending, self._pending = self._pending, None
        return pending

    def update(
        self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None, *, policy_lag: Any = None
    ) -> None:
        """Feed the groups back to the BOTS posterior (:meth:`bots_rft.BOTS.update`)."""
        self.selector.update(task_ids, successes, trials, predicted, policy_lag=policy_lag)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = self.selector.state_dict()
        state["total_rollouts"] = self.total_rollouts
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selector.load_state_dict(state)
        self.total_rollouts = int(state.get("total_rollouts", 0)) if isinstance(state, dict) else 0
        self._pending = None
