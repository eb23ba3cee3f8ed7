"""Verifiable rewards: one verifier per ``data_source``, each returning a reward in [0, 1].

- ``reasoning_gym/<name>``: reasoning-gym's own scorer on the ``<answer>`` content;
- ``math*``, MATH/GSM8K sources: the last ``\\boxed{}`` checked with math-verify;
- ``logic*``, ``arc_agi*``: exact match inside ``<answer>`` tags;
- ``humaneval``, ``codegen*``: the program run in a kernel sandbox (:func:`isolation` says which
  isolation this host allows), its tests and the verdict in this process.

A verifier that raises, hangs, crashes its worker or returns anything but a real number in [0, 1]
yields reward 0 and counts as a verifier error of one of :data:`ERROR_KINDS` (see
:class:`RewardScorer`).
"""

from __future__ import annotations

from .base import ERROR_KINDS, RewardItem, RewardResult, Verifier
from .registry import get_verifier, register_verifier, registered_prefixes
from .sandbox import Isolation, SandboxLimits, SandboxResult, SandboxUnavailableError, isolation, run_python
from .scorer import RewardScorer, score_one

__all__ = [
    "ERROR_KINDS",
    "Isolation",
    "RewardItem",
    "RewardResult",
    "RewardScorer",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "Verifier",
    "get_verifier",
    "isolation",
    "register_verifier",
    "registered_prefixes",
    "run_python",
    "score_one",
]
