"""Implicit evidence: estimators that predict the success rate of tasks not rolled out this step.

Every estimator plugs into :class:`~bots_rft.BOTS` as ``evidence=`` through one interface,
:class:`Estimator` (:mod:`.base`, with the :class:`ImplicitEvidence` plug-in protocol for any
object with a ``predict`` method), and rebuilds from a checkpoint on its own:

- :class:`Interpolation` (:mod:`.interpolation`): the paper's two-reference interpolation, fused
  into the core's update;
- :class:`MultiReference`: any number k >= 2 of reference pass rates (and optional per-task
  features), combined with weights fitted online; at k = 2 it is the interpolation estimator.
- :class:`Similarity`: a step's observed rates spread to the most similar tasks through a
  user-supplied embedding matrix and a top-k neighbour kernel (DOTS-style), fast at 10^6 tasks.
- :class:`EmbeddingRegression`: no reference model either: an online Bayesian logistic regression
  of the run's observed success rates on task embeddings predicts every task every step.

:func:`estimator_from_state` rebuilds any of them from a checkpoint. docs/estimators.md has their
semantics and a simulator comparison.
"""

from __future__ import annotations

from typing import Any

from ..errors import CheckpointError
from .base import (
    DEFAULT_MIN_GAP,
    Estimator,
    ImplicitEvidence,
    StepEvidence,
    as_estimator,
    checked_prediction,
    user_object,
)
from .interpolation import Interpolation, smoothed_capability
from .multi_reference import MultiReference
from .regression import EmbeddingRegression
from .similarity import Similarity

__all__ = [
    "DEFAULT_MIN_GAP",
    "Estimator",
    "ImplicitEvidence",
    "StepEvidence",
    "Interpolation",
    "MultiReference",
    "Similarity",
    "EmbeddingRegression",
    "as_estimator",
    "checked_prediction",
    "user_object",
    "smoothed_capability",
    "from_state",
    "estimator_from_state",
]

#: The checkpoint kinds of this package's estimators, and what rebuilds each.
_KINDS = {
    "multi-reference": MultiReference.from_state_dict,
    "similarity": Similarity.from_state_dict,
    "embedding-regression": EmbeddingRegression.from_state_dict,
}


def from_state(state: dict[str, Any]) -> Estimator | None:
    """The estimator a checkpoint's evidence state describes, if it is one of this package's
    kinds; None otherwise (the caller handles its own kinds and custom estimators)."""
    kind = state.get("kind") if isinstance(state, dict) else None
    rebuild = _KINDS.get(kind) if isinstance(kind, str) else None
    return None if rebuild is None else rebuild(state)


def estimator_from_state(state: dict[str, Any] | None, evidence: Any, num_tasks: int) -> Estimator | None:
    """Rebuild a checkpoint's estimator. Built-in kinds rebuild from the state; a custom one
    needs its object passed as ``evidence`` (its ``load_state_dict`` gets the saved state)."""
    if state is None:
        return None
    if state.get("kind") == "interpolation":
        return Interpolation.from_state_dict(state)
    rebuilt = from_state(state)
    if rebuilt is not None:
        return rebuilt
    if evidence is None:
        kind = state.get("type") or state.get("kind")
        raise CheckpointError(f"evidence: the state uses a custom estimator ({kind}); pass it as evidence=")
    # An Estimator wrote its own state; a plain plug-in's sits under "state" (see base._PlugIn).
    inner = state if isinstance(evidence, Estimator) else state.get("state")
    if inner is not None and hasattr(evidence, "load_state_dict"):
        evidence.load_state_dict(inner)
    return as_estimator(evidence, num_tasks)
