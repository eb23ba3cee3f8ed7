"""Metrics of the paper (section 4.1, appendix E.4) for task selection and learning efficiency.

- task-selection quality of one step: :func:`effective_ratios` (ETR and the <1 / >0 ratios, and
  the strict ratios Trinity-RFT's selector logs: strict valid, <15/16, >1/16);
- learning efficiency against a baseline curve: :func:`time_to_baseline` (TTB) and
  :func:`best_so_far` (BSF), per step or, on a :func:`rollout_axis`, per rollout spent;
- quality of implicit evidence: :func:`pearson` and :func:`roc_auc` (hand-written, so that neither
  scipy nor scikit-learn is a runtime dependency);
- heatmap data: :func:`rate_histogram` and :func:`rate_heatmap`;
- :func:`mean_ci` for the 95% intervals over seeds drawn around curves.

All functions are pure and take array-likes; bad input raises :class:`~bots_rft.errors.BotsError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._portable import int_power
from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "TTB_FRACTIONS",
    "BSF_BUDGETS",
    "STRICT_LOW",
    "STRICT_HIGH",
    "EffectiveRatios",
    "effective_ratios",
    "first_reach",
    "rollout_axis",
    "time_to_baseline",
    "best_so_far",
    "format_ratio",
    "pearson",
    "roc_auc",
    "effective_probability",
    "rate_histogram",
    "rate_heatmap",
    "rate_heatmap_from_counts",
    "mean_ci",
]

TTB_FRACTIONS: tuple[float, ...] = (0.5, 0.75, 1.0)
BSF_BUDGETS: tuple[float, ...] = (0.25, 0.5, 1.0)

#: Bounds of the "strict" ratios, on a task's mean reward, exactly as Trinity-RFT's
#: ``PassRateCalculator`` draws them (fixed fractions of 16, with a 1e-3 margin, whatever the
#: number of rollouts): with 16 rollouts, strict valid means 2 to 14 successes.
STRICT_LOW: float = 1 / 16 + 1e-3
STRICT_HIGH: float = 15 / 16 - 1e-3

FloatArray = npt.NDArray[np.float64]


def _as_1d_float(value: object, name: str) -> FloatArray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidTypeError(f"{name} must be numeric, got {value!r:.80}", name) from exc
    if arr.ndim != 1:
        raise InvalidArgumentError(f"{name} must be 1-D, got shape {arr.shape}", name)
    return arr


def _counts(successes: object, trials: object) -> tuple[FloatArray, FloatArray]:
    s = _as_1d_float(successes, "successes")
    t = np.broadcast_to(np.asarray(trials, dtype=np.float64), s.shape).astype(np.float64)
    if np.any(~np.isfinite(s)) or np.any(~np.isfinite(t)):
        raise InvalidArgumentError("successes and trials must be finite", "successes")
    if np.any(t <= 0):
        raise InvalidArgumentError(f"trials must be > 0, got min {t.min() if t.size else 0}", "trials")
    if np.any(s < 0) or np.any(s > t):
        raise InvalidArgumentError("successes must lie in [0, trials]", "successes")
    return s, t


# ---------------------------------------------------------------------------------------------
# Task-selection quality
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EffectiveRatios:
    """Shares of one step's selected tasks by empirical success rate over their rollouts.

    ``etr``, ``below_one`` and ``above_zero`` are Trinity-RFT's ``selection/valid_ratio``,
    ``selection/<1_ratio`` and ``selection/>0_ratio``; the last three fields are its
    ``selection/strict_valid_ratio``, ``selection/<15_16_ratio`` and ``selection/>1_16_ratio``.
    """

    etr: float  # 0 < rate < 1: the task carries a GRPO learning signal
    below_one: float  # rate < 1: not (yet) mastered
    above_zero: float  # rate > 0: not (currently) impossible
    strict_valid: float = math.nan  # STRICT_LOW < rate < STRICT_HIGH: 2..14 of 16 successes
    below_15_16: float = math.nan  # rate < STRICT_HIGH
    above_1_16: float = math.nan  # rate > STRICT_LOW


def effective_ratios(successes: object, trials: object) -> EffectiveRatios:
    """ETR, <1 and >0 ratios of a batch; ``successes[i]`` of ``trials`` (scalar or per entry).

    Comparisons are on counts (``0 < s < t``), not on rates, so fractional rewards work and no
    rounding can move a task across the boundary. The strict ratios compare the rate ``s / t``
    with :data:`STRICT_LOW` and :data:`STRICT_HIGH`, as Trinity-RFT does on mean rewards.
    """
    s, t = _counts(successes, trials)
    if s.size == 0:
        raise InvalidArgumentError("successes must not be empty", "successes")
    above = s > 0
    below = s < t
    rate = s / t
    strict_above = rate > STRICT_LOW
    strict_below = rate < STRICT_HIGH
    return EffectiveRatios(
        etr=float(np.mean(above & below)),
        below_one=float(np.mean(below)),
        above_zero=float(np.mean(above)),
        strict_valid=float(np.mean(strict_above & strict_below)),
        below_15_16=float(np.mean(strict_below)),
        above_1_16=float(np.mean(strict_above)),
    )


# ---------------------------------------------------------------------------------------------
# Learning efficiency against a baseline: TTB and BSF
# ---------------------------------------------------------------------------------------------


def _curve(steps: object, values: object, name: str) -> tuple[FloatArray, FloatArray]:
    x = _as_1d_float(steps, f"{name}_steps")
    y = _as_1d_float(values, name)
    if x.shape != y.shape:
        raise InvalidArgumentError(f"{name}_steps and {name} differ in length ({x.size} vs {y.size})", name)
    if x.size == 0:
        raise InvalidArgumentError(f"{name} must not be empty", name)
    # Non-decreasing, not strictly: on the rollouts axis a step that spent nothing (a method that
    # trained on groups generated earlier) leaves x where it was.
    if np.any(np.diff(x) < 0):
        raise InvalidArgumentError(f"{name}_steps must be non-decreasing", f"{name}_steps")
    if np.any(~np.isfinite(y)) or np.any(~np.isfinite(x)):
        raise InvalidArgumentError(f"{name} must be finite", name)
    return x, y


def first_reach(steps: object, values: object, target: float) -> float | None:
    """The (linearly interpolated) step at which ``values`` first reaches ``target``, or None.

    Between the last evaluation below the target and the first one at or above it, the curve is
    taken as a straight line, as in the paper's TTB definition.
    """
    x, y = _curve(steps, values, "values")
    # A relative tolerance, so that a target computed as init + 1.0*(best - init) still counts
    # as reached by the curve whose best it is.
    tol = 1e-9 * max(1.0, abs(target))
    hits = np.flatnonzero(y >= target - tol)
    if hits.size == 0:
        return None
    i = int(hits[0])
    if i == 0:
        return float(x[0])
    x0, x1, y0, y1 = float(x[i - 1]), float(x[i]), float(y[i - 1]), float(y[i])
    frac = min(1.0, max(0.0, (target - y0) / (y1 - y0)))
    return x0 + frac * (x1 - x0)


def rollout_axis(rollouts_per_step: object, start: float = 0.0) -> FloatArray:
    """Rollouts spent before each evaluation: ``[start, start + r_1, start + r_1 + r_2, ...]``
    for ``r_t`` rollouts at step t. With it as the x-axis of :func:`time_to_baseline` and
    :func:`best_so_far`, they measure per rollout spent instead of per step, so a method that
    rolls out more per step (dynamic sampling) pays for it. A step may spend nothing (SPEED-RL
    trains on a queue generated earlier); the total must be positive."""
    r = _as_1d_float(rollouts_per_step, "rollouts_per_step")
    if np.any(~np.isfinite(r)) or np.any(r < 0) or not r.sum() > 0:
        raise InvalidArgumentError(
            f"rollouts_per_step must be finite, >= 0 and not all 0, got min {r.min() if r.size else 0}",
            "rollouts_per_step",
        )
    return np.concatenate(([float(start)], float(start) + np.cumsum(r)))


def time_to_baseline(
    steps: object,
    values: object,
    baseline_steps: object,
    baseline_values: object,
    fractions: Sequence[float] = TTB_FRACTIONS,
) -> list[float | None]:
    """TTB(τ) for each τ in ``fractions``: steps the method needs to first reach
    ``P_init + τ·(P_best - P_init)`` of the baseline, divided by the baseline's steps.

    ``P_init`` is the baseline's first value and ``P_best`` its best. "Steps" are whatever the
    x-axes count: training steps, or rollouts spent (:func:`rollout_axis`). None means the method never
    reaches the target (shown as "-"); NaN means the ratio is undefined (the baseline does not
    improve, or reaches the target at a step 0).
    """
    _curve(steps, values, "values")
    bx, by = _curve(baseline_steps, baseline_values, "baseline_values")
    p_init, p_best = float(by[0]), float(by.max())
    out: list[float | None] = []
    for tau in fractions:
        if not 0.0 < tau <= 1.0:
            raise InvalidArgumentError(f"fractions must lie in (0, 1], got {tau}", "fractions")
        target = p_best if tau == 1.0 else p_init + tau * (p_best - p_init)
        base = first_reach(bx, by, target)
        if p_best <= p_init or base is None or base <= 0.0:
            out.append(math.nan)
            continue
        mine = first_reach(steps, values, target)
        out.append(None if mine is None else mine / base)
    return out


def best_so_far(
    steps: object,
    values: object,
    baseline_steps: object,
    baseline_values: object,
    budgets: Sequence[float] = BSF_BUDGETS,
    total_steps: float | None = None,
) -> list[float | None]:
    """BSF(β) for each β in ``budgets``: best value within the first ``floor(β·T)`` steps divided
    by the baseline's best within the same steps.

    ``T`` is ``total_steps``, by default the baseline's last evaluated step. None where either
    curve has no evaluation within the budget or the baseline's best is 0.
    """
    x, y = _curve(steps, values, "values")
    bx, by = _curve(baseline_steps, baseline_values, "baseline_values")
    total = float(bx[-1]) if total_steps is None else float(total_steps)
    if not total > 0:
        raise InvalidArgumentError(f"total_steps must be > 0, got {total}", "total_steps")
    out: list[float | None] = []
    for beta in budgets:
        if not 0.0 < beta <= 1.0:
            raise InvalidArgumentError(f"budgets must lie in (0, 1], got {beta}", "budgets")
        limit = math.floor(beta * total + 1e-9)
        mine, base = y[x <= limit], by[bx <= limit]
        if mine.size == 0 or base.size == 0 or base.max() == 0:
            out.append(None)
        else:
            out.append(float(mine.max() / base.max()))
    return out


def format_ratio(value: float | None, digits: int = 2) -> str:
    """A TTB/BSF cell as the paper prints it: ``0.75``, ``-`` (never reached), ``n/a``."""
    if value is None:
        return "-"
    if math.isnan(value):
        return "n/a"
    return f"{value:.{digits}f}"


# ---------------------------------------------------------------------------------------------
# Quality of implicit evidence
# ---------------------------------------------------------------------------------------------


def pearson(x: object, y: object) -> float:
    """Pearson correlation of two equally long vectors; NaN if either is constant or n < 2."""
    a = _as_1d_float(x, "x")
    b = _as_1d_float(y, "y")
    if a.shape != b.shape:
        raise InvalidArgumentError(f"x and y differ in length ({a.size} vs {b.size})", "y")
    if a.size < 2:
        return math.nan
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(np.dot(da, da)) * float(np.dot(db, db)))
    if denom == 0.0:
        return math.nan
    return float(np.dot(da, db) / denom)


def roc_auc(scores: object, labels: object) -> float:
    """Area under the ROC curve of ``scores`` for boolean ``labels`` (Mann–Whitney U, ties count
    one half); NaN when one class is empty."""
    s = _as_1d_float(scores, "scores")
    lab = np.asarray(labels)
    if lab.shape != s.shape:
        raise InvalidArgumentError(f"labels must have shape {s.shape}, got {lab.shape}", "labels")
    lab = lab.astype(bool)
    n_pos = int(lab.sum())
    n_neg = lab.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    # Average ranks (1-based) so that tied scores split their pairs evenly.
    _, inverse, counts = np.unique(s, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    avg_rank = ends - (counts - 1) / 2.0
    ranks = avg_rank[inverse.reshape(-1)]
    u = float(ranks[lab].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def effective_probability(p: object, n: int) -> FloatArray:
    """Probability that ``n`` rollouts at success rate ``p`` are neither all 0 nor all 1: the score
    used to rank tasks by how likely they are to be effective."""
    q = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)
    return np.asarray(1.0 - int_power(q, n) - int_power(1.0 - q, n), dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# Heatmap of selected tasks' empirical success rates
# ---------------------------------------------------------------------------------------------


def rate_histogram(successes: object, n: int) -> npt.NDArray[np.int64]:
    """Counts of a batch's tasks at each empirical rate 0/n, 1/n, …, n/n.

    ``successes`` are per-task counts out of ``n`` rollouts; fractional counts (rewards in [0, 1])
    go to the nearest bin.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise InvalidArgumentError(f"n must be a positive integer, got {n!r}", "n")
    s, _ = _counts(successes, float(n))
    bins = np.rint(s).astype(np.int64)
    return np.bincount(bins, minlength=int(n) + 1).astype(np.int64)


