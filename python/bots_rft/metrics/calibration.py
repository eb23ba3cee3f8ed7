"""How well the selector predicted what it then observed: calibration of one step's picks.

At selection time the selector holds a predicted pass rate for every task it picks (the posterior
mean α / (α + β); :func:`predicted_pass_rates`); the rollouts then report k successes out of n.
Four numbers say how the two compare, per step:

- :func:`brier_score`: the mean squared error of the prediction over the step's rollouts,
  ``Σ_i [k_i (1 − p_i)² + (n_i − k_i) p_i²] / Σ_i n_i`` — the Brier score of every rollout's
  0/1 outcome (fractional k for graded rewards). 0 is perfect; a rate of 1/2 predicted as 1/2
  still scores 1/4, so compare it across methods or steps, not with 0.
- :func:`expected_calibration_error`: tasks binned by prediction (equal-width bins), the
  rollout-weighted mean of |mean prediction − observed rate| over bins. Small when "tasks
  predicted at 0.3 pass 30% of the time".
- :func:`spearman`: the rank correlation of predictions against observed rates k/n — whether the
  selector ranks the picks right, whatever its scale.
- :func:`zero_variance_share`: the share of groups with k = 0 or k = n, which carry no GRPO
  signal; what a well-calibrated selector aiming at p* = 1/2 keeps low.

:class:`CalibrationTracker` keeps these per step (for plots and logs) and checkpoints them;
``metrics()`` gives the ``bots/calibration_*`` entries trainers log.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError

__all__ = [
    "CALIBRATION_BINS",
    "CalibrationStep",
    "CalibrationTracker",
    "brier_score",
    "expected_calibration_error",
    "spearman",
    "zero_variance_share",
    "predicted_pass_rates",
    "calibration_metrics",
]

FloatArray = npt.NDArray[np.float64]

#: Equal-width bins of the expected calibration error.
CALIBRATION_BINS = 10


def _outcomes(predicted: Any, successes: Any, trials: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Predictions in [0, 1], successes in [0, trials], trials > 0, all 1-D of one length (a
    scalar ``trials`` is shared); NaN predictions are kept for the caller to drop."""
    arrays = []
    for name, value in (("predicted", predicted), ("successes", successes)):
        try:
            arr = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidTypeError(f"{name}: must be numeric, got {type(value).__name__}", name) from None
        if arr.ndim != 1:
            raise InvalidArgumentError(f"{name}: must be 1-D, got shape {arr.shape}", name)
        arrays.append(arr)
    p, k = arrays
    if p.size != k.size:
        raise InvalidArgumentError(f"predicted: has {p.size} entries, successes has {k.size}", "predicted")
    try:
        n = np.broadcast_to(np.asarray(trials, dtype=np.float64), k.shape).astype(np.float64)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"trials: must be a number or one per entry, got {trials!r:.80}", "trials") from None
    if not np.all(np.isfinite(n) & (n > 0)):
        raise InvalidArgumentError("trials: must be finite and > 0", "trials")
    if not np.all(np.isfinite(k) & (k >= 0) & (k <= n)):
        raise InvalidArgumentError("successes: must lie in [0, trials]", "successes")
    known = ~np.isnan(p)
    if np.any((p[known] < 0) | (p[known] > 1)):
        raise InvalidArgumentError("predicted: must lie in [0, 1] (NaN: none)", "predicted")
    return p, k, n


def _known(predicted: Any, successes: Any, trials: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
    p, k, n = _outcomes(predicted, successes, trials)
    keep = ~np.isnan(p)
    return p[keep], k[keep], n[keep]


def brier_score(predicted: Any, successes: Any, trials: Any) -> float:
    """Mean squared error of ``predicted`` over every rollout's outcome (NaN: nothing predicted)."""
    p, k, n = _known(predicted, successes, trials)
    if p.size == 0:
        return math.nan
    return float(np.sum(k * (1.0 - p) ** 2 + (n - k) * p**2) / np.sum(n))


def expected_calibration_error(predicted: Any, successes: Any, trials: Any, bins: int = CALIBRATION_BINS) -> float:
    """Σ_bins (rollouts in bin / all rollouts) · |mean prediction − observed rate| over
    equal-width bins of the prediction (NaN: nothing predicted)."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise InvalidArgumentError(f"bins: must be an int >= 1, got {bins!r}", "bins")
    p, k, n = _known(predicted, successes, trials)
    if p.size == 0:
        return math.nan
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    rollouts = np.bincount(which, weights=n, minlength=bins)
    predicted_sum = np.bincount(which, weights=p * n, minlength=bins)
    observed_sum = np.bincount(which, weights=k, minlength=bins)
    return float(np.sum(np.abs(predicted_sum - observed_sum)) / np.sum(rollouts))


def _ranks(x: FloatArray) -> FloatArray:
    """Ranks 1..n, ties sharing their mean rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size, dtype=np.float64)
    sorted_x = x[order]
    start = 0
    for end in range(1, x.size + 1):
        if end == x.size or sorted_x[end] != sorted_x[start]:
            ranks[order[start:end]] = 0.5 * (start + end - 1) + 1.0
            start = end
    return ranks


