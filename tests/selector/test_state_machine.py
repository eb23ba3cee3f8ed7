"""A stateful property test: bad calls interleaved with good ones never change the selector.

Two selectors start equal. Every good call goes to both; every bad call goes only to the one under
test and must raise. After each call the two must agree on everything a checkpoint holds (posterior,
parameters, priors, random stream position, estimator state), so a rejected call left no trace.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bots_rft import BOTS, BotsError, Interpolation

N = 40
_weak = np.linspace(0.0, 0.6, N)
_weak[::7] = np.nan


def _make() -> BOTS:
    return BOTS(N, seed=5, evidence=Interpolation(_weak, np.clip(_weak + 0.3, 0, 1)), threads=1)


# (description, call) pairs that must raise a BotsError (or AttributeError for assignments).
BAD_CALLS: list[tuple[str, Any]] = [
    ("select too many", lambda s: s.select(N + 1)),
    ("select negative", lambda s: s.select(-1)),
    ("select float", lambda s: s.select(1.5)),
    ("exclude out of range", lambda s: s.select(1, exclude=[N])),
    ("exclude int mask", lambda s: s.select(1, exclude=np.ones(N, dtype=np.int8))),
    ("exclude bad mask shape", lambda s: s.select(1, exclude=np.zeros(N - 1, dtype=bool))),
    ("update id out of range", lambda s: s.update([N], [1], 4)),
    ("update NaN successes", lambda s: s.update([0, 1], [np.nan, 1], 4)),
    ("update successes above trials", lambda s: s.update([0], [5], 4)),
    ("update zero trials", lambda s: s.update([0], [0], 0)),
    ("update lengths differ", lambda s: s.update([0, 1], [1], 4)),
    ("update bad predicted", lambda s: s.update([0], [1], 4, predicted=np.full(N, 2.0))),
    ("rewards above one", lambda s: s.update_rewards([0], [[0.0, 1.5]])),
    ("rewards wrong rows", lambda s: s.update_rewards([0, 1], [[0.0, 1.0]])),
    ("set lam out of range", lambda s: s.set_params(lam=1.5)),
    ("set good then bad", lambda s: s.set_params(rho=0.5, target=1.5)),
    ("set seed", lambda s: s.set_params(seed=1)),
    ("set unknown", lambda s: s.set_params(lamda=0.2)),
    ("assign lam", lambda s: setattr(s, "lam", 0.9)),
    ("assign target", lambda s: setattr(s, "target", 0.9)),
    ("load other size", lambda s: s.load_state_dict(BOTS(N + 1).state_dict())),
    ("load other params", lambda s: s.load_state_dict({**s.state_dict(), "params": {**s.params, "lam": 0.77}})),
    ("load bad lam", lambda s: s.load_state_dict({**s.state_dict(), "params": {**s.params, "lam": 2.0}})),
    ("load negative alpha", lambda s: s.load_state_dict({**s.state_dict(), "alpha": -np.ones(N)})),
    ("load bad choice", lambda s: s.load_state_dict(s.state_dict(), params="mine")),
]


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], dict):
            _same(a[key], b[key])
        elif isinstance(a[key], np.ndarray) or isinstance(b[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        else:
            assert a[key] == b[key] or (a[key] != a[key] and b[key] != b[key]), key  # NaN == NaN here


class RejectedCallsChangeNothing(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sut = _make()  # receives every call
        self.twin = _make()  # receives only the good ones
        self.selected: np.ndarray | None = None

    @rule(k=st.integers(0, 12), exclude=st.sampled_from(["none", "ids", "mask"]))
    def select(self, k: int, exclude: str) -> None:
        ex: Any = None
        if exclude == "ids":
            ex = np.array([1, 3, 3, 7])
        elif exclude == "mask":
            ex = np.arange(N) % 5 == 0
        got = self.sut.select(k, exclude=ex)
        np.testing.assert_array_equal(got, self.twin.select(k, exclude=ex))
        self.selected = got

    @precondition(lambda self: self.selected is not None and len(self.selected) > 0)
    @rule(data=st.data())
    def update(self, data: st.DataObject) -> None:
        assert self.selected is not None
        successes = data.draw(st.lists(st.integers(0, 4), min_size=len(self.selected), max_size=len(self.selected)))
        for sel in (self.sut, self.twin):
            sel.update(self.selected, successes, 4)
        self.selected = None

    # (`target` is a reserved keyword of hypothesis rules, hence p_star.)
    @rule(lam=st.floats(0, 1), p_star=st.floats(0.05, 0.95), thompson=st.booleans())
    def set_params(self, lam: float, p_star: float, thompson: bool) -> None:
        for sel in (self.sut, self.twin):
            sel.set_params(lam=lam, target=p_star, thompson=thompson)

    @rule()
    def reload_own_state(self) -> None:
        for sel in (self.sut, self.twin):
            sel.load_state_dict(sel.state_dict())

    @rule(which=st.sampled_from(range(len(BAD_CALLS))))
    def bad_call(self, which: int) -> None:
        name, call = BAD_CALLS[which]
        try:
            call(self.sut)
        except (BotsError, AttributeError):
            return
        raise AssertionError(f"{name}: accepted")

    @invariant()
    def nothing_diverged(self) -> None:
        _same(self.sut.state_dict(), self.twin.state_dict())


RejectedCallsChangeNothing.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_rejected_calls_change_nothing = RejectedCallsChangeNothing.TestCase
