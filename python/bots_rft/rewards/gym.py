"""reasoning-gym verifier: the generator's own ``score_answer`` on the ``<answer>`` content.

Pool rows built by ``bots data gym`` keep the generator entry (question, answer, metadata) as JSON
in ``extra_info.rg_entry`` and the generator name in ``extra_info.rg_dataset`` (else taken from
``data_source`` = ``reasoning_gym/<name>``): the scorers need the metadata, not just the answer.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from .base import RewardResult
from .extract import extract_tag

__all__ = ["verify_gym", "GYM_PREFIX", "prepare"]

GYM_PREFIX = "reasoning_gym/"


def import_reasoning_gym() -> Any:
    """``reasoning_gym.factory``, imported without the SyntaxWarnings one of its dependencies
    (cellpylib) prints on every import when bytecode caching is off."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        import reasoning_gym.factory

    return reasoning_gym.factory


@cache
def _scorer(name: str) -> Callable[[str | None, dict[str, Any]], float]:
    return import_reasoning_gym().get_score_answer_fn(name)  # type: ignore[no-any-return]


def prepare() -> None:
    """Import reasoning-gym (a few seconds) ahead of the first timed call."""
    import_reasoning_gym()


def verify_gym(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
) -> RewardResult:
    info = extra_info or {}
    name = str(info.get("rg_dataset") or data_source.removeprefix(GYM_PREFIX))
    raw = info.get("rg_entry")
    entry: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    entry.setdefault("answer", ground_truth)
    entry.setdefault("metadata", {})
    answer = extract_tag(solution_str, "answer")
    if answer is None:
        return RewardResult(0.0, "no <answer> tag")
    return RewardResult(float(_scorer(name)(answer, entry)))
