"""What a verifier is: ``verifier(data_source, solution_str, ground_truth, extra_info)`` (verl's
``compute_score`` signature) returning a reward in [0, 1], or a :class:`RewardResult` to say why.

A verifier that does not return a reward is a *verifier error*, never a reward: raising
(anything, ``SystemExit`` and ``KeyboardInterrupt`` included), hanging past the scorer's timeout,
crashing its worker process, or returning something that is not a finite real number in [0, 1]
(a string such as ``"1.0"``, None, NaN, inf, a complex number, a tensor, a value outside the
range). The rollout then scores 0 and the error is counted by kind (:data:`ERROR_KINDS`).
``bool`` counts as 0/1; no other value is converted.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = ["RewardResult", "RewardItem", "Verifier", "coerce_result", "ERROR_KINDS", "REWARD_RANGE"]

#: The range every reward must lie in: the selector counts rewards as fractional successes.
REWARD_RANGE = (0.0, 1.0)

#: Kinds of verifier error, as counted in ``RewardScorer.error_counts`` and the training metrics:
#: ``raised`` (an exception, including SystemExit/KeyboardInterrupt), ``timeout`` (still running
#: after the scorer's timeout, or its worker did not start), ``crashed`` (its worker process
#: died), ``invalid`` (returned something that is not a reward), ``reported`` (the verifier
#: returned a RewardResult with ``error=True`` itself, e.g. a sandbox that could not start).
ERROR_KINDS = ("raised", "timeout", "crashed", "invalid", "reported")


@dataclass(frozen=True)
class RewardResult:
    """A reward in [0, 1], and why it is what it is when that is worth logging.

    ``error`` is True when the verifier itself failed (raised, hung, crashed, returned garbage):
    the rollout then costs reward 0 instead of the run. ``kind`` says which way it failed (one
    of :data:`ERROR_KINDS`; a verifier's own ``error=True`` result counts as ``reported``)."""

    reward: float
    reason: str | None = None
    error: bool = False
    kind: str | None = None


class RewardItem(NamedTuple):
    """One response to score."""

    data_source: str
    response: str
    ground_truth: Any
    extra_info: Mapping[str, Any] = MappingProxyType({})


VerifierOutput = float | int | bool | RewardResult
Verifier = Callable[[str, str, Any, Mapping[str, Any]], VerifierOutput]


def verifier_error(kind: str, reason: str) -> RewardResult:
    """The result of a rollout whose verifier failed in the way ``kind`` names."""
    assert kind in ERROR_KINDS, kind
    return RewardResult(0.0, reason[:500], True, kind)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def coerce_result(value: Any) -> RewardResult:
    """A verifier's return value as a :class:`RewardResult`. A real number (``bool`` as 0/1) in
    [0, 1] is the reward; anything else is an ``invalid`` verifier error naming what came back."""
    if isinstance(value, RewardResult):
        reward, reason, error = value.reward, value.reason, value.error
    else:
        reward, reason, error = value, None, False
    # numbers.Real: int, float, bool, fractions, numpy integer/floating scalars; not str, complex,
    # None, arrays or tensors (a 0-d tensor would otherwise convert silently through float()).
    if not isinstance(reward, numbers.Real):
        return verifier_error(
            "invalid", f"verifier returned {_describe(reward)} ({type(reward).__name__}), not a number"
        )
    r = float(reward)
    lo, hi = REWARD_RANGE
    if not math.isfinite(r) or not lo <= r <= hi:
        return verifier_error("invalid", f"verifier returned {r!r}, outside [{lo:g}, {hi:g}]")
    if error:
        return RewardResult(0.0, reason or "the verifier reported an error", True, "reported")
    return RewardResult(r, reason, False)
