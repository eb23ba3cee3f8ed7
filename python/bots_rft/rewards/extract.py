"""Pulling the final answer out of a model response: ``<answer>`` tags, ``\\boxed{}``, code blocks,
and the lenient answer modes (:data:`ANSWER_MODES`) for models that answer in prose."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgumentError

__all__ = [
    "extract_tag",
    "extract_boxed",
    "extract_code",
    "extract_last_number",
    "extract_last_line",
    "extract_answer",
    "answer_mode_of",
    "format_weight_of",
    "ANSWER_MODES",
    "ANSWER_MODE_KEY",
    "FORMAT_WEIGHT_KEY",
]

#: How a verifier finds the answer in a response (a pool row picks one in ``extra_info``):
#: ``tag`` (strict, the default): the last ``<answer>...</answer>`` only;
#: ``last_number``: the last ``<answer>`` when there is one, else the last number in the text;
#: ``last_line``: the last ``<answer>`` when there is one, else the last non-empty line.
ANSWER_MODES = ("tag", "last_number", "last_line")
#: ``extra_info`` key naming the row's answer mode.
ANSWER_MODE_KEY = "answer_mode"
#: ``extra_info`` key: the share of the reward paid for the strict ``<answer>`` format itself
#: (in [0, 1); 0 by default). The reward is ``(1 - w) * correct + w * tagged``: the format is
#: rewarded separately from correctness, so the answer's correctness is never hidden by it.
FORMAT_WEIGHT_KEY = "format_weight"

# An integer or decimal, signed when the sign is not a binary operator ("7-2" ends in 2), with optional thousands separators ("1,234.5").
_NUMBER = re.compile(r"(?:(?<![\w.])[-+])?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?")

# The language name, when there is one, is followed by its own blanks: two blank runs with an empty
# name between them would backtrack quadratically on a fence followed by blanks and no newline.
_CODE_BLOCK = re.compile(r"```[ \t]*(?:([A-Za-z0-9_+-]+)[ \t]*)?\n(.*?)```", re.DOTALL)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")


def extract_tag(text: str, tag: str = "answer") -> str | None:
    """Content of the last ``<tag>...</tag>`` in ``text`` (stripped), or None. Matches pair from
    the left (each ``<tag>`` with the first ``</tag>`` after it), in one pass: a regex would scan
    to the end from every unclosed ``<tag>``."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    last, pos = None, 0
    while (start := text.find(opening, pos)) >= 0:
        end = text.find(closing, start + len(opening))
        if end < 0:
            break
        last, pos = text[start + len(opening) : end], end + len(closing)
    return last.strip() if last is not None else None


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced, or None. Every
    brace is matched in one pass: scanning from each box would be quadratic in unclosed boxes."""
    starts = [m.end() for m in _BOX.finditer(text)]
    if not starts:
        return None
    closes: dict[int, int] = {}  # "{" position -> its "}"
    stack: list[int] = []
    for i in range(starts[0] - 1, len(text)):
        c = text[i]
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            closes[stack.pop()] = i
    for start in reversed(starts):
        if start - 1 in closes:
            return text[start : closes[start - 1]].strip()
    return None


def extract_code(text: str, language: str = "python") -> str:
    """The last fenced code block in ``language`` (or unlabelled); the whole text when there is none."""
    blocks = [(lang.lower(), body) for lang, body in _CODE_BLOCK.findall(text)]
    for lang, body in reversed(blocks):
        if lang in ("", language, "py" if language == "python" else language):
            return body
    return blocks[-1][1] if blocks else text


def extract_last_number(text: str) -> str | None:
    """The last number in ``text`` (integer, decimal or fraction ``a/b``; thousands separators
    dropped; a trailing sentence period is not part of it), or None."""
    matches = _NUMBER.findall(text)
    return matches[-1].replace(",", "") if matches else None


def extract_last_line(text: str) -> str | None:
    """The last non-empty line of ``text`` (stripped), or None for blank text."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else None


def _check_mode(mode: Any) -> str:
    if mode not in ANSWER_MODES:
        raise InvalidArgumentError(
            f"{ANSWER_MODE_KEY}: expected one of {list(ANSWER_MODES)}, got {mode!r}", ANSWER_MODE_KEY
        )
    return str(mode)


def extract_answer(text: str, mode: str = "tag") -> str | None:
    """The answer in ``text`` under ``mode`` (one of :data:`ANSWER_MODES`), or None. A tagged
    answer always wins: the lenient modes only apply to responses without ``<answer>`` tags."""
    _check_mode(mode)
    tagged = extract_tag(text, "answer")
    if tagged is not None or mode == "tag":
        return tagged
    if mode == "last_number":
        return extract_last_number(text)
    return extract_last_line(text)


def answer_mode_of(extra_info: Mapping[str, Any] | None) -> str:
    """The answer mode a pool row asks for (``tag`` when it names none); an unknown mode is an
    :class:`InvalidArgumentError` naming the key and value."""
    mode = (extra_info or {}).get(ANSWER_MODE_KEY)
    return "tag" if mode is None else _check_mode(mode)


def format_weight_of(extra_info: Mapping[str, Any] | None) -> float:
    """The row's format weight in [0, 1) (0 when it names none); anything else is an
    :class:`InvalidArgumentError` naming the key and value."""
    w = (extra_info or {}).get(FORMAT_WEIGHT_KEY)
    if w is None:
        return 0.0
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= float(w) < 1.0:
        raise InvalidArgumentError(f"{FORMAT_WEIGHT_KEY}: expected a number in [0, 1), got {w!r}", FORMAT_WEIGHT_KEY)
    return float(w)
