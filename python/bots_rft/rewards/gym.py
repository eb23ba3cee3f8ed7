"""reasoning-gym verifier: the generator's own ``score_answer`` on the ``<answer>`` content.

A row may ask for lenient extraction (``extra_info.answer_mode``: ``last_number`` or
``last_line``, see :data:`bots_rft.rewards.extract.ANSWER_MODES`) for models that answer in prose,
and pay a share ``extra_info.format_weight`` of the reward for the strict ``<answer>`` format.

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
from .extract import answer_mode_of, extract_answer, extract_tag, format_weight_of

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
    mode, weight = answer_mode_of(info), format_weight_of(info)
    answer = extract_answer(solution_str, mode)
    if answer is None:
        return RewardResult(0.0, "no <answer> tag" if mode == "tag" else f"no answer ({mode})")
    correct = float(_scorer(name)(answer, entry))
    if weight == 0.0:
        return RewardResult(correct)
    tagged = extract_tag(solution_str, "answer") is not None
    return RewardResult((1.0 - weight) * correct + weight * float(tagged))