def spearman(x: Any, y: Any) -> float:
    """Spearman's rank correlation (ties get mean ranks; NaN pairs dropped; NaN when fewer than two
    pairs remain or either side is constant)."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.size != b.size:
        raise InvalidArgumentError(f"x: has {a.size} entries, y has {b.size}", "x")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if a.size < 2:
        return math.nan
    ra, rb = _ranks(a) - (a.size + 1) / 2, _ranks(b) - (b.size + 1) / 2
    denominator = math.sqrt(float(np.sum(ra**2) * np.sum(rb**2)))
    return math.nan if denominator == 0.0 else float(np.sum(ra * rb) / denominator)


def zero_variance_share(successes: Any, trials: Any) -> float:
    """The share of groups whose rollouts all agree (k = 0 or k = n): no GRPO signal."""
    k = np.asarray(successes, dtype=np.float64).reshape(-1)
    if k.size == 0:
        return math.nan
    _, k, n = _outcomes(np.full(k.size, np.nan), k, trials)
    return float(np.mean((k == 0) | (k == n)))


def predicted_pass_rates(selector: Any, task_ids: Any) -> FloatArray:
    """The selector's predicted pass rate of ``task_ids`` now: its posterior mean α / (α + β)
    (call it at selection time, before the rollouts' update). NaN for selectors without a Beta
    posterior (the baselines)."""
    ids = np.asarray(task_ids, dtype=np.int64).reshape(-1)
    posterior = getattr(selector, "posterior", None)
    if not callable(posterior):
        return np.full(ids.size, np.nan)
    alpha, beta = posterior(ids)
    return np.asarray(alpha / (alpha + beta), dtype=np.float64)


class CalibrationStep(NamedTuple):
    """One step's calibration (NaN where undefined: no prediction, fewer than two picks)."""

    brier: float
    ece: float
    spearman: float
    zero_variance: float

    def metrics(self, prefix: str = "bots/") -> dict[str, float]:
        """``<prefix>calibration_brier`` / ``_ece`` / ``_spearman`` and ``<prefix>zero_variance_share``
        (NaN entries left out)."""
        out = {
            f"{prefix}calibration_brier": self.brier,
            f"{prefix}calibration_ece": self.ece,
            f"{prefix}calibration_spearman": self.spearman,
            f"{prefix}zero_variance_share": self.zero_variance,
        }
        return {key: value for key, value in out.items() if not math.isnan(value)}


def calibration_metrics(predicted: Any, successes: Any, trials: Any) -> CalibrationStep:
    """The four numbers of one step (see the module docstring)."""
    p, k, n = _outcomes(predicted, successes, trials)
    return CalibrationStep(
        brier_score(p, k, n),
        expected_calibration_error(p, k, n),
        spearman(p, k / n),
        zero_variance_share(k, n),
    )


class CalibrationTracker:
    """Per-step calibration of a run: feed each step's predictions (made at selection time) and
    outcomes to :meth:`record`; :attr:`history` holds every step, :meth:`state_dict` checkpoints
    it (a resumed run goes on with the same history)."""

    def __init__(self) -> None:
        self._steps: list[CalibrationStep] = []

    def record(self, predicted: Any, successes: Any, trials: Any) -> CalibrationStep:
        step = calibration_metrics(predicted, successes, trials)
        self._steps.append(step)
        return step

    @property
    def history(self) -> list[CalibrationStep]:
        return list(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def as_arrays(self) -> dict[str, FloatArray]:
        """Each measure over the steps recorded, as an array (one entry per step)."""
        return {
            name: np.array([getattr(s, name) for s in self._steps], dtype=np.float64)
            for name in CalibrationStep._fields
        }

    def state_dict(self) -> dict[str, Any]:
        return {"format": "bots-rft/calibration", "version": 1, **self.as_arrays()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != "bots-rft/calibration":
            raise CheckpointError("state: not a bots-rft calibration tracker state")
        try:
            columns = [np.asarray(state[name], dtype=np.float64).reshape(-1) for name in CalibrationStep._fields]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: malformed calibration state ({type(exc).__name__}: {exc})") from None
        if len({c.size for c in columns}) != 1:
            raise CheckpointError("state: calibration columns differ in length")
        self._steps = [CalibrationStep(*map(float, row)) for row in zip(*columns)]
