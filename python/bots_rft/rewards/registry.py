"""Which verifier scores which ``data_source``: the longest registered prefix that matches at a
word boundary (``math`` matches ``math``, ``math__deepscaler`` and ``math/aime``, not ``mathx``)."""

from __future__ import annotations

import pickle
import threading

from ..errors import DataError, InvalidArgumentError
from .base import Verifier
from .code import verify_code
from .exact import verify_exact
from .gym import GYM_PREFIX, verify_gym
from .math_answer import verify_math
from .strings import STRINGS_PREFIX, verify_first_line

__all__ = ["register_verifier", "get_verifier", "registered_prefixes", "DEFAULT_VERIFIERS"]

DEFAULT_VERIFIERS: dict[str, Verifier] = {
    GYM_PREFIX: verify_gym,
    # Procedural string tasks (bots data strings): the bare answer on the first line.
    STRINGS_PREFIX: verify_first_line,
    # Code: HumanEval, GURU codegen__*.
    "humaneval": verify_code,
    "openai_humaneval": verify_code,
    "codegen": verify_code,
    # Exact match in <answer>: ARC-AGI, GURU logic__*.
    "arc_agi": verify_exact,
    "logic": verify_exact,
    # Math in \boxed{}: GURU math__*, verl's MATH/GSM8K sources.
    "math": verify_math,
    "lighteval/MATH": verify_math,
    "DigitalLearningGmbH/MATH-lighteval": verify_math,
    "HuggingFaceH4/MATH-500": verify_math,
    "openai/gsm8k": verify_math,
    "gsm8k": verify_math,
    "aime": verify_math,
    "amc": verify_math,
    # GURU table__hitab / table__multihier: a \boxed{} answer, mostly numeric.
    "table": verify_math,
    # GURU stem__web: GURU judges these with an LLM verifier, which cannot run offline; the
    # \boxed{} answer checked with math-verify is the nearest offline check (stricter on prose).
    "stem": verify_math,
}

_lock = threading.Lock()
_registry: dict[str, Verifier] = dict(DEFAULT_VERIFIERS)


def register_verifier(prefix: str, verifier: Verifier) -> None:
    """Score every ``data_source`` starting with ``prefix`` with ``verifier``
    (``verifier(data_source, solution_str, ground_truth, extra_info) -> float``).

    The verifier runs in worker processes, so it must be a module-level function of an importable
    module (the workers import it by name), not a lambda, a closure or a function of the script
    being run (``__main__``); the scorer refuses the last with a message when it uses workers."""
    if not isinstance(prefix, str) or not prefix:
        raise InvalidArgumentError(f"prefix: expected a non-empty string, got {prefix!r}", "prefix")
    if not callable(verifier):
        raise InvalidArgumentError(f"verifier: expected a callable, got {verifier!r}", "verifier")
    try:
        pickle.dumps(verifier)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise InvalidArgumentError(
            f"verifier: {verifier!r} cannot be sent to worker processes ({exc}); register a module-level function",
            "verifier",
        ) from exc
    with _lock:
        _registry[prefix] = verifier


def registered_prefixes() -> list[str]:
    with _lock:
        return sorted(_registry)


def _matches(prefix: str, data_source: str) -> bool:
    if not data_source.startswith(prefix):
        return False
    rest = data_source[len(prefix) :]
    return not rest or not prefix[-1].isalnum() or not rest[0].isalnum()


def get_verifier(data_source: str) -> Verifier:
    """The verifier for ``data_source``; :class:`DataError` naming it when none is registered."""
    with _lock:
        best = max((p for p in _registry if _matches(p, str(data_source))), key=len, default=None)
        if best is not None:
            return _registry[best]
        known = sorted(_registry)
    raise DataError(
        f"data_source: no verifier for {data_source!r}; registered prefixes: {known} "
        "(add one with bots_rft.rewards.register_verifier)"
    )
