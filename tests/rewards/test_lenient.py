"""Lenient answer extraction (``extra_info.answer_mode``) and the separately paid strict format
(``extra_info.format_weight``): extraction cases, the reasoning-gym verifier under each mode, and
typed errors naming the key and value for bad option values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bots_rft.errors import InvalidArgumentError
from bots_rft.rewards import RewardItem, RewardScorer
from bots_rft.rewards.extract import (
    ANSWER_MODES,
    answer_mode_of,
    extract_answer,
    extract_last_line,
    extract_last_number,
    format_weight_of,
)
from bots_rft.rewards.gym import verify_gym


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("10 + 3 = 13.", "13"),  # the sentence's period is not a decimal point
        ("The answer is 1,234.5", "1234.5"),  # thousands separators dropped
        ("x = -7", "-7"),
        ("7-2", "2"),  # a minus between numbers is an operator, not a sign
        ("(-3)", "-3"),
        ("3/4 of the cake", "3/4"),
        ("first 4, then 5, so 9", "9"),
        ("no digits here", None),
        ("", None),
    ],
)
def test_last_number(text: str, number: str | None) -> None:
    assert extract_last_number(text) == number


def test_last_line() -> None:
    assert extract_last_line("work\n\n  the end  \n\n") == "the end"
    assert extract_last_line("one line") == "one line"
    assert extract_last_line(" \n\t\n") is None


@pytest.mark.parametrize(
    ("mode", "text", "answer"),
    [
        ("tag", "10 + 3 = 13.", None),  # strict: prose earns nothing
        ("tag", "so <answer>13</answer>", "13"),
        ("last_number", "10 + 3 = 13.", "13"),
        ("last_number", "<answer>12</answer> and later 99", "12"),  # a tagged answer always wins
        ("last_line", "adding up\n13 apples", "13 apples"),
        ("last_line", "<answer> 4 </answer>\nbye", "4"),
    ],
)
def test_extract_answer_modes(mode: str, text: str, answer: str | None) -> None:
    assert extract_answer(text, mode) == answer


def test_answer_mode_and_weight_defaults() -> None:
    assert answer_mode_of(None) == answer_mode_of({}) == "tag"
    assert format_weight_of(None) == format_weight_of({"format_weight": None}) == 0.0
    assert set(ANSWER_MODES) == {"tag", "last_number", "last_line"}
    assert format_weight_of({"format_weight": 0.25}) == 0.25


@pytest.mark.parametrize("mode", ["number", "LAST_NUMBER", "", 3])
def test_bad_answer_mode_is_a_typed_error(mode: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"answer_mode: expected one of .*got") as info:
        answer_mode_of({"answer_mode": mode})
    assert info.value.argument == "answer_mode"
    with pytest.raises(InvalidArgumentError, match="answer_mode"):
        extract_answer("13", str(mode))


@pytest.mark.parametrize("weight", [1.0, -0.1, 2, "0.5", True, float("nan")])
def test_bad_format_weight_is_a_typed_error(weight: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"format_weight: expected a number in \[0, 1\)") as info:
        format_weight_of({"format_weight": weight})
    assert info.value.argument == "format_weight"


@pytest.fixture(scope="module")
def entry() -> dict[str, Any]:
    import reasoning_gym

    e = reasoning_gym.create_dataset("basic_arithmetic", size=1, seed=5)[0]
    return {"rg_dataset": "basic_arithmetic", "rg_entry": json.dumps(e), "answer": str(e["answer"])}


def test_gym_verifier_modes(entry: dict[str, Any]) -> None:
    ans, src = entry["answer"], "reasoning_gym/basic_arithmetic"
    prose = f"Let me compute. The result is {ans}."
    assert verify_gym(src, prose, ans, entry).reward == 0.0  # strict by default
    assert verify_gym(src, prose, ans, entry).reason == "no <answer> tag"
    lenient = {**entry, "answer_mode": "last_number"}
    assert verify_gym(src, prose, ans, lenient).reward == 1.0
    assert verify_gym(src, f"The result is {int(ans) + 1}.", ans, lenient).reward == 0.0
    assert verify_gym(src, "I do not know.", ans, lenient).reason == "no answer (last_number)"
    assert verify_gym(src, f"work\n{ans}", ans, {**entry, "answer_mode": "last_line"}).reward == 1.0


def test_gym_verifier_format_weight(entry: dict[str, Any]) -> None:
    ans, src = entry["answer"], "reasoning_gym/basic_arithmetic"
    info = {**entry, "answer_mode": "last_number", "format_weight": 0.2}
    assert verify_gym(src, f"<answer>{ans}</answer>", ans, info).reward == pytest.approx(1.0)
    assert verify_gym(src, f"it is {ans}", ans, info).reward == pytest.approx(0.8)  # right, untagged
    assert verify_gym(src, "<answer>nonsense</answer>", ans, info).reward == pytest.approx(0.2)  # tagged, wrong


def test_bad_option_in_a_pool_row_is_a_counted_verifier_error(entry: dict[str, Any]) -> None:
    """A row with a bad option value never becomes a silent reward: the scorer counts it."""
    item = RewardItem("reasoning_gym/basic_arithmetic", "13", entry["answer"], {**entry, "answer_mode": "bogus"})
    with RewardScorer(workers=0) as scorer:
        (res,) = scorer.score_batch([item])
    assert res.error and res.kind == "raised" and res.reward == 0.0
    assert "answer_mode" in (res.reason or "")
