"""The simulated replica of a real comparison (``bots_rft.simulate.replica``): the world matched
to a real pool, paired predictions, and the fits of trajectory noise and learning rate."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from bots_rft.errors import ConfigError
from bots_rft.simulate.experiment import MethodSpec
from bots_rft.simulate.learner import SimulatedLearner, make_world
from bots_rft.simulate.replica import (
    ReplicaFit,
    fit_learning_rate,
    fit_replica,
    fit_trajectory_noise,
    predict_paired,
    replica_learner,
)

SHARES = (0.358, 0.146)
WEAK, STRONG = 0.002, 0.766
SEEDS = (0, 1, 2)
SMALL: dict[str, Any] = dict(steps=20, batch_size=16, eval_every=10)


@pytest.fixture(scope="module")
def fit() -> ReplicaFit:
    # The linear rule without trajectory noise (the learner these fits were first written for): at
    # batch 16 its step is a usable size for the fits' mechanics, which do not depend on the rule.
    return fit_replica(
        SHARES,
        WEAK,
        STRONG,
        1500,
        8,
        200,
        fit_seeds=SEEDS,
        start_mean=0.428,
        group_noise=4.0,
        repeat_decay=1.0,
        step_rule="linear",
        trajectory_noise=0.0,
    )


def test_the_replica_world_matches_the_requested_shares(fit: ReplicaFit) -> None:
    c = fit.learner
    assert (c.num_tasks, c.n_rollouts, c.eval_tasks, c.ref_rollouts) == (1500, 8, 200, 8)
    assert (c.group_noise, c.repeat_decay) == (4.0, 1.0)  # overrides kept
    # Measured independently on the worlds themselves: expected shares at 0 / at 1 of 8 samples.
    at0, at1, weak, strong = [], [], [], []
    for s in SEEDS:
        w = make_world(c, s)
        p = 1.0 / (1.0 + np.exp(-w.base_logit))
        at0.append(np.mean((1 - p) ** 8))
        at1.append(np.mean(p**8))
        weak.append(w.weak_true.mean())
        strong.append(w.strong_true.mean())
    for got, want in ((at0, SHARES[0]), (at1, SHARES[1]), (weak, WEAK), (strong, STRONG)):
        assert abs(float(np.mean(got)) - want) <= 0.02
    # One measured draw of 8 samples lands near the targets too, and the summary says what it did.
    assert abs(fit.measured["at0"] - SHARES[0]) <= 0.03 and abs(fit.measured["at1"] - SHARES[1]) <= 0.03
    assert set(fit.targets) == {"at0", "at1", "weak_mean", "strong_mean"}
    assert all(abs(e) <= 0.02 for e in fit.errors.values())
    assert "start_mean" in fit.unmatched and "not fitted" in fit.describe()


@pytest.mark.parametrize("target", [0.3, 0.45])
def test_the_reference_noise_is_fitted_to_the_real_correlation(target: float) -> None:
    f = fit_replica(SHARES, WEAK, STRONG, 1500, 8, 200, fit_seeds=SEEDS, start_strong_pearson=target, fit_pearson=True)
    # Measured on the worlds themselves: the start measured with 8 samples against the strong
    # reference's measured rates, as a real pool gives them; the levels still hold their means.
    corr = []
    for s in SEEDS:
        w = make_world(f.learner, s)
        p = 1.0 / (1.0 + np.exp(-w.base_logit))
        k = np.random.default_rng([s, 99]).binomial(8, p)
        corr.append(np.corrcoef(k / 8, w.strong)[0, 1])
    assert abs(float(np.mean(corr)) - target) <= 0.03
    assert abs(f.achieved["start_strong_pearson"] - target) <= 0.02
    assert abs(f.achieved["strong_mean"] - STRONG) <= 0.02 and abs(f.achieved["weak_mean"] - WEAK) <= 0.02
    assert "start_strong_pearson" in f.targets and "start_strong_pearson" not in f.unmatched
    assert "ref_task_noise" in f.describe()


def test_a_weaker_correlation_needs_noisier_references() -> None:
    noise = [
        fit_replica(
            SHARES, WEAK, STRONG, 1500, 8, 200, fit_seeds=SEEDS, start_strong_pearson=r, fit_pearson=True
        ).learner.ref_task_noise
        for r in (0.45, 0.3)
    ]
    assert noise[1] > noise[0] > 0


def test_the_pearson_fit_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ConfigError, match="fit_pearson"):
        fit_replica(SHARES, WEAK, STRONG, 800, 8, 100, fit_seeds=(0,), fit_pearson=True)
    with pytest.raises(ConfigError, match="start_strong_pearson"):
        fit_replica(SHARES, WEAK, STRONG, 800, 8, 100, fit_seeds=(0,), start_strong_pearson=1.5)
    # Noise-free references correlate with the start at about 0.55 here: 0.9 cannot be met.
    with pytest.raises(ConfigError, match="start_strong_pearson .target 0.9"):
        fit_replica(SHARES, WEAK, STRONG, 800, 8, 100, fit_seeds=(0,), start_strong_pearson=0.9, fit_pearson=True)
    with pytest.raises(ConfigError, match="ref_task_noise"):
        fit_replica(
            SHARES,
            WEAK,
            STRONG,
            800,
            8,
            100,
            fit_seeds=(0,),
            start_strong_pearson=0.3,
            fit_pearson=True,
            ref_task_noise=1.0,
        )


def test_replica_learner_is_the_fit_and_refuses_what_it_cannot_match() -> None:
    c = replica_learner(SHARES, WEAK, STRONG, 800, 8, 100, fit_seeds=(0,), step_rule="saturating", saturation_k=64.0)
    assert (c.step_rule, c.saturation_k) == ("saturating", 64.0)
    with pytest.raises(ConfigError, match="at0"):
        replica_learner((0.6, 0.5), WEAK, STRONG, 800, 8, 100, fit_seeds=(0,))
    with pytest.raises(ConfigError, match="difficulty_mean"):
        replica_learner(SHARES, WEAK, STRONG, 800, 8, 100, difficulty_mean=0.0)


def test_predict_paired_shapes_and_a_zero_difference_for_random_against_itself(fit: ReplicaFit) -> None:
    r = predict_paired(
        fit.learner, {"random": "random", "again": MethodSpec("random"), "bots": "bots"}, seeds=SEEDS, **SMALL
    )
    assert r["runs"] == 9 and r["seeds"] == list(SEEDS) and set(r["methods"]) == {"random", "again", "bots"}
    again, bots = r["methods"]["again"], r["methods"]["bots"]
    assert again["diff"] == 0.0 and again["diff_half"] == 0.0 and again["diff_sd"] == 0.0 and again["diff_n"] == 3
    assert again["per_seed"] == r["methods"]["random"]["per_seed"]
    assert len(bots["per_seed"]) == 3 and bots["key"].startswith("bots(")
    assert r["baseline_gain"] > 0 and bots["baseline_gain"] == r["baseline_gain"]
    assert bots["relative"] == pytest.approx(bots["diff"] / r["baseline_gain"])
    assert bots["diff"] == pytest.approx(np.mean(np.subtract(bots["per_seed"], r["methods"]["random"]["per_seed"])))
    # One world for every seed: the same start; seeds still differ through training.
    one = predict_paired(fit.learner, ("random",), seeds=SEEDS, world_seed=0, **SMALL)
    assert one["start"] == pytest.approx(SimulatedLearner(make_world(fit.learner, 0), 0).evaluate())
    assert len(set(one["methods"]["random"]["per_seed"])) == 3
    with pytest.raises(ConfigError, match="baseline"):
        predict_paired(fit.learner, ("bots",), seeds=SEEDS, **SMALL)
    with pytest.raises(ConfigError, match="eval_every"):
        predict_paired(fit.learner, ("random",), seeds=SEEDS, steps=20, eval_every=7)


def test_fit_trajectory_noise_picks_a_larger_sigma_for_a_larger_ratio(fit: ReplicaFit) -> None:
    grid = (0.0, 0.02, 0.08)
    low, table = fit_trajectory_noise(fit.learner, 0.0, grid=grid, seeds=range(4), **SMALL)
    high, _ = fit_trajectory_noise(fit.learner, 10.0, grid=grid, seeds=range(4), **SMALL)
    assert [row["sigma"] for row in table] == list(grid)
    assert low < high and low == 0.0 and high == 0.08
    assert table[-1]["ratio"] > table[0]["ratio"]


def test_fit_learning_rate_brackets_and_reproduces_the_target(fit: ReplicaFit) -> None:
    learner = replace(fit.learner, learning_rate=0.01)
    target = 0.08
    rate, table = fit_learning_rate(learner, target, rtol=0.02, seeds=SEEDS, **SMALL)
    rel = {row["learning_rate"]: row["relative_gain"] for row in table}
    assert min(rel.values()) < target < max(rel.values())  # bracketed
    assert abs(rel[rate] - target) <= 0.02 * target
    again = predict_paired(replace(learner, learning_rate=rate), ("random",), seeds=SEEDS, **SMALL)
    assert again["baseline_gain"] / again["start"] == pytest.approx(rel[rate])
    with pytest.raises(ConfigError):
        fit_learning_rate(learner, 0.0, seeds=SEEDS, **SMALL)
