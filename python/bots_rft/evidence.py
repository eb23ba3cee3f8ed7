"""Implicit evidence: predictions of the success rate of tasks not rolled out this step.

The selector talks to every estimator through one small interface, :class:`Estimator`: observe a
batch (without changing anything), commit what was observed once the whole update is accepted,
predict every task, and a state for checkpoints. :class:`Interpolation` is the paper's estimator;
the core evaluates it fused into the update, with no pool-sized temporaries. Any other object
with a ``predict(task_ids, successes, trials)`` method returning a length-N array (NaN = no
prediction) or None plugs in too (:class:`ImplicitEvidence`; :func:`as_estimator` adapts it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from . import _core
from ._validation import FloatArray, as_floats, as_real, rates_or_nan
from .errors import CheckpointError, InvalidArgumentError, InvalidTypeError

#: The method's default: batches whose mean references differ by less than this give no estimate
#: (the core's constant, so the two can never drift apart).
DEFAULT_MIN_GAP: float = _core.DEFAULT_MIN_GAP


@dataclass(frozen=True)
class StepEvidence:
    """One update's implicit evidence, as the core's update pass takes it: nothing (``{}``),
    ``{"predicted": p̃}`` (one value per task, NaN = none), or the interpolation estimator's
    ``{"weak": ..., "strong": ..., "capability": μ̃}`` evaluated inside the pass. ``next_state``
    is what :meth:`Estimator.commit` applies."""

    update_kwargs: dict[str, Any] = field(default_factory=dict)
    next_state: Any = None

    def predictions_at(self, task_ids: Any) -> FloatArray | None:
        """p̃ this step gives the tasks ``task_ids`` (NaN = none), or None without a prediction."""
        kw = self.update_kwargs
        if "predicted" in kw:
            return np.asarray(kw["predicted"], dtype=np.float64)[task_ids]
        if "capability" in kw:
            mu = float(kw["capability"])
            weak = np.asarray(kw["weak"], dtype=np.float64)[task_ids]
            strong = np.asarray(kw["strong"], dtype=np.float64)[task_ids]
            return np.clip(mu * strong + (1.0 - mu) * weak, 0.0, 1.0)
        return None


class Estimator(ABC):
    """What the selector asks of an estimator of implicit evidence.

    Per update the selector calls :meth:`observe` with the step's batch (distinct task ids,
    ascending, summed successes and trials), validates the whole update, and only then calls
    :meth:`commit`, so a rejected update leaves the estimator as it was.
    """

    #: Whether :meth:`state_dict` alone rebuilds the estimator (:func:`bots_rft.estimators.estimator_from_state`);
    #: if not, a checkpoint needs the object passed back in when it is loaded.
    rebuilt_from_state: ClassVar[bool] = False

    @abstractmethod
    def observe(self, batch: _core.Batch) -> StepEvidence:
        """This update's implicit evidence for the tasks not in ``batch``; changes nothing."""

    @abstractmethod
    def commit(self, step: StepEvidence) -> None:
        """Advance to the state ``observe`` computed (the update it belonged to was accepted)."""

    @abstractmethod
    def predict_all(self) -> FloatArray | None:
        """p̃ for every task now (NaN = none), or None when there is no prediction."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """A checkpointable state: a dict with a ``"kind"`` key."""

    def predict_at(self, task_ids: Any) -> FloatArray | None:
        """p̃ for the tasks ``task_ids`` now (estimators that can, override it to skip the rest)."""
        every = self.predict_all()
        return None if every is None else every[task_ids]

    @property
    def capability(self) -> float | None:
        """The estimator's current capability coefficient, if it has one."""
        return None


@runtime_checkable
class ImplicitEvidence(Protocol):
    """A plug-in estimator. Called once per update with the step's distinct task ids (ascending)
    and their summed successes and trials; returns p̃ for every task or None."""

    def predict(self, task_ids: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> np.ndarray | None: ...


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

    def __init__(self, weak: Any, strong: Any, momentum: float = 0.9, *, min_gap: float = DEFAULT_MIN_GAP) -> None:
        # Frozen: read-only memory the core shares with every update's pass instead of copying it.
        self._weak = _core.frozen(rates_or_nan(weak, "weak").astype(np.float32))
        self._strong = _core.frozen(rates_or_nan(strong, "strong", len(self._weak)).astype(np.float32))
        m = as_real(momentum, "momentum")
        if not 0.0 <= m <= 1.0:
            raise InvalidArgumentError(f"momentum: must be in [0, 1], got {m}", "momentum")
        g = as_real(min_gap, "min_gap")
        if not (0.0 <= g < 1.0):
            raise InvalidArgumentError(f"min_gap: must be in [0, 1), got {g}", "min_gap")
        self._momentum = m
        self._min_gap = g
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
        # States saved before min_gap existed used the default.
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


class _PlugIn(Estimator):
    """An :class:`ImplicitEvidence` plug-in behind the :class:`Estimator` interface. Its
    ``predict`` is its observation, so it runs in :meth:`observe` (a plug-in with state advances
    it there); the prediction is validated before the update goes on."""

    def __init__(self, plugin: Any, num_tasks: int) -> None:
        self.plugin = plugin
        self._num_tasks = num_tasks

    def observe(self, batch: _core.Batch) -> StepEvidence:
        out = self.plugin.predict(batch.ids, batch.successes, batch.trials)
        if out is None:
            return StepEvidence()
        return StepEvidence({"predicted": checked_prediction(out, self._num_tasks)})

    def commit(self, step: StepEvidence) -> None:
        pass

    def predict_all(self) -> FloatArray | None:
        return None

    def state_dict(self) -> dict[str, Any]:
        inner = self.plugin.state_dict() if hasattr(self.plugin, "state_dict") else None
        return {"kind": "custom", "type": type(self.plugin).__qualname__, "state": inner}


def as_estimator(evidence: Any, num_tasks: int) -> Estimator | None:
    """The :class:`Estimator` the selector talks to for ``evidence`` (an Estimator, an
    :class:`ImplicitEvidence` plug-in, or None)."""
    if evidence is None:
        return None
    if isinstance(evidence, Estimator):
        size = len(evidence) if hasattr(evidence, "__len__") else num_tasks
        if size != num_tasks:
            raise InvalidArgumentError(f"evidence: has references for {size} tasks, expected {num_tasks}", "evidence")
        return evidence
    if not callable(getattr(evidence, "predict", None)):
        raise InvalidTypeError(
            f"evidence: must be an Interpolation or have a predict(task_ids, successes, trials) method, got {type(evidence).__name__}",
            "evidence",
        )
    return _PlugIn(evidence, num_tasks)


def user_object(estimator: Estimator | None) -> Any:
    """What the user passed as ``evidence`` for this estimator."""
    return estimator.plugin if isinstance(estimator, _PlugIn) else estimator


def checked_prediction(pred: Any, num_tasks: int) -> FloatArray:
    """A private, validated float64 copy of a prediction: the update that uses it may run later."""
    # Frozen: the core's pass shares this copy instead of making another.
    own = _core.frozen(np.ascontiguousarray(as_floats(pred, "predicted", num_tasks), dtype=np.float64))
    _core.check_predicted(own, num_tasks)
    return own
