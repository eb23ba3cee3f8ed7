"""Bad input: a typed BotsError that names the argument and the value, and no state change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, BotsError, Interpolation, InvalidArgumentError, InvalidTypeError

N = 10


def _selector() -> BOTS:
    sel = BOTS(N, evidence=Interpolation(np.linspace(0, 0.5, N), np.linspace(0.3, 1, N)), seed=3)
    sel.update([0, 1, 2], [3, 8, 16], 16)
    sel.select(2)
    return sel


def _snapshot(sel: BOTS) -> dict[str, Any]:
    return {
        "alpha": sel.alpha.copy(),
        "beta": sel.beta.copy(),
        "capability": sel.capability,
        "selections": sel.num_selections,
        "updates": sel.num_updates,
    }


BAD_CALLS: list[tuple[str, Callable[[BOTS], object], type, str, str]] = [
    # (case, call, exception type, argument named, value shown)
    ("id too large", lambda s: s.update([3, 10], [1, 1], 16), InvalidArgumentError, "task_ids", "10"),
    ("negative id", lambda s: s.update([-1], [1], 16), InvalidArgumentError, "task_ids", "-1"),
    ("float ids", lambda s: s.update([1.5], [1], 16), InvalidTypeError, "task_ids", "float64"),
    ("bool ids", lambda s: s.update(np.array([True]), [1], 16), InvalidTypeError, "task_ids", "bool"),
    ("string ids", lambda s: s.update(["a"], [1], 16), InvalidTypeError, "task_ids", "'a'"),
    ("2-D ids", lambda s: s.update([[1]], [1], 16), InvalidTypeError, "task_ids", "(1, 1)"),
    ("lengths differ", lambda s: s.update([1, 2], [1], 16), InvalidTypeError, "successes", "1"),
    ("trials length", lambda s: s.update([1, 2], [1, 1], [16, 16, 16]), InvalidTypeError, "trials", "3"),
    ("NaN successes", lambda s: s.update([1], [np.nan], 16), InvalidArgumentError, "successes", "NaN"),
    ("inf successes", lambda s: s.update([1], [np.inf], 16), InvalidArgumentError, "successes", "inf"),
    ("negative successes", lambda s: s.update([1], [-2], 16), InvalidArgumentError, "successes", "-2"),
    ("successes above trials", lambda s: s.update([1], [17], 16), InvalidArgumentError, "successes", "17"),
    ("zero trials", lambda s: s.update([1], [0], 0), InvalidArgumentError, "trials", "0"),
    ("NaN trials", lambda s: s.update([1], [0], [np.nan]), InvalidArgumentError, "trials", "NaN"),
    ("string trials", lambda s: s.update([1], [0], "16"), InvalidTypeError, "trials", "16"),
    (
        "predicted length",
        lambda s: s.update([1], [1], 16, predicted=np.zeros(N - 1)),
        InvalidTypeError,
        "predicted",
        str(N - 1),
    ),
    (
        "predicted range",
        lambda s: s.update([1], [1], 16, predicted=np.full(N, 1.5)),
        InvalidArgumentError,
        "predicted",
        "1.5",
    ),
    (
        "predicted inf",
        lambda s: s.update([1], [1], 16, predicted=np.full(N, -np.inf)),
        InvalidArgumentError,
        "predicted",
        "-inf",
    ),
    ("rewards above 1", lambda s: s.update_rewards([1], [[0, 1.5]]), InvalidArgumentError, "rewards", "1.5"),
    ("rewards negative", lambda s: s.update_rewards([1], [[-0.1, 1]]), InvalidArgumentError, "rewards", "-0.1"),
    ("rewards NaN", lambda s: s.update_rewards([1, 2], [[0, 1], [np.nan, 1]]), InvalidArgumentError, "rewards", "nan"),
    ("rewards rows", lambda s: s.update_rewards([1, 2], [[0, 1]]), InvalidTypeError, "rewards", "1 rows"),
    ("rewards 1-D", lambda s: s.update_rewards([1], [0.5]), InvalidTypeError, "rewards", "(1,)"),
    ("rewards empty", lambda s: s.update_rewards([1], np.zeros((1, 0))), InvalidArgumentError, "rewards", "empty"),
    ("batch too large", lambda s: s.select(N + 1), InvalidArgumentError, "batch_size", str(N + 1)),
    ("batch > selectable", lambda s: s.select(5, exclude=np.arange(6)), InvalidArgumentError, "batch_size", "4"),
    ("negative batch", lambda s: s.select(-1), InvalidArgumentError, "batch_size", "-1"),
    ("float batch", lambda s: s.select(2.0), InvalidTypeError, "batch_size", "2.0"),
    ("exclude range", lambda s: s.select(1, exclude=[N]), InvalidArgumentError, "exclude", str(N)),
    (
        "exclude mask shape",
        lambda s: s.select(1, exclude=np.zeros(N + 1, bool)),
        InvalidTypeError,
        "exclude",
        str(N + 1),
    ),
    ("exclude floats", lambda s: s.select(1, exclude=[0.5]), InvalidTypeError, "exclude", "float64"),
    (
        "exclude 0/1 ints",
        lambda s: s.select(1, exclude=np.eye(N, dtype=np.int64)[3]),
        InvalidTypeError,
        "exclude",
        "boolean mask",
    ),
    ("exclude 0/1 list", lambda s: s.select(1, exclude=[0, 1] * (N // 2)), InvalidTypeError, "exclude", "int64"),
]


@pytest.mark.parametrize("case,call,exc,argument,value", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_and_change_nothing(
    case: str, call: Callable[[BOTS], object], exc: type, argument: str, value: str
) -> None:
    sel = _selector()
    before = _snapshot(sel)
    with pytest.raises(exc) as info:
        call(sel)
    assert isinstance(info.value, BotsError)
    assert isinstance(info.value, (ValueError, TypeError))
    message = str(info.value)
    assert argument in message and value in message, message
    after = _snapshot(sel)
    np.testing.assert_array_equal(after.pop("alpha"), before.pop("alpha"))
    np.testing.assert_array_equal(after.pop("beta"), before.pop("beta"))
    assert after == before


BAD_CONSTRUCTION: list[tuple[dict[str, Any], type, str, str]] = [
    ({"lam": 1.5}, InvalidArgumentError, "lam", "1.5"),
    ({"lam": -0.1}, InvalidArgumentError, "lam", "-0.1"),
    ({"rho": 2}, InvalidArgumentError, "rho", "2"),
    ({"rho": float("nan")}, InvalidArgumentError, "rho", "nan"),
    ({"target": -0.1}, InvalidArgumentError, "target", "-0.1"),
    ({"target": 1.5}, InvalidArgumentError, "target", "1.5"),
    ({"tau": -1.0}, InvalidArgumentError, "tau", "-1.0"),
    ({"n_rollouts": 0}, InvalidArgumentError, "n_rollouts", "0"),
    ({"prior_alpha": 0.0}, InvalidArgumentError, "prior_alpha", "0.0"),
    ({"prior_beta": -1}, InvalidArgumentError, "prior_beta", "-1"),
    ({"prior_alpha": np.r_[np.ones(N - 1), 0.0]}, InvalidArgumentError, "prior_alpha", "index 9"),
    ({"prior_beta": np.ones(N + 2)}, InvalidTypeError, "prior_beta", str(N + 2)),
    ({"evidence": Interpolation([0.1] * 3, [0.2] * 3)}, InvalidArgumentError, "evidence", "3"),
    ({"evidence": object()}, InvalidTypeError, "evidence", "object"),
    ({"seed": -1}, InvalidArgumentError, "seed", "-1"),
    ({"seed": 1.5}, InvalidTypeError, "seed", "1.5"),
    ({"threads": 0}, InvalidArgumentError, "threads", "0"),
    ({"thompson": "yes"}, InvalidTypeError, "thompson", "yes"),
    ({"lam": "0.1"}, InvalidTypeError, "lam", "0.1"),
]


@pytest.mark.parametrize(
    "kwargs,exc,argument,value", BAD_CONSTRUCTION, ids=[c[2] + "-" + c[3] for c in BAD_CONSTRUCTION]
)
def test_bad_construction(kwargs: dict[str, Any], exc: type, argument: str, value: str) -> None:
    with pytest.raises(exc) as info:
        BOTS(N, **kwargs)
    assert isinstance(info.value, BotsError)
    assert argument in str(info.value) and value in str(info.value), str(info.value)


@pytest.mark.parametrize("num_tasks", [0, -3, 2.5, True, "10"])
def test_bad_num_tasks(num_tasks: Any) -> None:
    with pytest.raises(BotsError, match="num_tasks"):
        BOTS(num_tasks)


@pytest.mark.parametrize(
    "weak,strong,momentum,argument",
    [
        ([0.1, 1.2], [0.2, 0.3], 0.9, "weak"),
        ([0.1, 0.2], [0.2, -0.3], 0.9, "strong"),
        ([0.1, 0.2], [0.2, 0.3, 0.4], 0.9, "strong"),
        ([0.1, np.inf], [0.2, 0.3], 0.9, "weak"),
        ([0.1, 0.2], [0.2, 0.3], 1.5, "momentum"),
        (["a", "b"], [0.2, 0.3], 0.9, "weak"),
    ],
)
def test_bad_interpolation(weak: Any, strong: Any, momentum: float, argument: str) -> None:
    with pytest.raises(BotsError, match=argument):
        Interpolation(weak, strong, momentum)


@pytest.mark.parametrize("gap", [-0.1, 1.0, float("nan"), float("inf"), "x"])
def test_bad_min_gap_names_the_argument_and_value(gap: Any) -> None:
    with pytest.raises(BotsError, match=r"min_gap.*" + ("x" if gap == "x" else "")) as err:
        Interpolation([0.1, 0.2], [0.2, 0.3], min_gap=gap)
    assert isinstance(err.value, (ValueError, TypeError))


def test_presets_fix_their_parameters() -> None:
    with pytest.raises(InvalidArgumentError, match="lam"):
        BOTS.mopps(N, lam=0.5)
    with pytest.raises(InvalidArgumentError, match="evidence"):
        BOTS.dots(N, None)  # type: ignore[arg-type]
    m = BOTS.mopps(N, seed=4)
    assert m.params["lam"] == 0 and m.params["rho"] == 0 and m.params["thompson"]
    d = BOTS.dots(N, Interpolation(np.zeros(N), np.ones(N)))
    assert d.params["lam"] == 1 and d.params["rho"] == 1 and not d.params["thompson"]
