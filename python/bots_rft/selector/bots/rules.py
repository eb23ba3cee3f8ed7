"""The rules that shape an update beyond the paper's eq. 1: adaptive ρ (halve ρ when the
estimator's predictions miss), adaptive λ (scale λ by the learner's observed drift) and the
weighting of evidence from stale policies (``lag_discount ** policy_lag``). Shared by every
selector backend, so each applies them identically."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..._portable import int_power
from ..._validation import FloatArray, IntArray, as_int
from ...errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:
    from ... import _core
    from ...estimators import StepEvidence

# Adaptive ρ (the authors' rule): halve ρ when the estimator's predictions for a batch miss the
# observed rates by this much on average.
ADAPTIVE_RHO_MAE = 0.25

#: Adaptive λ's smoothing of the drift statistic, and how far λ may move from its setting.
DRIFT_MOMENTUM = 0.9
LAM_RANGE = 4.0


def lag_weighted(
    succ: FloatArray, tri: FloatArray, policy_lag: Any, size: int, lag_discount: float
) -> tuple[FloatArray, FloatArray]:
    """Successes and trials scaled by ``lag_discount ** lag`` (unchanged when it is 1): the
    weighting of evidence from stale policies, shared by BOTS and the sharded selector."""
    lag = check_policy_lag(policy_lag, size)
    if lag is None or lag_discount == 1.0 or not np.any(lag):
        return succ, tri
    if succ.size != size or tri.size not in (1, size):
        return succ, tri  # the core reports the length mismatch with its own message
    # By repeated squaring, not np.power (whose float64 kernel differs between CPUs): the weights
    # reach α and β, which must be the same bits everywhere. Clamped above 0: evidence of any age
    # stays evidence (trials must be > 0), just negligible.
    weight = np.maximum(int_power(lag_discount, lag), np.finfo(np.float64).tiny)
    return succ * weight, np.broadcast_to(tri, (size,)) * weight


def smoothed_drift(previous: float | None, alpha: FloatArray, beta: FloatArray, batch: _core.Batch) -> float | None:
    """Adaptive λ's statistic after this batch (see :attr:`BOTS.lam_in_use`)."""
    n = alpha + beta
    mean = alpha / n
    trials = batch.trials
    variance = mean * (1.0 - mean) * (trials + n) / (trials * (1.0 + n))
    ok = variance > 0
    if not ok.any():
        return previous
    d = float(np.mean((batch.successes[ok] / trials[ok] - mean[ok]) ** 2 / variance[ok]))
    return d if previous is None else DRIFT_MOMENTUM * previous + (1.0 - DRIFT_MOMENTUM) * d


def lam_for(lam: float, drift: float | None) -> float:
    if drift is None or lam == 0.0:
        return lam
    return float(min(max(lam * drift, lam / LAM_RANGE), min(1.0, LAM_RANGE * lam)))


def check_policy_lag(value: Any, size: int) -> IntArray | None:
    """``policy_lag`` as one non-negative int per entry (None: no lag)."""
    if value is None:
        return None
    if np.ndim(value) == 0:
        scalar = value.item() if isinstance(value, np.ndarray | np.generic) else value
        lag = as_int(scalar, "policy_lag", minimum=0)
        return np.full(size, lag, dtype=np.int64)
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise InvalidTypeError(
            f"policy_lag: must be an int or a 1-D array of ints, got {arr.dtype} of shape {arr.shape}", "policy_lag"
        )
    if arr.size != size:
        raise InvalidArgumentError(
            f"policy_lag: has {arr.size} entries, expected {size} (one per task id)", "policy_lag"
        )
    if arr.size and int(arr.min()) < 0:
        raise InvalidArgumentError(f"policy_lag: must be >= 0, got {int(arr.min())}", "policy_lag")
    return arr.astype(np.int64)


def predictions_miss(step: StepEvidence, batch: _core.Batch) -> bool:
    """Adaptive ρ's test: the step's predictions for the batch's tasks are off by ≥ 0.25 on
    average (tasks without a prediction left out; no prediction at all: no)."""
    ids = batch.ids
    predicted = step.predictions_at(ids)
    if predicted is None:
        return False
    has = ~np.isnan(predicted)
    if not has.any():
        return False
    observed = batch.successes[has] / batch.trials[has]
    return bool(np.mean(np.abs(predicted[has] - observed)) >= ADAPTIVE_RHO_MAE)
