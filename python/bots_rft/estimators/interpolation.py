"""The paper's estimator of implicit evidence: each task's success rate interpolated between a
weak and a strong reference model's, at the policy's capability measured on the rolled-out batch.
The core evaluates it fused into the update, with no pool-sized temporaries.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _core
from .._validation import FloatArray, rates_or_nan
from ..errors import CheckpointError
from ..parameters import MIN_GAP, MOMENTUM
from .base import DEFAULT_MIN_GAP, Estimator, StepEvidence

__all__ = ["Interpolation", "smoothed_capability"]


class Interpolation(Estimator):
    """Linear interpolation between a weak and a strong reference model.

    ``weak`` and ``strong`` are each task's pass rates under the two references (NaN where
    unknown). Each update locates the current policy between them on the rolled-out batch,
    mu = (obs - W) / (St - W), smooths it with ``momentum``, and predicts
    p̃_k = clip(mu·strong_k + (1 - mu)·weak_k, 0, 1) for the other tasks.

    A batch whose mean references differ by less than ``min_gap`` (|St - W| < min_gap) gives no
    estimate and leaves mu~ unchanged. The default, 1e-6, only avoids dividing by
    zero. A larger gap (0.02-0.1) also skips batches where the division would amplify rollout
    noise: a selector that chooses from its own predictions (DOTS) can pick batches whose
    references nearly cancel, and mu then jumps (docs/training.md shows one run where it did).

    Reference pass rates are stored as float32 (7 significant digits; a pass rate measured from
    rollouts needs far fewer), which halves what the fused update reads per task.
    """

    def __init__(
        self, weak: Any, strong: Any, momentum: float = MOMENTUM.default, *, min_gap: float = MIN_GAP.default
    ) -> None:
        # Frozen: read-only memory the core shares with every update's pass instead of copying it.
        self._weak = _core.frozen(rates_or_nan(weak, "weak").astype(np.float32))
        self._strong = _core.frozen(rates_or_nan(strong, "strong", len(self._weak)).astype(np.float32))
        self._momentum: float = MOMENTUM.check(momentum)
        self._min_gap: float = MIN_GAP.check(min_gap)
        self._capability: float | None = None

    def __len__(self) -> int:
        return len(self._weak)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled (or deep-copied) arrays are plain numpy memory again: freeze them as __init__
        # does, so that updates keep sharing them instead of copying them.
        self.__dict__.update(state)
        self._weak, self._strong = _core.frozen(self._weak), _core.frozen(self._strong)

    def __repr__(self) -> str:
        gap = "" if self._min_gap == DEFAULT_MIN_GAP else f", min_gap={self._min_gap}"
        return f"Interpolation(num_tasks={len(self)}, momentum={self._momentum}{gap}, capability={self._capability})"

    @property
    def weak(self) -> FloatArray:
        """The weak reference's pass rates as stored (float32 values, returned as float64)."""
        return self._weak.astype(np.float64)

    @property
    def strong(self) -> FloatArray:
        """The strong reference's pass rates as stored (float32 values, returned as float64)."""
        return self._strong.astype(np.float64)

    def references32(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """The stored float32 (weak, strong) arrays, read-only, as the core reads them."""
        return self._weak, self._strong

    @property
    def momentum(self) -> float:
        return self._momentum

    @property
    def min_gap(self) -> float:
        return self._min_gap

    @property
    def capability(self) -> float | None:
        """The smoothed capability coefficient mu~, or None before the first estimate."""
        return self._capability

    def propose(self, batch: _core.Batch) -> float | None:
        """mu~ after observing ``batch``, without committing it (the caller commits once the
        whole update has succeeded)."""
        mu = _core.batch_capability(batch, self._weak, self._strong, self._min_gap)
        return smoothed_capability(self._capability, mu, self._momentum)

    def observe(self, batch: _core.Batch) -> StepEvidence:
        proposed = self.propose(batch)
        if proposed is None:
            return StepEvidence({}, None)
        return StepEvidence({"weak": self._weak, "strong": self._strong, "capability": proposed}, proposed)

    def commit(self, step: StepEvidence | float | None) -> None:
        """Take the capability of an observed step (or a capability value, as returned by
        :meth:`propose`)."""
        self._capability = step.next_state if isinstance(step, StepEvidence) else step

    def predict_all(self) -> FloatArray | None:
        """p̃ for every task under the current mu~ (NaN where a reference is missing)."""
        if self._capability is None:
            return None
        mu = self._capability
        strong = self._strong.astype(np.float64)
        weak = self._weak.astype(np.float64)
        return np.clip(mu * strong + (1.0 - mu) * weak, 0.0, 1.0)

    def predict_at(self, task_ids: Any) -> FloatArray | None:
        if self._capability is None:
            return None
        mu = self._capability
        strong = self._strong[task_ids].astype(np.float64)
        weak = self._weak[task_ids].astype(np.float64)
        return np.clip(mu * strong + (1.0 - mu) * weak, 0.0, 1.0)

    def predict(self, task_ids: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> FloatArray | None:
        """The generic plug-in interface: observe a batch, then predict every task."""
        batch = _core.aggregate(
            len(self), np.asarray(task_ids, np.int64), np.asarray(successes, np.float64), np.asarray(trials, np.float64)
        )
        self.commit(self.propose(batch))
        return self.predict_all()

    rebuilt_from_state = True

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": "interpolation",
            "weak": self._weak.copy(),
            "strong": self._strong.copy(),
            "momentum": self._momentum,
            "min_gap": self._min_gap,
            "capability": self._capability,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Interpolation:
        if not isinstance(state, dict) or state.get("kind") != "interpolation":
            raise CheckpointError(f"evidence: not an interpolation state: {state!r:.80}")
        # A state without min_gap (saved by a release without the parameter) was computed with the
        # default, so it loads with it.
        ev = cls(state["weak"], state["strong"], state["momentum"], min_gap=state.get("min_gap", DEFAULT_MIN_GAP))
        cap = state.get("capability")
        ev._capability = None if cap is None else float(cap)
        return ev


def smoothed_capability(previous: float | None, estimate: float | None, momentum: float) -> float | None:
    """μ̃ after one batch's estimate μ: μ itself at the first estimate, then
    momentum·μ̃ + (1 − momentum)·μ; a batch without an estimate (None) leaves μ̃ as it was."""
    if estimate is None:
        return previous
    if previous is None:
        return estimate
    return momentum * previous + (1.0 - momentum) * estimate
