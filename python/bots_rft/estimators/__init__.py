"""Estimators of implicit evidence beyond the paper's two-reference interpolation.

Each plugs into :class:`~bots_rft.BOTS` as ``evidence=`` through the
:class:`~bots_rft.evidence.Estimator` interface, and rebuilds from a checkpoint on its own:

- :class:`MultiReference`: any number k >= 2 of reference pass rates (and optional per-task
  features), combined with weights fitted online; at k = 2 it is the interpolation estimator.
- :class:`Similarity`: a step's observed rates spread to the most similar tasks through a
  user-supplied embedding matrix and a top-k neighbour kernel (DOTS-style), fast at 10^6 tasks.

docs/estimators.md has their semantics and a simulator comparison.
"""

from __future__ import annotations

from typing import Any

from ..evidence import Estimator
from .multi_reference import MultiReference
from .similarity import Similarity

__all__ = ["MultiReference", "Similarity", "from_state"]

#: The checkpoint kinds of this package's estimators, and what rebuilds each.
_KINDS = {"multi-reference": MultiReference.from_state_dict, "similarity": Similarity.from_state_dict}


def from_state(state: dict[str, Any]) -> Estimator | None:
    """The estimator a checkpoint's evidence state describes, if it is one of this package's
    kinds; None otherwise (the caller handles its own kinds and custom estimators)."""
    kind = state.get("kind") if isinstance(state, dict) else None
    rebuild = _KINDS.get(kind) if isinstance(kind, str) else None
    return None if rebuild is None else rebuild(state)
