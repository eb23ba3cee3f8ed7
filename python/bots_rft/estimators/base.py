"""The interface between the selector and every estimator of implicit evidence (predictions of
the success rate of tasks not rolled out this step).

The selector talks to every estimator through one small interface, :class:`Estimator`: observe a
batch (without changing anything), commit what was observed once the whole update is accepted,
predict every task, and a state for checkpoints. Any other object with a
``predict(task_ids, successes, trials)`` method returning a length-N array (NaN = no prediction)
or None plugs in too (:class:`ImplicitEvidence`; :func:`as_estimator` adapts it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from .. import _core
from .._validation import FloatArray, as_floats
from ..errors import InvalidArgumentError, InvalidTypeError
from ..parameters import MIN_GAP

__all__ = [
    "DEFAULT_MIN_GAP",
    "StepEvidence",
    "Estimator",
    "ImplicitEvidence",
    "as_estimator",
    "user_object",
    "checked_prediction",
]

#: The method's default: batches whose mean references differ by less than this give no estimate
#: (the catalogue's, which is the core's constant, so the two can never drift apart).
DEFAULT_MIN_GAP: float = MIN_GAP.default


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
