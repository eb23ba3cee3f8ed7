"""bots-rft: Bayesian Online Task Selection (BOTS) for LLM reinforcement finetuning.

>>> from bots_rft import BOTS, Interpolation
>>> sel = BOTS(1000, evidence=Interpolation(weak, strong))
>>> ids = sel.select(256)
>>> sel.update(ids, successes, trials=16)
"""

from __future__ import annotations

from ._core import __version__
from .errors import (
    BotsError,
    CheckpointError,
    ConfigError,
    DataError,
    IntegrationError,
    InvalidArgumentError,
    InvalidTypeError,
)
from .estimators import Estimator, ImplicitEvidence, Interpolation, StepEvidence
from .selector import backends  # noqa: F401  (registers the selector backends with BOTS)
from .selector.bots import BOTS, Picks, PosteriorSelector
from .selector.guard import GroupGuard
from .selector.multipool import MultiPool
from .selector.plan import Plan
from .selector.protocol import Selector

__all__ = [
    "BOTS",
    "Picks",
    "Selector",
    "PosteriorSelector",
    "Plan",
    "GroupGuard",
    "MultiPool",
    "Interpolation",
    "ImplicitEvidence",
    "Estimator",
    "StepEvidence",
    "BotsError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "CheckpointError",
    "ConfigError",
    "DataError",
    "IntegrationError",
    "__version__",
]
