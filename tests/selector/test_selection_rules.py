"""Selection rules and parameters beyond the paper's defaults: softmax sampling with temperature τ,
targets anywhere in [0, 1], and adaptive ρ (the authors' rule)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_rft import BOTS, Interpolation, _core
from bots_rft.errors import InvalidArgumentError, InvalidTypeError

N = 2500


def _trained(seed: int = 0, **kwargs: object) -> BOTS:
    sel = BOTS(N, seed=seed, **kwargs)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    for _ in range(3):
        ids = rng.choice(N, 200, replace=False)
        sel.update(ids, rng.integers(0, 9, 200), 8)
    return sel


# ---------------------------------------------------------------------------------- softmax
@given(seed=st.integers(0, 1000), k=st.integers(1, 60))
@settings(max_examples=25, deadline=None)
def test_a_vanishing_temperature_reduces_to_the_nearest_rule(seed: int, k: int) -> None:
    # Posterior means of continuous evidence never tie (float32 Thompson draws can, and ties
    # are broken by index in one rule and by the Gumbel variates in the other: the core's tests
    # check the Thompson case on a pool without ties).
    sel = BOTS(N, seed=seed, thompson=False, lam=0.0)
    rng = np.random.default_rng(seed)
    sel.update(np.arange(N), rng.random(N) * 7.3, 7.3)
    nearest = sel.state_dict()
    sel.set_params(tau=1e-12)
    soft = BOTS(N, seed=seed)
    soft.load_state_dict(sel.state_dict(), params="checkpoint")
    plain = BOTS(N, seed=seed)
    plain.load_state_dict(nearest, params="checkpoint")
    assert np.array_equal(soft.select(k), plain.select(k))


def test_softmax_samples_without_replacement_from_the_softmax() -> None:
    # Three tasks with means 0.5, 0.4, 0.2 (huge counts: draws sit on the mean), target 0.5,
    # tau 0.1: the first pick is task i with probability proportional to 1, e^-1, e^-3.
    sel = BOTS(3, thompson=False, tau=0.1, prior_alpha=[50.0, 40.0, 20.0], prior_beta=[50.0, 60.0, 80.0], seed=2)
    firsts = np.array([sel.select(3)[0] for _ in range(20_000)])
    weights = np.array([1.0, np.exp(-1.0), np.exp(-3.0)])
    expected = weights / weights.sum()
    observed = np.bincount(firsts, minlength=3) / firsts.size
    assert np.all(np.abs(observed - expected) < 5 * np.sqrt(expected * (1 - expected) / firsts.size))
    assert sorted(sel.select(3).tolist()) == [0, 1, 2]  # without replacement


def test_softmax_is_identical_with_prefetch_on_and_off_and_resumes(tmp_path: Path) -> None:
    on, off = _trained(tau=0.05), _trained(tau=0.05, prefetch=False)
    for step in range(4):
        a, b = on.select(64, exclude=np.arange(step * 10)), off.select(64, exclude=np.arange(step * 10))
        assert np.array_equal(a, b)
        on.update(a[:16], np.ones(16), 2)
        off.update(b[:16], np.ones(16), 2)
    on.save(tmp_path / "s.bots")
    back = BOTS.load(tmp_path / "s.bots")
    assert back.tau == 0.05 and np.array_equal(back.select(64), on.select(64))


def test_tau_is_checked() -> None:
    for bad in (-0.1, float("nan"), float("inf")):
        with pytest.raises(InvalidArgumentError, match="^tau: "):
            BOTS(10, tau=bad)
    sel = BOTS(10)
    with pytest.raises(InvalidArgumentError, match="^tau: "):
        sel.set_params(tau=-1)
    assert sel.tau == 0.0


# ---------------------------------------------------------------------------------- targets
def test_a_target_of_one_picks_the_tasks_likeliest_to_succeed() -> None:
    sel = BOTS(4, thompson=False, target=1.0, prior_alpha=[1.0, 9.0, 5.0, 2.0], prior_beta=[9.0, 1.0, 5.0, 8.0])
    assert sel.select(2).tolist() == [1, 2]
    sel.set_params(target=0.0)
    assert sel.select(2).tolist() == [0, 3]
    with pytest.raises(InvalidArgumentError, match="^target: "):
        sel.set_params(target=1.01)


# ---------------------------------------------------------------------------------- adaptive rho
def _references() -> Interpolation:
    weak = np.linspace(0.0, 0.5, N)
    return Interpolation(weak, weak + 0.4, momentum=0.0)


def test_adaptive_rho_halves_rho_when_predictions_miss_and_not_otherwise() -> None:
    sel = BOTS(N, evidence=_references(), rho=0.4, adaptive_rho=True)
    ids = np.arange(0, N, 10)
    # First batch: μ is fitted to this batch (momentum 0), predictions hit the mean, but each
    # task's own rate is far from its prediction half the time: rates 0 and 1 alternate.
    rates = (np.arange(ids.size) % 2).astype(float)
    sel.update(ids, rates * 8, 8)
    assert sel.rho_in_use == 0.2  # mean |p̃ - rate| ≈ 0.5 ≥ 0.25
    # A batch whose rates are what the references predict: no halving.
    mu = sel.capability
    weak, strong = sel.evidence.weak[ids], sel.evidence.strong[ids]  # type: ignore[union-attr]
    predicted = np.clip(mu * strong + (1 - mu) * weak, 0, 1)
    sel.update(ids, predicted * 8, 8)
    assert sel.rho_in_use == 0.2 and sel.rho == 0.4
    # set_params(rho=) starts over.
    sel.set_params(rho=0.3)
    assert sel.rho_in_use == 0.3


def test_adaptive_rho_is_off_by_default_and_resumes_exactly(tmp_path: Path) -> None:
    plain = BOTS(N, evidence=_references(), rho=0.4)
    ids = np.arange(0, N, 10)
    rates = (np.arange(ids.size) % 2).astype(float)
    plain.update(ids, rates * 8, 8)
    assert plain.rho_in_use == 0.4
    sel = BOTS(N, evidence=_references(), rho=0.4, adaptive_rho=True, seed=5)
    sel.update(ids, rates * 8, 8)
    sel.save(tmp_path / "s.bots")
    back = BOTS.load(tmp_path / "s.bots")
    assert back.adaptive_rho and back.rho_in_use == 0.2 and back.rho == 0.4
    for s in (sel, back):
        s.update(ids[:50], np.ones(50), 1)
    np.testing.assert_array_equal(sel.alpha, back.alpha)


def test_a_rejected_update_does_not_halve_rho() -> None:
    sel = BOTS(N, evidence=_references(), rho=0.4, adaptive_rho=True)
    with pytest.raises(InvalidArgumentError):
        sel.update([0, 1, N], [0, 8, 0], 8)
    assert sel.rho_in_use == 0.4


# ---------------------------------------------------------------------------------- per-pick info
@pytest.mark.parametrize("thompson", [True, False])
def test_picks_say_what_was_drawn_and_why(thompson: bool) -> None:
    weak = np.linspace(0.0, 0.5, N)
    sel = BOTS(N, evidence=Interpolation(weak, weak + 0.3), thompson=thompson, seed=3)
    twin = BOTS(N, evidence=Interpolation(weak, weak + 0.3), thompson=thompson, seed=3, prefetch=False)
    for s in (sel, twin):
        s.update(np.arange(0, N, 7), np.arange(0, N, 7) % 5, 4)
    counter = sel.num_selections
    chosen = sel.select(40)
    assert np.array_equal(chosen, twin.select(40))
    picks = sel.explain(chosen)
    assert np.array_equal(picks.ids, chosen)
    a, b = sel.posterior(picks.ids)
    np.testing.assert_array_equal(picks.alpha, a)
    np.testing.assert_array_equal(picks.beta, b)
    if thompson:  # the draws the whole pass made for those tasks
        every = _core.thompson_draws(sel.alpha, sel.beta, 3, counter)
        np.testing.assert_array_equal(picks.theta, every[picks.ids].astype(np.float64))
    else:
        np.testing.assert_allclose(picks.theta, a / (a + b))
    assert np.all(np.diff(-picks.score) >= 0)  # best first: the score falls
    np.testing.assert_allclose(picks.predicted, sel.predicted()[picks.ids])
    with pytest.raises(InvalidArgumentError, match="^task_ids: "):
        sel.explain([N])


# ---------------------------------------------------------------------------------- rewards
@given(rows=st.integers(1, 6), n=st.integers(1, 8), seed=st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_graded_rewards_are_fractional_evidence_and_reduce_to_counts(rows: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.choice(50, rows, replace=False)
    binary = (rng.random((rows, n)) < 0.5).astype(float)
    a, b = BOTS(50, seed=1), BOTS(50, seed=1)
    a.update_rewards(ids, binary)
    b.update(ids, binary.sum(axis=1), n)  # 0/1 rewards: today's count update
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.beta, b.beta)
    # Partial credit r adds r successes and 1 - r failures; more credit never lowers alpha.
    graded = rng.random((rows, n))
    c, d = BOTS(50), BOTS(50)
    c.update_rewards(ids, graded)
    d.update_rewards(ids, np.minimum(graded + 0.1, 1.0))
    np.testing.assert_allclose(c.alpha[ids], 1.0 * 0.9 + 0.1 + graded.sum(axis=1))
    assert np.all(d.alpha >= c.alpha) and np.all(d.beta <= c.beta)


def test_rewards_outside_the_unit_interval_need_an_explicit_mapping() -> None:
    ids = [0, 1]
    rewards = np.array([[-1.0, 1.0, 0.0], [1.0, 1.0, -0.1]])
    sel = BOTS(5)
    with pytest.raises(InvalidArgumentError, match=r"^rewards: must be in \[0, 1\], got -1.0 at \(0, 0\)"):
        sel.update_rewards(ids, rewards)
    ranged, counted = BOTS(5), BOTS(5)
    ranged.update_rewards(ids, rewards, reward_range=(-1.0, 1.0))
    counted.update(ids, ((rewards + 1.0) / 2.0).sum(axis=1), 3)
    np.testing.assert_array_equal(ranged.alpha, counted.alpha)
    thresholded, counted = BOTS(5), BOTS(5)
    thresholded.update_rewards(ids, rewards, success_threshold=0.5)
    counted.update(ids, [1, 2], 3)
    np.testing.assert_array_equal(thresholded.alpha, counted.alpha)
    before = sel.state_dict()["alpha"]
    for kwargs, name in [
        ({"reward_range": (-0.5, 1.0)}, "rewards"),  # -1 is outside the declared range
        ({"reward_range": (1.0, 0.0)}, "reward_range"),
        ({"reward_range": "wide"}, "reward_range"),
        ({"reward_range": (0, 1), "success_threshold": 0.5}, "reward_range"),
        ({"success_threshold": float("nan")}, "success_threshold"),
    ]:
        with pytest.raises((InvalidArgumentError, InvalidTypeError), match=f"^{name}: "):
            sel.update_rewards(ids, rewards, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="must be finite"):
        sel.update_rewards(ids, [[np.nan, 1.0, 1.0], [0.0, 0.0, 0.0]], success_threshold=0.5)
    np.testing.assert_array_equal(sel.state_dict()["alpha"], before)


# ---------------------------------------------------------------------------------- adaptive lambda
def test_adaptive_lam_forgets_faster_while_the_learner_drifts() -> None:
    def run(adaptive: bool, drift: bool) -> BOTS:
        sel = BOTS(200, lam=0.1, rho=0.0, adaptive_lam=adaptive, seed=0)
        rng = np.random.default_rng(0)
        for step in range(30):
            p = np.full(100, 0.2 if not drift or step < 15 else 0.9)  # the learner jumps at 15
            ids = np.arange(100)
            sel.update(ids, rng.binomial(16, p), 16)
        return sel

    steady, drifting = run(True, False), run(True, True)
    assert steady.lam_in_use < 0.1 < drifting.lam_in_use <= 0.4
    # After the jump, adaptive lambda's posterior means are nearer the new rate than fixed lambda's.
    fixed = run(False, True)
    assert fixed.lam_in_use == 0.1
    assert np.mean(drifting.mean()[:100]) > np.mean(fixed.mean()[:100])


def test_adaptive_lam_is_off_by_default_and_resumes(tmp_path: Path) -> None:
    sel = BOTS(50, adaptive_lam=True, seed=2)
    sel.update(np.arange(10), np.full(10, 4), 4)  # all pass where the prior predicts 0.5: D = 2
    sel.save(tmp_path / "s.bots")
    back = BOTS.load(tmp_path / "s.bots")
    assert back.adaptive_lam and back.lam_in_use == sel.lam_in_use != 0.1
    for s in (sel, back):
        s.update(np.arange(5), [4, 0, 4, 0, 4], 4)
    np.testing.assert_array_equal(sel.alpha, back.alpha)
    assert BOTS(50).lam_in_use == 0.1
