"""Calibration of the selector's predictions against what it then observed (bots_rft.metrics.calibration)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, CheckpointError, InvalidArgumentError
from bots_rft.metrics.calibration import (
    CalibrationTracker,
    brier_score,
    calibration_metrics,
    expected_calibration_error,
    predicted_pass_rates,
    spearman,
    zero_variance_share,
)


def test_brier_is_the_mean_over_rollouts() -> None:
    # Task 0: 3 of 4 at p = 0.5; task 1: 0 of 2 at p = 0.1. Rollout by rollout:
    expected = (3 * 0.25 + 1 * 0.25 + 2 * 0.01) / 6
    assert brier_score([0.5, 0.1], [3, 0], [4, 2]) == pytest.approx(expected)
    assert brier_score([1.0, 0.0], [4, 0], 4) == 0.0
    assert math.isnan(brier_score([np.nan], [1], 2))


def test_ece_by_hand() -> None:
    # Two bins: {0.15, 0.15} observe 2/8 in total, {0.85} observes 2/4.
    ece = expected_calibration_error([0.15, 0.15, 0.85], [1, 1, 2], 4)
    assert ece == pytest.approx((abs(0.15 * 8 - 2) + abs(0.85 * 4 - 2)) / 12)
    assert expected_calibration_error([0.25, 0.75], [1, 3], 4) == pytest.approx(0.0)


@given(st.lists(st.floats(0, 1), min_size=1, max_size=30), st.integers(0, 2**16))
def test_perfect_predictions_have_zero_ece_in_expectation_form(p: list[float], seed: int) -> None:
    # Graded evidence equal to the prediction itself is perfectly calibrated.
    pa = np.array(p)
    assert expected_calibration_error(pa, pa * 8, 8) == pytest.approx(0.0, abs=1e-12)
    assert 0.0 <= brier_score(pa, np.random.default_rng(seed).binomial(8, pa), 8) <= 1.0


def test_spearman_matches_a_reference_with_ties() -> None:
    x = np.array([0.1, 0.4, 0.4, 0.9, 0.3])
    y = np.array([1, 2, 3, 5, 2])
    scipy_stats = pytest.importorskip("scipy.stats")
    assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(spearman([1], [1]))


def test_zero_variance_share() -> None:
    assert zero_variance_share([0, 4, 2, 3], 4) == 0.5
    assert zero_variance_share([0.0, 1.5], [2, 2]) == 0.5


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        brier_score([0.5], [5], 4)
    assert info.value.argument == "successes"
    with pytest.raises(InvalidArgumentError) as info:
        brier_score([1.5], [1], 4)
    assert info.value.argument == "predicted"
    with pytest.raises(InvalidArgumentError) as info:
        brier_score([0.5, 0.5], [1], 4)
    assert info.value.argument == "predicted"
    with pytest.raises(InvalidArgumentError) as info:
        expected_calibration_error([0.5], [1], 4, bins=0)
    assert info.value.argument == "bins"


def test_predictions_come_from_the_posterior_at_selection_time() -> None:
    sel = BOTS(10, lam=0.0)
    sel.update([3], [6], 8)
    ids = sel.select(4)
    np.testing.assert_allclose(predicted_pass_rates(sel, ids), sel.mean()[ids])
    assert np.all(np.isnan(predicted_pass_rates(object(), [1, 2])))


def test_tracker_records_logs_and_resumes() -> None:
    tracker = CalibrationTracker()
    step = tracker.record([0.5, 0.2, np.nan], [2, 0, 4], 4)
    assert step == calibration_metrics([0.5, 0.2, np.nan], [2, 0, 4], 4)
    assert step.zero_variance == pytest.approx(2 / 3)  # NaN predictions still count as groups
    tracker.record([0.9, 0.1], [4, 1], 4)
    logged = step.metrics()
    assert set(logged) == {
        "bots/calibration_brier",
        "bots/calibration_ece",
        "bots/calibration_spearman",
        "bots/zero_variance_share",
    }
    back = CalibrationTracker()
    back.load_state_dict(tracker.state_dict())
    assert back.history == tracker.history and len(back) == 2
    with pytest.raises(CheckpointError):
        back.load_state_dict({"format": "other"})


def test_a_calibrated_selector_scores_better_than_a_shuffled_one() -> None:
    rng = np.random.default_rng(0)
    true = rng.random(400)
    outcomes = rng.binomial(16, true)
    good = calibration_metrics(true, outcomes, 16)
    bad = calibration_metrics(rng.permutation(true), outcomes, 16)
    assert good.brier < bad.brier and good.ece < bad.ece and good.spearman > bad.spearman


def test_the_simulator_records_and_plots_calibration(tmp_path: object) -> None:
    from pathlib import Path

    from bots_rft.report.simulation_plots import plot_calibration
    from bots_rft.simulate import LearnerConfig, SimConfig, run_experiment

    config = SimConfig(
        learner=LearnerConfig(num_tasks=1000, eval_tasks=128),
        steps=6,
        batch_size=16,
        seeds=(0,),
        methods=("random", "bots"),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )
    result = run_experiment(config, progress=False)
    bots = result.records(result.groups["methods"][1][1])[0]
    random = result.records(result.groups["methods"][0][1])[0]
    assert np.all(np.isfinite(bots.brier)) and np.all(np.isfinite(bots.ece))
    assert np.all(np.isnan(random.brier))  # no posterior, no prediction
    assert np.all((random.zero_variance >= 0) & (random.zero_variance <= 1))
    row = bots.to_rows("BOTS")[0]
    assert {"brier", "ece", "spearman", "zero_variance"} <= set(row)
    path = plot_calibration(result, Path(str(tmp_path)) / "calibration.png")
    assert path is not None and path.stat().st_size > 0
