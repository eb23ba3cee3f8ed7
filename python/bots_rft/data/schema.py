"""The verl/GURU pool layout: column names, and how to build one row of it.

A row is ``{"data_source", "prompt": [{"role", "content"}, ...], "ability",
"reward_model": {"ground_truth", "style"}, "extra_info": {"index", ...}}`` plus optional top-level
difficulty columns such as ``qwen2.5_7b_pass_rate`` (float in [0, 1], NaN/null when unknown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["PoolColumns", "PASS_RATE_SUFFIX", "CHAT_ROLES", "make_row", "chat"]

#: Roles a prompt's chat messages may have (what chat templates know); a message without a role
#: is a user message.
CHAT_ROLES = ("system", "user", "assistant", "tool")

# Columns whose name ends with this are treated as difficulty (pass-rate) columns and validated.
PASS_RATE_SUFFIX = "_pass_rate"


@dataclass(frozen=True)
class PoolColumns:
    """Where each field of a task lives. A dotted name reaches into a struct column
    (``reward_model.ground_truth`` is field ``ground_truth`` of struct column ``reward_model``)."""

    prompt: str = "prompt"
    ground_truth: str = "reward_model.ground_truth"
    data_source: str = "data_source"
    id: str = "extra_info.index"
    ability: str | None = "ability"
    extra_info: str | None = "extra_info"
    # Extra difficulty columns to validate besides every ``*_pass_rate`` column.
    difficulty: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> PoolColumns:
        """Build from ``{"prompt": "question", "id": "uid", ...}``; unknown keys are an error."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise InvalidArgumentError(f"columns: unknown key(s) {unknown}; known keys are {sorted(known)}", "columns")
        values = dict(mapping)
        if "difficulty" in values:
            values["difficulty"] = tuple(values["difficulty"])
        return cls(**values)

    def required(self) -> dict[str, str]:
        """The role -> column name of every column a pool must have."""
        return {
            "prompt": self.prompt,
            "ground_truth": self.ground_truth,
            "data_source": self.data_source,
            "id": self.id,
        }


def chat(user: str, system: str | None = None) -> list[dict[str, str]]:
    """A chat prompt: an optional system message and one user message."""
    messages = [] if system is None else [{"role": "system", "content": system}]
    messages.append({"role": "user", "content": user})
    return messages


def make_row(
    *,
    index: int,
    prompt: Sequence[Mapping[str, str]],
    ground_truth: str,
    data_source: str,
    ability: str,
    split: str,
    extra: Mapping[str, Any] | None = None,
    difficulty: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One pool row in the verl/GURU layout. ``extra`` goes into ``extra_info`` beside ``index``
    and ``split``; ``difficulty`` adds top-level pass-rate columns."""
    extra_info: dict[str, Any] = {"index": int(index), "split": split}
    if extra:
        extra_info.update(extra)
    row: dict[str, Any] = {
        "data_source": data_source,
        "prompt": [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt],
        "ability": ability,
        "reward_model": {"ground_truth": ground_truth, "style": "rule"},
        "extra_info": extra_info,
    }
    if difficulty:
        row.update({k: float(v) for k, v in difficulty.items()})
    return row
