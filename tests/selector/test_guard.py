"""GroupGuard: all-zero groups flagged and warned about once; a minimum share per group."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, CheckpointError, InvalidArgumentError, InvalidTypeError
from bots_rft.checkpoint import load_state, save_state
from bots_rft.selector.guard import AllZeroGroupWarning, GroupGuard

N = 120
GROUPS = np.array(["math"] * 60 + ["code"] * 40 + ["science"] * 20)


def _rollout(ids: np.ndarray) -> np.ndarray:
    """'science' never scores (a broken verifier); the rest succeed about half the time."""
    ids = np.asarray(ids)
    return np.where(GROUPS[ids] == "science", 0, 1 + ids % 7).astype(float)


def _run(guard: GroupGuard, steps: int, batch: int = 12) -> list[list[int]]:
    out = []
    for _ in range(steps):
        ids = guard.select(batch)
        out.append(ids.tolist())
        guard.update(ids, _rollout(ids), 8)
    return out


def test_an_all_zero_group_is_warned_about_once_by_name() -> None:
    guard = GroupGuard(BOTS(N, seed=1), GROUPS, min_share=0.2, zero_streak=3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _run(guard, 12)
    raised = [w for w in caught if issubclass(w.category, AllZeroGroupWarning)]
    assert len(raised) == 1 and "'science'" in str(raised[0].message)
    assert guard.flagged == ["science"]
    assert guard.metrics() == {"bots/all_zero_groups": 1.0}


def test_a_group_that_scores_is_never_flagged() -> None:
    guard = GroupGuard(BOTS(N), GROUPS, zero_streak=2)
    assert guard.observe([0, 1, 70], [0, 0, 0]) == []
    with pytest.warns(AllZeroGroupWarning, match="'code'"):
        assert guard.observe([2, 71], [1, 0]) == ["code"]  # math scored this time: its streak restarts
    assert guard.flagged == ["code"]


def test_without_a_floor_the_broken_group_starves_with_one_it_does_not() -> None:
    free = GroupGuard(BOTS(N, seed=2), GROUPS, min_share=0.0)
    kept = GroupGuard(BOTS(N, seed=2), GROUPS, min_share=0.25)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AllZeroGroupWarning)
        late_free = _run(free, 20)[10:]
        late_kept = _run(kept, 20)[10:]
    science = lambda batches: [sum(GROUPS[i] == "science" for i in b) for b in batches]  # noqa: E731
    assert min(science(late_kept)) >= 3  # ceil(0.25 * 12)
    assert sum(science(late_free)) < sum(science(late_kept))


@given(
    seed=st.integers(0, 1000),
    batch=st.integers(0, 40),
    share=st.sampled_from([0.0, 0.1, 0.2, 1 / 3]),
    excluded=st.integers(0, 100),
)
def test_batches_have_the_floor_and_the_size(seed: int, batch: int, share: float, excluded: int) -> None:
    guard = GroupGuard(BOTS(N, seed=seed), GROUPS, min_share=share)
    exclude = np.arange(excluded)
    ids = guard.select(min(batch, N - excluded), exclude=exclude)
    b = min(batch, N - excluded)
    assert ids.size == b and np.unique(ids).size == b
    assert not np.isin(ids, exclude).any()
    q = guard.quota(b)
    for name in ("math", "code", "science"):
        available = int(np.sum(GROUPS[excluded:] == name))
        assert int(np.sum(GROUPS[ids] == name)) >= min(q, available)


def test_no_floor_is_the_selector_itself() -> None:
    a, b = BOTS(N, seed=4), GroupGuard(BOTS(N, seed=4), GROUPS, zero_streak=100)
    for _ in range(3):
        ids = a.select(10)
        np.testing.assert_array_equal(ids, b.select(10))
        a.update(ids, _rollout(ids), 8)
        b.update(ids, _rollout(ids), 8)


def test_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    a = GroupGuard(BOTS(N, seed=5), GROUPS, min_share=0.2, zero_streak=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AllZeroGroupWarning)
        _run(a, 3)
        save_state(tmp_path / "guard.bots", a.state_dict())
        b = GroupGuard(BOTS(N, seed=5), GROUPS, min_share=0.2, zero_streak=4)
        b.load_state_dict(load_state(tmp_path / "guard.bots"))
        assert _run(a, 5) == _run(b, 5)
    assert a.flagged == b.flagged == ["science"]
    with pytest.raises(CheckpointError):
        GroupGuard(BOTS(N), GROUPS[::-1]).load_state_dict(a.state_dict())  # other groups: refused
    with pytest.raises(CheckpointError):
        b.load_state_dict({"format": "other"})


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"groups": GROUPS[:10]}, InvalidArgumentError, "groups"),
        ({"groups": np.zeros((N, 2))}, InvalidTypeError, "groups"),
        ({"groups": GROUPS, "min_share": 0.5}, InvalidArgumentError, "min_share"),
        ({"groups": GROUPS, "min_share": -0.1}, InvalidArgumentError, "min_share"),
        ({"groups": GROUPS, "zero_streak": 0}, InvalidArgumentError, "zero_streak"),
        ({"groups": GROUPS, "zero_streak": 1.5}, InvalidTypeError, "zero_streak"),
    ],
)
def test_bad_arguments_are_typed_errors(kwargs: dict, error: type, argument: str) -> None:
    with pytest.raises(error) as info:
        GroupGuard(BOTS(N), **kwargs)
    assert getattr(info.value, "argument", None) == argument
