"""Task selectors from the literature that BOTS is compared with, as simulator (and library) methods:
DAPO's dynamic sampling and epoch order (:mod:`.dapo`), DPS, GRESO, SPEED-RL, AdaRFT, Knapsack-RL
and Reinforce-Ada, one module each.

Each is implemented from its paper and, where public, its code, with the published defaults as
its method parameters (:mod:`bots_rft.selector.registry`); docs/peers.md lists each one's sources, defaults
and the choices made where the paper leaves something open.

The selectors that spend rollouts themselves (screening, oversampling, sequential sampling,
per-task budgets) follow the :class:`bots_rft.selector.protocol.RollsOut` protocol through
:class:`.base.SelfRolling`, so the simulator charges every rollout they generate.
"""

from __future__ import annotations

from .adarft import AdaRFT
from .base import SelfRolling
from .dapo import DynamicSampling, EpochOrder
from .dps import DynamicsPredictiveSampling
from .greso import GRESO
from .knapsack import KnapsackAllocation
from .reinforce_ada import ReinforceAda
from .speed import SpeedRL

__all__ = [
    "SelfRolling",
    "EpochOrder",
    "DynamicSampling",
    "DynamicsPredictiveSampling",
    "GRESO",
    "SpeedRL",
    "AdaRFT",
    "KnapsackAllocation",
    "ReinforceAda",
]
