"""Implicit evidence from any number of reference pass rates (and optional per-task features).

:class:`MultiReference` generalises the paper's interpolation estimator from two references to
k >= 2, with weights fitted online from the explicit evidence. See the class docstring for the
fit and why it reduces exactly to :class:`~bots_rft.estimators.Interpolation` at k = 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _core
from .._validation import FloatArray, as_floats, as_real, rates_or_nan
from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from ..parameters import MIN_GAP, MOMENTUM
from .base import Estimator, StepEvidence

__all__ = ["MultiReference"]

KIND = "multi-reference"


def _reference_matrix(references: Any) -> npt.NDArray[np.float32]:
    """[N, k] float32 pass rates from an [N, k] array or a list/tuple of k length-N arrays."""
    if isinstance(references, (list, tuple)):
        if len(references) == 0:
            raise InvalidArgumentError("references: needs at least 2 references, got an empty list", "references")
        cols = [rates_or_nan(references[0], "references[0]")]
        cols += [rates_or_nan(r, f"references[{i}]", len(cols[0])) for i, r in enumerate(references[1:], start=1)]
        matrix = np.stack(cols, axis=1)
    else:
        matrix = np.array(as_floats(references, "references", ndim=2), dtype=np.float64, copy=True)
        bad = ~(np.isnan(matrix) | ((matrix >= 0.0) & (matrix <= 1.0)))
        if bad.any():
            i, j = (int(x) for x in np.argwhere(bad)[0])
            raise InvalidArgumentError(
                f"references: must be in [0, 1] or NaN, got {matrix[i, j]} at row {i}, column {j}", "references"
            )
    if matrix.shape[1] < 2:
        raise InvalidArgumentError(
            f"references: needs at least 2 references (columns), got {matrix.shape[1]}", "references"
        )
    if matrix.shape[0] == 0:
        raise InvalidArgumentError("references: needs at least one task (row), got 0", "references")
    return np.ascontiguousarray(matrix, dtype=np.float32)


def _feature_matrix(features: Any, num_tasks: int) -> npt.NDArray[np.float32]:
    """[N, f] float32 features, finite or NaN (unknown)."""
    arr = np.array(as_floats(features, "features", ndim=2), dtype=np.float64, copy=True)
    if arr.shape[0] != num_tasks:
        raise InvalidTypeError(f"features: has {arr.shape[0]} rows, expected num_tasks={num_tasks}", "features")
    if arr.shape[1] == 0:
        raise InvalidArgumentError("features: has 0 columns; pass None for no features", "features")
    if np.isinf(arr).any():
        i, j = (int(x) for x in np.argwhere(np.isinf(arr))[0])
        raise InvalidArgumentError(
            f"features: must be finite or NaN, got {arr[i, j]} at row {i}, column {j}", "features"
        )
    return np.ascontiguousarray(arr, dtype=np.float32)


class MultiReference(Estimator):
    """p̃ from k >= 2 reference pass rates (and optional per-task features), weights fitted online.

    The prediction for task j is p̃_j = clip(Σ_i w_i·r_ij + Σ_l v_l·x_jl, 0, 1), with r_ij the
    i-th reference's pass rate, x_jl an optional feature, and reference weights summing to 1 (an
    affine combination: where every reference agrees, the prediction is that value). Weights may
    be negative or exceed 1: like the interpolation's μ, the policy may lie outside the references.
    A task with any reference or feature NaN gets no prediction.

    The fit, per update, over the batch's tasks that have every column (rates y_b = S_b/T_b):

    1. *Calibration in the large* (the equation the interpolation estimator solves): the batch's
       mean prediction equals its mean observed rate, m·w + f̄·v = ȳ, with m and f̄ the batch means
       of the references and features; together with Σw = 1 these are two linear constraints.
    2. Among the weights satisfying both, the ones whose per-task predictions fit the batch's
       rates best in least squares, with a ridge toward the current smoothed weights (toward
       1/k each, and 0 for features, at the first estimate):
       minimise (1/B)·Σ_b (y_b − r_b·w − x_b·v)² + ``ridge``·‖(w, v) − (w̃, ṽ)‖².
       The ridge keeps directions the batch cannot tell apart (references that agree on it)
       where they were instead of letting rollout noise move them.
    3. Momentum, as the interpolation's μ̃: (w̃, ṽ) ← γ·(w̃, ṽ) + (1−γ)·(w, v); the first
       estimate is taken as it is.

    With two references and no features the two constraints leave exactly one point,
    w = (1−μ, μ) with μ = (ȳ − m_1)/(m_2 − m_1), so steps 2 is void and the estimator *is*
    ``Interpolation(references[:, 0], references[:, 1], momentum, min_gap=min_gap)`` (to float
    rounding). With more, the per-task fit decides the remaining k + f − 2 directions.

    A batch whose reference means all lie within ``min_gap`` of each other (max m − min m <
    ``min_gap``) gives no estimate and leaves the weights as they were, as the interpolation does
    for |m_2 − m_1| < min_gap. Features enter the fit in their own units: standardise them so
    that ``ridge`` means the same for every column.

    The cost per update is O(B·(k+f)²) for the fit plus O(N·(k+f)) for the prediction. References
    and features are stored as float32, as the interpolation's are.
    """

    rebuilt_from_state = True

    def __init__(
        self,
        references: npt.ArrayLike | Sequence[npt.ArrayLike],
        *,
        features: npt.ArrayLike | None = None,
        momentum: float = MOMENTUM.default,
        ridge: float = 0.1,
        min_gap: float = MIN_GAP.default,
    ) -> None:
        self._references = _reference_matrix(references)
        n, k = self._references.shape
        self._features = None if features is None else _feature_matrix(features, n)
        m = MOMENTUM.check(momentum)
        r = as_real(ridge, "ridge")
        if not (np.isfinite(r) and r >= 0.0):
            raise InvalidArgumentError(f"ridge: must be finite and >= 0, got {r}", "ridge")
        g = MIN_GAP.check(min_gap)
        self._momentum, self._ridge, self._min_gap = m, r, g
        # Every column of the fit side by side: references first, then features.
        self._columns = self._references if self._features is None else np.hstack([self._references, self._features])
        self._columns.flags.writeable = False
        self._references.flags.writeable = False
        self._weights: FloatArray | None = None

    # ------------------------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int(self._references.shape[0])

    def __repr__(self) -> str:
        f = 0 if self._features is None else self._features.shape[1]
        return (
            f"MultiReference(num_tasks={len(self)}, references={self.num_references}, features={f}, "
            f"momentum={self._momentum}, ridge={self._ridge}, weights={None if self._weights is None else self._weights.tolist()})"
        )

    @property
    def num_references(self) -> int:
        return int(self._references.shape[1])

    @property
    def references(self) -> FloatArray:
        """The reference pass rates as stored ([N, k], float32 values returned as float64)."""
        return self._references.astype(np.float64)

    @property
    def momentum(self) -> float:
        return self._momentum

    @property
    def ridge(self) -> float:
        return self._ridge

    @property
    def min_gap(self) -> float:
        return self._min_gap

    @property
    def weights(self) -> FloatArray | None:
        """The smoothed weights (w̃ for the references, then ṽ for the features), or None before
        the first estimate."""
        return None if self._weights is None else self._weights.copy()

    @property
    def capability(self) -> float | None:
        """With exactly two references and no features, the second reference's weight: the
        interpolation's μ̃. Otherwise None (there is no single coefficient)."""
        if self._weights is None or self._columns.shape[1] != 2:
            return None
        return float(self._weights[1])

    # ------------------------------------------------------------------------------- fitting
    def _batch_weights(self, batch: _core.Batch) -> FloatArray | None:
        """The weights this batch alone supports (steps 1-2 of the fit), or None."""
        ids = np.asarray(batch.ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            bad = int(ids[(ids < 0) | (ids >= len(self))][0])
            raise InvalidArgumentError(f"task_ids: {bad} is out of range [0, {len(self)})", "task_ids")
        rows = self._columns[ids].astype(np.float64)
        ok = ~np.isnan(rows).any(axis=1)
        if not ok.any():
            return None
        rows = rows[ok]
        y = (np.asarray(batch.successes, dtype=np.float64) / np.asarray(batch.trials, dtype=np.float64))[ok]
        k = self.num_references
        # Sums down the rows, in batch order (as the core sums for the interpolation), then divided.
        sums = np.column_stack([y, rows]).sum(axis=0) / len(y)
        obs, means = float(sums[0]), sums[1:]
        lo, hi = int(np.argmin(means[:k])), int(np.argmax(means[:k]))
        spread = float(means[hi] - means[lo])
        if spread < self._min_gap or spread == 0.0:
            return None
        # A particular solution of both constraints on the pair of references furthest apart,
        # written as the interpolation writes it (lower index = "weak"), so k = 2 is the same sum.
        a, b = min(lo, hi), max(lo, hi)
        mu = (obs - means[a]) / (means[b] - means[a])
        w = np.zeros(rows.shape[1])
        w[a], w[b] = 1.0 - mu, mu
        dims = rows.shape[1]
        if dims == 2:
            return w
        # The rest of the constraint set: w + N z, N an orthonormal basis of the constraints' null space.
        constraints = np.vstack([np.r_[np.ones(k), np.zeros(dims - k)], means])
        null = np.linalg.svd(constraints)[2][2:].T
        centre = self._weights if self._weights is not None else np.r_[np.full(k, 1.0 / k), np.zeros(dims - k)]
        rn = rows @ null
        lhs = rn.T @ rn / len(y) + self._ridge * np.eye(null.shape[1])
        rhs = rn.T @ (y - rows @ w) / len(y) + self._ridge * null.T @ (centre - w)
        z = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
        return np.asarray(w + null @ z, dtype=np.float64)

    def propose(self, batch: _core.Batch) -> FloatArray | None:
        """The smoothed weights after observing ``batch``, without committing them."""
        fitted = self._batch_weights(batch)
        if fitted is None:
            return self._weights
        if self._weights is None:
            return fitted
        return np.asarray(self._momentum * self._weights + (1.0 - self._momentum) * fitted, dtype=np.float64)

    def _predict(self, weights: FloatArray) -> FloatArray:
        # Column by column in float64: no [N, k] float64 temporary, and at k = 2 the same
        # products and sum the interpolation forms.
        out = weights[0] * self._columns[:, 0].astype(np.float64)
        for i in range(1, self._columns.shape[1]):
            out += weights[i] * self._columns[:, i].astype(np.float64)
        return np.clip(out, 0.0, 1.0)

    # ------------------------------------------------------------------------------- Estimator
    def observe(self, batch: _core.Batch) -> StepEvidence:
        proposed = self.propose(batch)
        if proposed is None:
            return StepEvidence({}, None)
        return StepEvidence({"predicted": self._predict(proposed)}, proposed)

    def commit(self, step: StepEvidence) -> None:
        state = step.next_state
        self._weights = None if state is None else np.array(state, dtype=np.float64, copy=True)

    def predict_all(self) -> FloatArray | None:
        return None if self._weights is None else self._predict(self._weights)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "references": self._references.copy(),
            "features": None if self._features is None else self._features.copy(),
            "momentum": self._momentum,
            "ridge": self._ridge,
            "min_gap": self._min_gap,
            "weights": None if self._weights is None else self._weights.copy(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> MultiReference:
        if not isinstance(state, dict) or state.get("kind") != KIND:
            raise CheckpointError(f"evidence: not a {KIND} state: {state!r:.80}")
        try:
            est = cls(
                np.asarray(state["references"]),
                features=state.get("features"),
                momentum=state["momentum"],
                ridge=state["ridge"],
                min_gap=state["min_gap"],
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise CheckpointError(f"evidence: malformed {KIND} state ({type(exc).__name__}: {exc})") from None
        weights = state.get("weights")
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (est._columns.shape[1],) or not np.isfinite(w).all():
                raise CheckpointError(
                    f"evidence: {KIND} weights must be {est._columns.shape[1]} finite numbers, got {w!r:.80}"
                )
            est._weights = w.copy()
        return est
