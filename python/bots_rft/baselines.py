"""The old import path of the selector protocol, the static selectors and DAPO's dynamic
sampling, kept for code written against it. They live in :mod:`bots_rft.selector.protocol`,
:mod:`bots_rft.selector.static` and :mod:`bots_rft.selector.peers.dapo`, which is what the package itself
imports.
"""

from __future__ import annotations

from .selector.peers.dapo import DynamicSampling, EpochOrder
from .selector.protocol import CountedRolloutFn, RolledBatch, RolloutFn, RollsOut, Selector, check_state
from .selector.static import OfflineSelector, RandomSelector

__all__ = [
    "Selector",
    "RandomSelector",
    "OfflineSelector",
    "EpochOrder",
    "DynamicSampling",
    "RolloutFn",
    "CountedRolloutFn",
    "RolledBatch",
    "RollsOut",
    "check_state",
]
