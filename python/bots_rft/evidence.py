"""The old import path of the implicit-evidence interface and the interpolation estimator, kept for
code written against it: they live in :mod:`bots_rft.estimators` (``base`` and
``interpolation``), which is what the package itself imports.
"""

from __future__ import annotations

from .estimators import (
    DEFAULT_MIN_GAP,
    Estimator,
    ImplicitEvidence,
    Interpolation,
    StepEvidence,
    as_estimator,
    checked_prediction,
    smoothed_capability,
    user_object,
)

__all__ = [
    "DEFAULT_MIN_GAP",
    "Estimator",
    "ImplicitEvidence",
    "Interpolation",
    "StepEvidence",
    "as_estimator",
    "checked_prediction",
    "smoothed_capability",
    "user_object",
]
