"""Metrics on hand-worked cases, including the paper's own examples (appendix E.4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft.errors import BotsError, InvalidArgumentError
from bots_rft.metrics import (
    best_so_far,
    effective_probability,
    effective_ratios,
    first_reach,
    format_ratio,
    mean_ci,
    pearson,
    rate_heatmap,
    rate_heatmap_from_counts,
    rate_histogram,
    roc_auc,
    rollout_axis,
    time_to_baseline,
)

# ------------------------------------------------------------------------------------------
# TTB
# ------------------------------------------------------------------------------------------


def test_ttb_paper_example() -> None:
    # Baseline 0.1 -> 0.3 over 100 steps, reaching the 50% target 0.2 at step 40; the method
    # reaches 0.2 at step 30: TTB(50%) = 30/40 = 0.75.
    steps = [0, 10, 20, 30, 40, 50, 100]
    base = [0.1, 0.12, 0.15, 0.18, 0.2, 0.25, 0.3]
    meth = [0.1, 0.13, 0.17, 0.2, 0.22, 0.26, 0.31]
    (ttb50,) = time_to_baseline(steps, meth, steps, base, fractions=[0.5])
    assert ttb50 == pytest.approx(0.75)


def test_ttb_interpolates_between_evaluation_points() -> None:
    steps = [0, 50, 100]
    base = [0.1, 0.2, 0.3]  # target 0.2 (50%) exactly at step 50; 0.25 (75%) at 75; 0.3 at 100
    meth = [0.1, 0.3, 0.3]  # 0.2 at step 25, 0.25 at 37.5, 0.3 at 50
    ttb = time_to_baseline(steps, meth, steps, base)
    assert ttb[0] == pytest.approx(25 / 50)
    assert ttb[1] == pytest.approx(37.5 / 75)
    assert ttb[2] == pytest.approx(50 / 100)


def test_ttb_baseline_is_one_and_never_reached_is_none() -> None:
    steps = np.arange(11)
    base = np.linspace(0.2, 0.4, 11)
    assert time_to_baseline(steps, base, steps, base) == [1.0, 1.0, 1.0]
    slow = np.linspace(0.2, 0.32, 11)  # reaches the 50% target (0.3) at step 25/3, never 0.35
    ttb = time_to_baseline(steps, slow, steps, base)
    assert ttb[0] == pytest.approx((0.1 / 0.012) / 5)
    assert ttb[1] is None and ttb[2] is None
    assert [format_ratio(v) for v in ttb] == ["1.67", "-", "-"]


def test_ttb_target_is_baselines_best_not_last() -> None:
    steps = [0, 1, 2, 3]
    base = [0.1, 0.5, 0.3, 0.4]  # best 0.5 at step 1; 100% target is 0.5
    meth = [0.1, 0.3, 0.5, 0.2]
    assert time_to_baseline(steps, meth, steps, base, fractions=[1.0]) == [2.0]


def test_ttb_undefined_when_baseline_does_not_improve() -> None:
    steps = [0, 1, 2]
    ttb = time_to_baseline(steps, [0.1, 0.2, 0.3], steps, [0.3, 0.2, 0.1])
    assert all(math.isnan(v) for v in ttb if v is not None)
    assert format_ratio(ttb[0]) == "n/a"


def test_first_reach() -> None:
    assert first_reach([0, 10], [0.0, 1.0], 0.25) == pytest.approx(2.5)
    assert first_reach([0, 10], [0.5, 1.0], 0.25) == 0.0  # already there at the first point
    assert first_reach([0, 10], [0.0, 0.2], 0.25) is None
    # The first crossing counts, not a later one.
    assert first_reach([0, 1, 2, 3], [0.0, 0.6, 0.1, 0.9], 0.5) == pytest.approx(5 / 6)


def test_ttb_rejects_bad_curves() -> None:
    with pytest.raises(InvalidArgumentError):
        time_to_baseline([0, 1], [0.1], [0, 1], [0.1, 0.2])
    with pytest.raises(InvalidArgumentError):
        time_to_baseline([1, 0], [0.1, 0.2], [0, 1], [0.1, 0.2])
    with pytest.raises(BotsError):
        time_to_baseline([0, 1], [0.1, 0.2], [0, 1], [0.1, 0.2], fractions=[1.5])


# ------------------------------------------------------------------------------------------
# BSF
# ------------------------------------------------------------------------------------------


def test_bsf_paper_example() -> None:
    # T = 100, beta = 50%: best by step 50 is 0.6 for the method and 0.4 for the baseline.
    steps = [0, 25, 50, 75, 100]
    base = [0.1, 0.4, 0.35, 0.5, 0.45]
    meth = [0.1, 0.6, 0.5, 0.55, 0.7]
    bsf = best_so_far(steps, meth, steps, base)
    assert bsf[1] == pytest.approx(1.5)  # 0.6 / 0.4
    assert bsf[0] == pytest.approx(0.6 / 0.4)  # step 25: same bests
    assert bsf[2] == pytest.approx(0.7 / 0.5)


def test_bsf_uses_floor_of_budget_and_baseline_is_one() -> None:
    steps = np.arange(0, 11)  # T = 10; 25% -> step 2 (floor 2.5)
    base = np.linspace(0.1, 0.2, 11)
    meth = base.copy()
    meth[3] = 0.9  # at step 3: outside the 25% budget
    bsf = best_so_far(steps, meth, steps, base)
    assert bsf[0] == pytest.approx(1.0)
    assert bsf[1] == pytest.approx(0.9 / base[5])
    assert best_so_far(steps, base, steps, base) == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------------------------------
# ETR and ratios
# ------------------------------------------------------------------------------------------


def test_effective_ratios() -> None:
    r = effective_ratios([0, 16, 8, 1, 15, 0, 0, 16], 16)
    assert r.etr == pytest.approx(3 / 8)
    assert r.below_one == pytest.approx(6 / 8)
    assert r.above_zero == pytest.approx(5 / 8)


def test_effective_ratios_per_entry_trials_and_fractional() -> None:
    r = effective_ratios([0.0, 2.5, 4.0, 3.0], [4, 4, 4, 8])
    assert (r.etr, r.below_one, r.above_zero) == (0.5, 0.75, 0.75)


def test_effective_ratios_rejects_bad_input() -> None:
    with pytest.raises(InvalidArgumentError):
        effective_ratios([17], 16)
    with pytest.raises(InvalidArgumentError):
        effective_ratios([-1], 16)
    with pytest.raises(InvalidArgumentError):
        effective_ratios([], 16)


# ------------------------------------------------------------------------------------------
# Pearson and ROC AUC (hand values)
# ------------------------------------------------------------------------------------------


def test_pearson_hand_values() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # x = (1,2,3,4), y = (1,3,2,4): dx·dy = 4 and |dx|² = |dy|² = 5, so r = 4/5.
    assert pearson([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(pearson([1], [2]))


def test_roc_auc_hand_values() -> None:
    assert roc_auc([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1]) == 1.0
    assert roc_auc([0.9, 0.8, 0.2, 0.1], [0, 0, 1, 1]) == 0.0
    # Pairs (pos, neg): (0.8 vs 0.1) win, (0.8 vs 0.9) lose, (0.4 vs 0.1) win, (0.4 vs 0.9) lose.
    assert roc_auc([0.1, 0.8, 0.4, 0.9], [0, 1, 1, 0]) == 0.5
    # Ties count one half: pos {0.5, 0.7}, neg {0.5, 0.2}: 0.5 + 1 + 1 + 1 = 3.5 of 4.
    assert roc_auc([0.5, 0.7, 0.5, 0.2], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert math.isnan(roc_auc([0.1, 0.2], [1, 1]))


def test_effective_probability() -> None:
    np.testing.assert_allclose(effective_probability([0.0, 1.0, 0.5], 2), [0.0, 0.0, 0.5])


# ------------------------------------------------------------------------------------------
# Heatmap data and intervals
# ------------------------------------------------------------------------------------------


def test_rate_histogram_counts() -> None:
    h = rate_histogram([0, 0, 4, 2, 4, 1], 4)
    assert h.tolist() == [2, 1, 1, 0, 2]
    assert h.sum() == 6


def test_rate_heatmap_rows_are_shares() -> None:
    heat = rate_heatmap([[0, 0, 4, 2], [1, 1, 1, 3]], 4)
    assert heat.shape == (2, 5)
    np.testing.assert_allclose(heat[0], [0.5, 0, 0.25, 0, 0.25])
    np.testing.assert_allclose(heat[1], [0, 0.75, 0, 0.25, 0])
    np.testing.assert_allclose(rate_heatmap_from_counts([[0, 0], [1, 3]]), [[0, 0], [0.25, 0.75]])


def test_mean_ci() -> None:
    mean, half = mean_ci([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]])
    np.testing.assert_allclose(mean, [3.0, 2.0])
    # sd = 2, k = 3: t(0.975, 2) = 4.303 -> 4.303 * 2 / sqrt(3)
    np.testing.assert_allclose(half, [4.303 * 2 / math.sqrt(3), 0.0])
    m1, h1 = mean_ci([[1.0, 2.0]])
    assert h1.tolist() == [0.0, 0.0]


# ------------------------------------------------------------------------------------------
# Per rollout spent, and Trinity-RFT's strict ratios
# ------------------------------------------------------------------------------------------


def test_rollout_axis_is_rollouts_spent_before_each_evaluation() -> None:
    assert rollout_axis([64, 192, 64]).tolist() == [0.0, 64.0, 256.0, 320.0]
    assert rollout_axis([10], start=5).tolist() == [5.0, 15.0]
    for bad in ([64, -1], [0, 0], [np.nan], [np.inf], [[1, 2]]):
        with pytest.raises(InvalidArgumentError, match="rollouts_per_step"):
            rollout_axis(bad)


def test_a_step_that_spends_nothing_leaves_the_rollout_axis_flat() -> None:
    """SPEED-RL trains on a queue generated earlier at no cost: the axis stays put for that step,
    and TTB/BSF still read the curve on it (reaching a target on a flat stretch costs nothing)."""
    axis = rollout_axis([64, 0, 64])
    assert axis.tolist() == [0.0, 64.0, 64.0, 128.0]
    base = np.arange(4, dtype=np.float64) * 64.0
    # Same scores per step as the baseline, one step free: every target is reached for less.
    ttb = time_to_baseline(axis, [0.1, 0.2, 0.3, 0.4], base, [0.1, 0.2, 0.3, 0.4], (0.5, 1.0))
    assert ttb[0] == pytest.approx(64.0 / 96.0) and ttb[1] == pytest.approx(128.0 / 192.0)
    with pytest.raises(InvalidArgumentError, match="non-decreasing"):
        time_to_baseline([0.0, 2.0, 1.0], [0.1, 0.2, 0.3], base[:3], [0.1, 0.2, 0.3])


_curve_values = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=2, max_size=12)


@given(base=_curve_values, mine=_curve_values, per_step=st.integers(1, 512), factor=st.integers(2, 4))
def test_spending_k_times_the_rollouts_makes_ttb_per_rollout_k_times_worse(
    base: list[float], mine: list[float], per_step: int, factor: int
) -> None:
    """Same per-step curve, ``factor`` times the rollouts a step: TTB per rollout is ``factor``
    times TTB per step (the x-axis is stretched by the same constant), and the baseline against
    itself stays 1."""
    size = min(len(base), len(mine))
    base, mine = base[:size], mine[:size]
    steps = np.arange(size, dtype=np.float64)
    base_spent = rollout_axis(np.full(size - 1, per_step))
    mine_spent = rollout_axis(np.full(size - 1, factor * per_step))
    per_step_ttb = time_to_baseline(steps, mine, steps, base)
    per_rollout_ttb = time_to_baseline(mine_spent, mine, base_spent, base)
    for by_step, by_rollout in zip(per_step_ttb, per_rollout_ttb):
        if by_step is None or by_rollout is None:
            assert by_step is by_rollout
        elif math.isnan(by_step):
            assert math.isnan(by_rollout)
        else:
            assert by_rollout == pytest.approx(factor * by_step, rel=1e-9)
    assert all(
        v is None or math.isnan(v) or v == pytest.approx(1.0)
        for v in time_to_baseline(base_spent, base, base_spent, base)
    )


def test_bsf_per_rollout_gives_the_baselines_budget_in_rollouts() -> None:
    """Dynamic sampling at 3x the rollouts: within Random's first half of rollouts it has made a
    sixth of the steps."""
    base = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]  # 6 steps of 100 rollouts
    dyn = [0.0, 0.3, 0.6, 0.6, 0.6, 0.6, 0.6]  # learns twice as fast per step, 300 rollouts a step
    steps = np.arange(7.0)
    assert best_so_far(steps, dyn, steps, base, [0.5]) == [pytest.approx(2.0)]  # 0.6 vs 0.3
    per_rollout = best_so_far(rollout_axis([300] * 6), dyn, rollout_axis([100] * 6), base, [0.5])
    assert per_rollout == [pytest.approx(1.0)]  # 300 rollouts: one step (0.3) vs three (0.3)
    assert time_to_baseline(rollout_axis([300] * 6), dyn, rollout_axis([100] * 6), base)[2] == pytest.approx(1.0)


def test_strict_ratios_use_trinitys_bounds() -> None:
    """With 16 rollouts, strict valid is 2..14 successes; the bounds are fractions of 16 whatever
    the number of rollouts, as Trinity-RFT draws them."""
    r = effective_ratios([0, 1, 2, 8, 14, 15, 16, 16], 16)
    assert r.etr == 5 / 8 and r.strict_valid == 3 / 8
    assert r.below_15_16 == 5 / 8 and r.above_1_16 == 6 / 8
    eight = effective_ratios([0, 1, 7, 8], 8)  # 1/8 and 7/8 lie inside (1/16, 15/16)
    assert eight.etr == eight.strict_valid == 0.5


def test_strict_ratios_equal_trinitys_pass_rate_calculator() -> None:
    pytest.importorskip("trinity")
    torch = pytest.importorskip("torch")
    from trinity.buffer.operators.mappers.pass_rate_calculator import PassRateCalculator
    from trinity.common.experience import Experience

    rng = np.random.default_rng(3)
    counts = rng.integers(0, 17, size=40)
    counts[:4] = [0, 1, 15, 16]
    exps = [
        Experience(
            tokens=torch.tensor([1, 2]),
            prompt_length=1,
            reward=float(j < c),
            info={"task_index": {"taskset_id": i % 2, "index": i}},
        )
        for i, c in enumerate(counts)
        for j in range(16)
    ]
    _, theirs = PassRateCalculator().process(exps)
    ours = effective_ratios(counts, 16)
    assert theirs["selection/valid_ratio"] == pytest.approx(ours.etr)
    assert theirs["selection/strict_valid_ratio"] == pytest.approx(ours.strict_valid)
    assert theirs["selection/<1_ratio"] == pytest.approx(ours.below_one)
    assert theirs["selection/>0_ratio"] == pytest.approx(ours.above_zero)
    assert theirs["selection/<15_16_ratio"] == pytest.approx(ours.below_15_16)
    assert theirs["selection/>1_16_ratio"] == pytest.approx(ours.above_1_16)


def test_integrations_log_the_strict_ratios_beside_etr() -> None:
    """``bots/*`` outcome metrics: the tasks' rollouts are summed first (one arrives in two
    parts), then Trinity-RFT's strict ratios sit beside ETR."""
    from bots_rft.metrics.step import outcome_metrics

    m = outcome_metrics([0, 1, 2, 3, 3], [1, 8, 16, 1, 1], [16, 16, 16, 8, 8])
    assert m["bots/etr"] == 0.75 and m["bots/groups"] == 4 and m["bots/rollouts"] == 64
    assert m["bots/strict_valid"] == 0.5  # 8/16 and 2/16; not 1/16, not 16/16
    assert m["bots/below_15_16"] == 0.75 and m["bots/above_1_16"] == 0.75