def rate_heatmap(per_step_successes: Sequence[object], n: int) -> FloatArray:
    """``[steps, n+1]`` shares of selected tasks at each empirical rate, row by row (each row sums
    to 1; an empty step is a row of zeros)."""
    rows = [rate_histogram(s, n) for s in per_step_successes]
    if not rows:
        return np.zeros((0, int(n) + 1), dtype=np.float64)
    return rate_heatmap_from_counts(np.stack(rows))


def rate_heatmap_from_counts(counts: object) -> FloatArray:
    """Row-normalise ``[steps, n+1]`` histogram counts (from :func:`rate_histogram`) to shares."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise InvalidArgumentError(f"counts must be 2-D, got shape {counts.shape}", "counts")
    totals = counts.sum(axis=1, keepdims=True)
    return np.asarray(np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0))


# ---------------------------------------------------------------------------------------------
# Intervals over seeds
# ---------------------------------------------------------------------------------------------

# Two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (scipy is not a runtime
# dependency); beyond 30 the normal 1.96 is within 2%.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def mean_ci(values: object, axis: int = 0) -> tuple[FloatArray, FloatArray]:
    """Mean and half-width of the 95% Student-t interval along ``axis`` (e.g. over seeds).

    With one sample the half-width is 0.
    """
    arr = np.asarray(values, dtype=np.float64)
    k = arr.shape[axis]
    # NaN entries (no measurement) are skipped; all-NaN columns give NaN without warnings.
    valid = ~np.isnan(arr)
    count = valid.sum(axis=axis)
    total = np.where(valid, arr, 0.0).sum(axis=axis)
    mean = np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)
    if k < 2:
        return mean, np.zeros_like(mean)
    dev = np.where(valid, arr - np.expand_dims(mean, axis), 0.0)
    var = np.divide((dev**2).sum(axis=axis), count - 1, out=np.full(count.shape, np.nan), where=count > 1)
    df = np.maximum(count - 1, 1)
    t = np.array([_T975[d - 1] if d <= len(_T975) else 1.96 for d in np.ravel(df)])
    half = t.reshape(np.shape(df)) * np.sqrt(var) / np.sqrt(np.maximum(count, 1))
    return mean, np.where(count > 1, half, 0.0)
