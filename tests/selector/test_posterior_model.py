"""A stateful property test against a pure-Python model of the method.

The model keeps its own posterior, capability estimate and random-stream position, written from
the update rule as the README states it (nothing shared with the selector's code except the core's
Thompson draws, which it reads to rank tasks itself). Hypothesis drives one selector through
select / update / update_rewards / exclusions / parameter changes / save / load / pickle, and after
every rule the selector's posterior must equal the model's and every selection must equal the
model's ranking.
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from bots_rft import BOTS, Interpolation, _core

N = 1100  # more than one chunk of the core
MOMENTUM, MIN_GAP = 0.8, 1e-6
_rng = np.random.default_rng(11)
WEAK = _rng.uniform(0.0, 0.6, N)
WEAK[::13] = np.nan
STRONG = np.clip(WEAK + _rng.uniform(0.05, 0.4, N), 0.0, 1.0)


class Model:
    """The method, in plain numpy."""

    def __init__(self, lam: float, rho: float, n: float, seed: int) -> None:
        self.lam, self.rho, self.n, self.seed = lam, rho, n, seed
        self.target, self.thompson = 0.5, True
        self.alpha = np.ones(N)
        self.beta = np.ones(N)
        self.mu: float | None = None
        self.counter = 0
        self.weak = WEAK.astype(np.float32).astype(np.float64)
        self.strong = STRONG.astype(np.float32).astype(np.float64)

    def update(self, ids: np.ndarray, succ: np.ndarray, trials: np.ndarray) -> None:
        tasks = np.unique(ids)
        s = np.array([succ[ids == t].sum() for t in tasks])
        t = np.array([trials[ids == k].sum() for k in tasks])
        both = ~(np.isnan(self.weak[tasks]) | np.isnan(self.strong[tasks]))
        if both.any():
            obs = np.mean(s[both] / t[both])
            w, st_ = np.mean(self.weak[tasks][both]), np.mean(self.strong[tasks][both])
            if abs(st_ - w) >= MIN_GAP:
                mu = (obs - w) / (st_ - w)
                self.mu = mu if self.mu is None else MOMENTUM * self.mu + (1 - MOMENTUM) * mu
        decay = 1.0 - self.lam
        a = decay * self.alpha + self.lam * 1.0
        b = decay * self.beta + self.lam * 1.0
        if self.mu is not None:
            p = np.clip(self.mu * self.strong + (1.0 - self.mu) * self.weak, 0.0, 1.0)
            has = ~np.isnan(p)
            weight = self.rho * self.n
            a[has] += weight * p[has]
            b[has] += weight * (1.0 - p[has])
        a[tasks] = decay * self.alpha[tasks] + self.lam * 1.0 + s
        b[tasks] = decay * self.beta[tasks] + self.lam * 1.0 + (t - s)
        self.alpha, self.beta = a, b

    def select(self, k: int, excluded: np.ndarray) -> np.ndarray:
        if k == 0:  # selecting nothing draws nothing: the stream stays where it was
            return np.zeros(0, dtype=np.int64)
        if self.thompson:
            draws = _core.thompson_draws(self.alpha, self.beta, self.seed, self.counter)
            distance = np.abs(draws - np.float32(self.target)).astype(np.float64)
        else:
            distance = np.abs(self.alpha / (self.alpha + self.beta) - self.target)
        self.counter += 1
        order = np.lexsort((np.arange(N), distance))  # by distance, ties to the lower index
        return order[~excluded[order]][:k]


class SelectorMatchesTheModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sel = BOTS(N, lam=0.2, rho=0.3, n_rollouts=8, seed=4, evidence=Interpolation(WEAK, STRONG, MOMENTUM))
        self.model = Model(0.2, 0.3, 8.0, 4)

    @rule(size=st.integers(1, 30), seed=st.integers(0, 10_000), per_entry=st.booleans())
    def update(self, size: int, seed: int, per_entry: bool) -> None:
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, N, size)
        trials = rng.integers(1, 9, size).astype(float) if per_entry else np.full(size, 4.0)
        succ = np.floor(rng.random(size) * (trials + 1))
        self.sel.update(ids, succ, trials if per_entry else 4.0)
        self.model.update(ids, succ, trials)

    @rule(size=st.integers(1, 10), n=st.integers(1, 6), seed=st.integers(0, 10_000))
    def update_rewards(self, size: int, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        ids = rng.choice(N, size, replace=False)
        rewards = (rng.random((size, n)) < 0.5).astype(float)
        self.sel.update_rewards(ids, rewards)
        self.model.update(ids, rewards.sum(axis=1), np.full(size, float(n)))

    @rule(k=st.integers(0, 40), how=st.sampled_from(["none", "ids", "mask"]), seed=st.integers(0, 10_000))
    def select(self, k: int, how: str, seed: int) -> None:
        rng = np.random.default_rng(seed)
        excluded = np.zeros(N, dtype=bool)
        exclude: Any = None
        if how == "ids":
            exclude = rng.choice(N, 50, replace=False)
            excluded[exclude] = True
        elif how == "mask":
            exclude = excluded = rng.random(N) < 0.1
        got = self.sel.select(k, exclude=exclude)
        want = self.model.select(k, excluded)
        assert np.array_equal(got, want), (got, want)

    @rule(p_star=st.sampled_from([0.2, 0.5, 0.8]), thompson=st.booleans(), lam=st.sampled_from([0.0, 0.1, 1.0]))
    def set_params(self, p_star: float, thompson: bool, lam: float) -> None:
        self.sel.set_params(target=p_star, thompson=thompson, lam=lam)
        self.model.target, self.model.thompson, self.model.lam = p_star, thompson, lam

    @rule()
    def save_and_load(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sel.bots"
            self.sel.save(path)
            self.sel = BOTS.load(path)

    @rule()
    def pickle_round_trip(self) -> None:
        self.sel = pickle.loads(pickle.dumps(self.sel))

    @invariant()
    def posterior_and_stream_match(self) -> None:
        a, b = self.sel.alpha, self.sel.beta
        np.testing.assert_allclose(a, self.model.alpha, rtol=1e-12, atol=0)
        np.testing.assert_allclose(b, self.model.beta, rtol=1e-12, atol=0)
        assert self.sel.num_selections == self.model.counter
        assert (self.sel.capability is None) == (self.model.mu is None)
        if self.model.mu is not None:
            assert abs(self.sel.capability - self.model.mu) <= 1e-12 * max(1.0, abs(self.model.mu))


TestSelectorMatchesTheModel = SelectorMatchesTheModel.TestCase
TestSelectorMatchesTheModel.settings = settings(max_examples=30, stateful_step_count=30, deadline=None)
