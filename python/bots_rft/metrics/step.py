"""The ``bots/*`` metrics every trainer integration logs, under one set of names.

Whatever the trainer (TRL, verl, Trinity-RFT, SkyRL, AReaL), a step's selection and update show up
in its logger as:

- ``bots/select_ms``, ``bots/update_ms``: time spent choosing tasks and folding evidence in;
- ``bots/pick_mean_p10`` / ``p50`` / ``p90``: quantiles of the posterior means α/(α+β) of the
  tasks picked (near the target when BOTS is confident about them); with BOTS, also
  ``bots/pick_theta_p*`` (the sampled success rates θ the rule ranked them by) and
  ``bots/pick_predicted_p*`` (the estimator's p̃ for them, where it has one), from
  :meth:`bots_rft.BOTS.explain`;
- ``bots/etr``, ``bots/below_one``, ``bots/above_zero``: of the tasks whose rollouts came back,
  the share with 0 < successes < trials (the groups that carry a GRPO signal), with some failure,
  with some success;
- ``bots/strict_valid``, ``bots/below_15_16``, ``bots/above_1_16``: the same shares with the
  success rate strictly inside (1/16, 15/16), below 15/16, above 1/16 (each bound moved inward by
  1e-3): Trinity-RFT's ``selection/strict_valid_ratio``, ``<15_16_ratio`` and ``>1_16_ratio``
  (see :class:`bots_rft.metrics.EffectiveRatios`);
- ``bots/mean_reward_of_picks``: successes over trials of those rollouts;
- ``bots/groups``, ``bots/rollouts``: how many tasks and rollouts the update saw;
- ``bots/capability``: the interpolation estimator's μ̃, once it exists; ``bots/capability_out_of_range``
  (1 on a step where μ̃ is more than :data:`CAPABILITY_MARGIN` outside [0, 1], else 0) from the first
  such step on, which is also logged as a warning, once per run;
- ``bots/calibration_brier``, ``bots/calibration_ece``, ``bots/calibration_spearman``: how well the
  posterior means of the picks, at the moment they were picked, predicted the k/n their rollouts
  then showed (:mod:`bots_rft.metrics.calibration`; where the integration keeps the predictions), and
  ``bots/zero_variance_share``: the share of groups with k = 0 or k = n.

Integrations add their own counters beside these (verl: ``bots/evicted_groups``; tasks in flight:
``bots/inflight_tasks``; ...), documented with each integration.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..selector.bots import BOTS
from .calibration import calibration_metrics
from .paper import effective_ratios

__all__ = [
    "CAPABILITY_MARGIN",
    "PICK_QUANTILES",
    "Pick",
    "posterior_means",
    "pick_metrics",
    "pick_distributions",
    "outcome_metrics",
    "capability_metrics",
    "calibration_step_metrics",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

logger = logging.getLogger("bots_rft.metrics")

#: Quantiles of the picks' posterior means logged as ``bots/pick_mean_p<q>``.
PICK_QUANTILES = (10, 50, 90)


def posterior_means(selector: Any, task_ids: IntArray) -> FloatArray | None:
    """α / (α + β) of ``task_ids`` (reads only those entries), or None for selectors without a
    Beta posterior (the baselines)."""
    posterior = getattr(selector, "posterior", None)
    if not callable(posterior):
        return None
    a, b = posterior(task_ids)
    return np.asarray(a / (a + b), dtype=np.float64)


def pick_metrics(means: Any, name: str = "mean") -> dict[str, float]:
    """``bots/pick_<name>_p<q>`` over a value of the tasks picked (by default their posterior
    means; NaN entries are left out; none left: no entries)."""
    m = np.asarray(means, dtype=np.float64).reshape(-1)
    m = m[~np.isnan(m)]
    if m.size == 0:
        return {}
    return {f"bots/pick_{name}_p{q}": float(v) for q, v in zip(PICK_QUANTILES, np.percentile(m, PICK_QUANTILES))}


@dataclass(frozen=True)
class Pick:
    """One selection: the task ids, how long ``select`` took, and the picks' posterior means
    at that moment (``None`` for selectors without ``alpha``/``beta``)."""

    task_ids: IntArray
    select_ms: float
    posterior_means: FloatArray | None
    theta: FloatArray | None = None
    predicted: FloatArray | None = None

    @classmethod
    def timed(cls, selector: Any, batch_size: int, exclude: Any = None) -> Pick:
        start = time.perf_counter()
        ids = np.asarray(selector.select(batch_size, exclude=exclude), dtype=np.int64)
        select_ms = (time.perf_counter() - start) * 1e3
        if isinstance(selector, BOTS):
            picks = selector.explain(ids)
            return cls(ids, select_ms, picks.alpha / (picks.alpha + picks.beta), picks.theta, picks.predicted)
        return cls(ids, select_ms, posterior_means(selector, ids))

    @classmethod
    def timed_take(cls, selector: Any, k: int, *, draw_size: int, exclude: Any = None) -> Pick:
        """The same for streaming selection: ``selector.take(k)`` (see :meth:`bots_rft.BOTS.take`)."""
        start = time.perf_counter()
        ids = np.asarray(selector.take(k, draw_size=draw_size, exclude=exclude), dtype=np.int64)
        select_ms = (time.perf_counter() - start) * 1e3
        return cls(ids, select_ms, posterior_means(selector, ids))

    def predictions(self) -> dict[int, float]:
        """Task id -> its posterior mean when picked (empty for selectors without a posterior)."""
        if self.posterior_means is None:
            return {}
        return dict(zip(self.task_ids.tolist(), self.posterior_means.tolist()))

    def metrics(self) -> dict[str, float]:
        return {
            "bots/select_ms": self.select_ms,
            **pick_distributions(self.posterior_means, self.theta, self.predicted),
        }


def pick_distributions(means: Any, theta: Any = None, predicted: Any = None) -> dict[str, float]:
    """Quantiles of what was drawn for the picks: ``bots/pick_mean_p*`` (posterior means),
    ``bots/pick_theta_p*`` (the sampled rates ranked) and ``bots/pick_predicted_p*`` (the
    estimator's p̃); each left out when not given."""
    out: dict[str, float] = {}
    for values, name in ((means, "mean"), (theta, "theta"), (predicted, "predicted")):
        if values is not None:
            out.update(pick_metrics(values, name))
    return out


def outcome_metrics(task_ids: Any, successes: Any, trials: Any = 1.0) -> dict[str, float]:
    """The outcome metrics of one update's evidence: entry ``i`` is ``successes[i]`` out of
    ``trials[i]`` (a scalar: the same for all) for task ``task_ids[i]``; entries of one task are
    summed first (a task whose rollouts come back one by one counts once)."""
    ids = np.asarray(task_ids, dtype=np.int64).reshape(-1)
    succ = np.asarray(successes, dtype=np.float64).reshape(-1)
    tri = np.broadcast_to(np.asarray(trials, dtype=np.float64), succ.shape)
    if succ.size == 0:
        return {}
    tasks, inverse = np.unique(ids, return_inverse=True)
    sums = np.bincount(inverse, weights=succ, minlength=tasks.size)
    totals = np.bincount(inverse, weights=tri, minlength=tasks.size)
    ratios = effective_ratios(sums, totals)
    return {
        "bots/etr": ratios.etr,
        "bots/below_one": ratios.below_one,
        "bots/above_zero": ratios.above_zero,
        "bots/strict_valid": ratios.strict_valid,
        "bots/below_15_16": ratios.below_15_16,
        "bots/above_1_16": ratios.above_1_16,
        "bots/mean_reward_of_picks": float(succ.sum() / tri.sum()) if tri.sum() > 0 else float("nan"),
        "bots/groups": float(tasks.size),
        "bots/rollouts": float(tri.sum()),
    }


def calibration_step_metrics(
    task_ids: Any, successes: Any, trials: Any = 1.0, predicted: dict[int, float] | None = None
) -> dict[str, float]:
    """``bots/calibration_*`` of one update's evidence against ``predicted`` (task id -> the
    pass rate predicted when it was picked; tasks without one are left out) and
    ``bots/zero_variance_share``; entries of one task are summed first, as in
    :func:`outcome_metrics`."""
    ids = np.asarray(task_ids, dtype=np.int64).reshape(-1)
    succ = np.asarray(successes, dtype=np.float64).reshape(-1)
    if succ.size == 0:
        return {}
    tri = np.broadcast_to(np.asarray(trials, dtype=np.float64), succ.shape)
    tasks, inverse = np.unique(ids, return_inverse=True)
    sums = np.bincount(inverse, weights=succ, minlength=tasks.size)
    totals = np.bincount(inverse, weights=tri, minlength=tasks.size)
    known = predicted or {}
    pred = np.array([known.get(int(t), np.nan) for t in tasks], dtype=np.float64)
    return calibration_metrics(pred, np.minimum(sums, totals), totals).metrics()


#: How far μ̃ may lie outside [0, 1] before it is reported. Slightly outside is ordinary (a policy a
#: little below its weak reference, noise in a small batch); far outside, the references do not
#: bracket the policy and the interpolation extrapolates every task's p̃ from them.
CAPABILITY_MARGIN = 0.5

# The selectors already warned about: one warning per run, however many steps stay out of range.
_warned: weakref.WeakSet[Any] = weakref.WeakSet()
# The selectors whose μ̃ has left the range: they log bots/capability_out_of_range every step
# from then on, so the logger's series has no holes.
_seen_out: weakref.WeakSet[Any] = weakref.WeakSet()


def capability_metrics(selector: Any) -> dict[str, float]:
    """``bots/capability`` (μ̃) when the selector's implicit evidence has an estimate; once μ̃ has
    been more than :data:`CAPABILITY_MARGIN` outside [0, 1], also
    ``bots/capability_out_of_range`` (1 on a step where it is, else 0), and one warning per
    selector the first time."""
    capability = getattr(selector, "capability", None)
    if capability is None:
        return {}
    mu = float(capability)
    out = {"bots/capability": mu}
    outside = not -CAPABILITY_MARGIN <= mu <= 1.0 + CAPABILITY_MARGIN
    try:
        if outside:
            _seen_out.add(selector)
        if selector in _seen_out:
            out["bots/capability_out_of_range"] = float(outside)
        if outside and selector not in _warned:
            _warned.add(selector)
            _warn_capability(mu)
    except TypeError:  # a selector that takes no weak reference: the metric alone, every step
        out["bots/capability_out_of_range"] = float(outside)
    return out


def _warn_capability(mu: float) -> None:
    # A framework's logging set-up (logging.config.dictConfig) disables loggers made before it;
    # this warning is the only word a user gets, so undo that.
    logger.disabled = False
    logger.warning(
        f"bots/capability: the interpolation estimator's μ̃ is {mu:.3g}, more than {CAPABILITY_MARGIN} outside "
        "[0, 1]: the weak and strong reference pass rates do not bracket this policy, so every task's predicted "
        "success rate is extrapolated from them. Check that the reference columns belong to this pool and "
        "policy (or lower rho, the weight of that evidence); bots/capability_out_of_range marks such steps"
    )
