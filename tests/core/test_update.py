"""The update rule and the interpolation estimator against the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, Interpolation
from reference import RefInterpolation, reference_update

UNIT = st.one_of(st.sampled_from([0.0, 1.0, 0.1, 0.5]), st.floats(0.0, 1.0))


@st.composite
def scenarios(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    return {
        "n": n,
        "seed": seed,
        "lam": draw(UNIT),
        "rho": draw(UNIT),
        "n_rollouts": draw(st.sampled_from([1.0, 8.0, 16.0, 2.5])),
        "per_task_prior": draw(st.booleans()),
        "nan_share": draw(st.sampled_from([0.0, 0.3, 1.0])),
        "fractional": draw(st.booleans()),
        "steps": draw(st.integers(1, 6)),
        "momentum": draw(st.sampled_from([0.0, 0.5, 0.9, 1.0])),
        "mode": draw(st.sampled_from(["interpolation", "predicted", "none"])),
    }


@given(scenarios())
def test_update_matches_numpy_reference(sc) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(sc["seed"])
    n = sc["n"]
    a0 = rng.uniform(0.2, 3.0, n) if sc["per_task_prior"] else 1.0
    b0 = rng.uniform(0.2, 3.0, n) if sc["per_task_prior"] else 1.0
    weak = rng.uniform(0, 1, n)
    strong = np.clip(weak + rng.uniform(-0.2, 0.6, n), 0, 1)
    weak[rng.random(n) < sc["nan_share"] / 2] = np.nan
    strong[rng.random(n) < sc["nan_share"] / 2] = np.nan
    interp = sc["mode"] == "interpolation"
    sel = BOTS(
        n,
        lam=sc["lam"],
        rho=sc["rho"],
        n_rollouts=sc["n_rollouts"],
        prior_alpha=a0,
        prior_beta=b0,
        evidence=Interpolation(weak, strong, momentum=sc["momentum"]) if interp else None,
        threads=1 + sc["seed"] % 2,
    )
    # The selector stores references as float32; the reference implementation sees the same values.
    as32 = lambda x: x.astype(np.float32).astype(np.float64)  # noqa: E731
    ref = RefInterpolation(as32(weak), as32(strong), sc["momentum"]) if interp else None
    alpha = np.broadcast_to(a0, (n,)).astype(float)
    beta = np.broadcast_to(b0, (n,)).astype(float)
    for _ in range(sc["steps"]):
        b = int(rng.integers(1, 2 * n + 1))  # an empty batch is refused (tests/selector/test_bad_input_refused.py)
        ids = rng.integers(0, n, b)  # duplicates likely
        trials = rng.uniform(0.5, 16, b) if sc["fractional"] else rng.integers(1, 17, b).astype(float)
        succ = (
            rng.uniform(0, 1, b) * trials if sc["fractional"] else rng.binomial(trials.astype(int), 0.5).astype(float)
        )
        pred = None
        if sc["mode"] == "predicted":
            pred = rng.uniform(0, 1, n)
            pred[rng.random(n) < 0.3] = np.nan
        sel.update(ids, succ, trials, predicted=pred)
        alpha, beta = reference_update(
            alpha, beta, a0, b0, ids, succ, trials, sc["lam"], sc["rho"], sc["n_rollouts"], pred, ref
        )
        np.testing.assert_allclose(sel.alpha, alpha, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(sel.beta, beta, rtol=1e-10, atol=1e-12)
        if interp:
            assert (sel.capability is None) == (ref.capability is None)
            if ref.capability is not None:
                assert sel.capability == pytest.approx(ref.capability, rel=1e-9, abs=1e-12)


def test_rolled_out_tasks_get_exactly_their_counts() -> None:
    sel = BOTS(4, lam=0.1, rho=0.1, evidence=Interpolation([0.2, 0.4, 0.6, np.nan], [0.6, 0.8, 1.0, 0.5]))
    sel.update([0, 0, 1], [3, 5, 8], [8, 8, 16])
    # task 0: 8 of 16 summed over two entries; task 1: 8 of 16.
    assert sel.alpha[0] == pytest.approx(0.9 + 0.1 + 8)
    assert sel.beta[0] == pytest.approx(0.9 + 0.1 + 8)
    # obs = mean(0.5, 0.5), W = 0.3, S = 0.7 -> mu = 0.5 -> task 2 predicted 0.8, task 3 none.
    assert sel.capability == pytest.approx(0.5)
    assert sel.alpha[2] == pytest.approx(1.0 + 1.6 * 0.8)
    assert sel.beta[2] == pytest.approx(1.0 + 1.6 * 0.2)
    assert (sel.alpha[3], sel.beta[3]) == (pytest.approx(1.0), pytest.approx(1.0))


def test_coincident_references_skip_the_estimate() -> None:
    ev = Interpolation([0.5, 0.5, 0.2], [0.5, 0.5, 0.9], momentum=0.9)
    sel = BOTS(3, evidence=ev)
    sel.update([0, 1], [4, 12], 16)  # W == S on the batch: no estimate
    assert sel.capability is None
    sel.update([2], [8], 16)  # obs 0.5, W 0.2, S 0.9 -> mu = 3/7
    assert sel.capability == pytest.approx(3 / 7)
    sel.update([0], [16], 16)  # skipped again: mu~ keeps its value
    assert sel.capability == pytest.approx(3 / 7)
    sel.update([2], [16], 16)  # mu = 8/7 -> 0.9 * 3/7 + 0.1 * 8/7
    assert sel.capability == pytest.approx(0.9 * 3 / 7 + 0.1 * 8 / 7)
    np.testing.assert_allclose(
        sel.predicted(), np.clip(sel.capability * ev.strong + (1 - sel.capability) * ev.weak, 0, 1)
    )


def test_min_gap_skips_batches_whose_references_nearly_cancel() -> None:
    """St - W = 0.04 on the first batch: the default 1e-6 gap takes mu = (0.5 - 0.3) / 0.04 = 5, a
    gap of 0.05 skips it; both take the next batch (St - W = 0.5)."""
    weak, strong = [0.3, 0.3, 0.2], [0.34, 0.34, 0.7]
    spec, wide = Interpolation(weak, strong), Interpolation(weak, strong, min_gap=0.05)
    assert spec.min_gap == 1e-6 and wide.min_gap == 0.05
    a, b = BOTS(3, evidence=spec), BOTS(3, evidence=wide)
    for sel in (a, b):
        sel.update([0, 1], [8, 8], 16)
    assert a.capability == pytest.approx(5.0, rel=1e-5) and b.capability is None
    for sel in (a, b):
        sel.update([2], [8], 16)  # mu = (0.5 - 0.2) / 0.5 = 0.6
    assert a.capability == pytest.approx(0.9 * 5.0 + 0.1 * 0.6, rel=1e-5)
    assert b.capability == pytest.approx(0.6)
    # Kept through state_dict and checkpoints; a state without it (older files) means the default gap.
    state = wide.state_dict()
    assert Interpolation.from_state_dict(state).min_gap == 0.05
    del state["min_gap"]
    assert Interpolation.from_state_dict(state).min_gap == 1e-6


def test_min_gap_survives_save_and_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    sel = BOTS(3, evidence=Interpolation([0.3, 0.3, 0.2], [0.34, 0.34, 0.7], min_gap=0.05))
    sel.save(tmp_path / "s.bots")
    back = BOTS.load(tmp_path / "s.bots")
    assert isinstance(back.evidence, Interpolation) and back.evidence.min_gap == 0.05
    back.update([0, 1], [8, 8], 16)
    assert back.capability is None


def test_predicted_replaces_the_estimator_for_one_step() -> None:
    ev = Interpolation([0.2, 0.4, 0.6], [0.6, 0.8, 1.0])
    sel = BOTS(3, evidence=ev)
    sel.update([0], [8], 16, predicted=np.array([np.nan, 0.25, np.nan]))
    assert sel.capability is None  # the estimator did not observe this batch
    assert sel.alpha[1] == pytest.approx(1 + 1.6 * 0.25)
    assert sel.alpha[2] == pytest.approx(1.0)


def test_update_rewards_equals_update_with_counts(rng: np.random.Generator) -> None:
    a, b = BOTS(50, seed=1), BOTS(50, seed=1)
    ids = rng.integers(0, 50, 20)
    rewards = rng.random((20, 8))
    a.update_rewards(ids, rewards)
    b.update(ids, rewards.sum(axis=1), 8)
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-12)
    np.testing.assert_allclose(a.beta, b.beta, rtol=1e-12)
    ragged = [[1, 0, 1], [0.5], [1, 1, 1, 1]]
    a.update_rewards([3, 4, 3], ragged)
    b.update([3, 4, 3], [2, 0.5, 4], [3, 1, 4])
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-12)


class CountingEstimator:
    """A custom plug-in: predicts 0.25 everywhere and counts its calls."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def predict(self, task_ids, successes, trials):  # type: ignore[no-untyped-def]
        self.calls += 1
        assert np.all(np.diff(task_ids) > 0)
        return np.full(self.n, 0.25)


def test_custom_estimator_plugs_in() -> None:
    est = CountingEstimator(5)
    sel = BOTS(5, lam=0.0, rho=0.5, n_rollouts=4, evidence=est)
    sel.update([1, 1], [1, 2], 4)
    assert est.calls == 1
    assert sel.alpha[0] == pytest.approx(1 + 2 * 0.25)
    assert sel.alpha[1] == pytest.approx(1 + 3)


@pytest.mark.parametrize("lam,rho", [(0.1, 0.1), (0.2, 0.0), (0.05, 1.0), (0.5, 0.3)])
def test_proposition_two_bounds(lam: float, rho: float, rng: np.random.Generator) -> None:
    """Paper Prop. 2: n0 + ρn/λ(1-(1-λ)^t) <= α+β <= n0 + n/λ(1-(1-λ)^t), every task, every t."""
    N, n, B = 400, 16, 40
    sel = BOTS(N, lam=lam, rho=rho, n_rollouts=n, prior_alpha=1.5, prior_beta=0.5)
    n0 = 2.0
    for t in range(1, 80):
        ids = sel.select(B)  # distinct
        sel.update(ids, rng.binomial(n, 0.5, B), n, predicted=rng.random(N))
        g = 1 - (1 - lam) ** t
        total = sel.alpha + sel.beta
        assert np.all(total >= n0 + rho * n / lam * g - 1e-9)
        assert np.all(total <= n0 + n / lam * g + 1e-9)
