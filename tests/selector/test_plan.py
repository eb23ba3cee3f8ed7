"""BOTS.plan: tasks and rollout counts chosen together under a budget (bots_rft.selector.plan)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, InvalidArgumentError, InvalidTypeError
from bots_rft.selector.plan import Plan, allocate_rollouts, informative_probability, rollout_gain


def _stepped(seed: int = 5, steps: int = 4, n: int = 400, **kwargs: object) -> BOTS:
    """A selector with some evidence behind it (varied posteriors, not just the prior)."""
    sel = BOTS(n, seed=seed, **kwargs)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        ids = sel.select(40)
        sel.update(ids, rng.binomial(16, rng.random(ids.size)), 16)
    return sel


def _brute_force(theta: np.ndarray, budget: int, lo: int, hi: int) -> float:
    """The best objective over every subset of the candidates and every count vector."""
    best = 0.0
    for m in range(theta.size + 1):
        for subset in itertools.combinations(range(theta.size), m):
            for counts in itertools.product(range(lo, hi + 1), repeat=m):
                if sum(counts) <= budget:
                    best = max(best, float(sum(informative_probability(theta[i], c) for i, c in zip(subset, counts))))
    return best


def test_objective_and_gain() -> None:
    theta = np.array([0.0, 0.5, 0.9, 1.0])
    np.testing.assert_allclose(informative_probability(theta, 4), [0.0, 1 - 2 / 16, 1 - 0.9**4 - 0.1**4, 0.0])
    assert np.all(informative_probability(theta, 1) == 0.0)
    for n in range(1, 8):
        np.testing.assert_allclose(
            rollout_gain(theta, n), informative_probability(theta, n + 1) - informative_probability(theta, n)
        )


@given(
    theta=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    budget=st.integers(0, 18),
    lo=st.integers(1, 4),
    spread=st.integers(0, 3),
)
def test_allocation_is_optimal_over_every_subset(theta: list[float], budget: int, lo: int, spread: int) -> None:
    # Candidates arrive in the rule's order; with target 1/2 that is nearest 1/2 first.
    t = np.array(sorted(theta, key=lambda x: abs(x - 0.5)))
    counts = allocate_rollouts(t, budget, lo, lo + spread)
    assert counts.sum() <= budget
    assert np.all((counts >= lo) & (counts <= lo + spread))
    value = float(sum(informative_probability(t[i], c) for i, c in enumerate(counts)))
    assert value == pytest.approx(_brute_force(t, budget, lo, lo + spread), abs=1e-9)


@given(
    seed=st.integers(0, 2**32),
    batch=st.integers(1, 60),
    n=st.integers(1, 32),
    target=st.sampled_from([0.5, 0.2, 0.9]),
    thompson=st.booleans(),
    tau=st.sampled_from([0.0, 0.05]),
)
def test_fixed_count_plan_is_select(seed: int, batch: int, n: int, target: float, thompson: bool, tau: float) -> None:
    a = _stepped(seed % 1000, target=target, thompson=thompson, tau=tau)
    b = _stepped(seed % 1000, target=target, thompson=thompson, tau=tau)
    expected = a.select(batch)
    plan = b.plan(batch * n, n, n)
    np.testing.assert_array_equal(plan.ids, expected)
    np.testing.assert_array_equal(plan.counts, np.full(batch, n))
    # One selection consumed: the streams stay in step.
    np.testing.assert_array_equal(a.select(batch), b.select(batch))


@given(seed=st.integers(0, 500), budget=st.integers(0, 700), lo=st.integers(1, 8), spread=st.integers(0, 40))
def test_plan_never_exceeds_the_budget(seed: int, budget: int, lo: int, spread: int) -> None:
    sel = _stepped(seed, steps=2)
    plan = sel.plan(budget, lo, lo + spread)
    assert isinstance(plan, Plan)
    assert plan.rollouts <= budget
    assert plan.ids.size == plan.counts.size == np.unique(plan.ids).size
    assert np.all((plan.counts >= lo) & (plan.counts <= lo + spread))


def test_plan_is_deterministic_per_seed_and_honours_exclusions() -> None:
    a, b = _stepped(), _stepped()
    excluded = np.arange(0, 400, 3)
    pa, pb = a.plan(600, 2, 24, exclude=excluded), b.plan(600, 2, 24, exclude=excluded)
    np.testing.assert_array_equal(pa.ids, pb.ids)
    np.testing.assert_array_equal(pa.counts, pb.counts)
    assert not np.isin(pa.ids, excluded).any()
    # explain() describes the plan's picks, as after a select.
    picks = a.explain(pa.ids)
    np.testing.assert_array_equal(picks.ids, pa.ids)


def test_plan_spends_more_on_tasks_far_from_one_half() -> None:
    # A task drawn near 0 or 1 needs more rollouts to show both outcomes than one near 1/2.
    counts = allocate_rollouts(np.array([0.5, 0.5, 0.05]), 40, 2, 32)
    assert counts[2] > counts[0]
    value = float(np.sum(informative_probability(np.array([0.5, 0.5, 0.05]), counts)))
    assert value > float(np.sum(informative_probability(np.array([0.5, 0.5, 0.05]), [13, 13, 13])))


def test_plan_resumes_exactly_from_a_checkpoint(tmp_path: Path) -> None:
    a = _stepped()
    a.plan(300, 2, 16)
    a.save(tmp_path / "sel.bots")
    b = BOTS.load(tmp_path / "sel.bots")
    pa, pb = a.plan(300, 2, 16), b.plan(300, 2, 16)
    np.testing.assert_array_equal(pa.ids, pb.ids)
    np.testing.assert_array_equal(pa.counts, pb.counts)


def test_plan_same_with_and_without_prefetch() -> None:
    a, b = _stepped(prefetch=True), _stepped(prefetch=False)
    for _ in range(3):
        pa, pb = a.plan(500, 3, 20), b.plan(500, 3, 20)
        np.testing.assert_array_equal(pa.ids, pb.ids)
        np.testing.assert_array_equal(pa.counts, pb.counts)
        a.update(pa.ids, pa.counts // 2, pa.counts)
        b.update(pb.ids, pb.counts // 2, pb.counts)


def test_empty_budget_and_small_pool() -> None:
    sel = BOTS(5)
    assert sel.plan(0, 1, 4).ids.size == 0
    assert sel.plan(3, 4, 8).ids.size == 0  # not even one task's minimum
    plan = sel.plan(1000, 2, 8)  # more budget than the pool can take
    assert plan.ids.size <= 5 and plan.rollouts <= 5 * 8


@pytest.mark.parametrize(
    ("args", "error", "argument"),
    [
        ((-1, 1, 4), InvalidArgumentError, "rollout_budget"),
        ((10.5, 1, 4), InvalidTypeError, "rollout_budget"),
        ((10, 0, 4), InvalidArgumentError, "n_min"),
        ((10, 4, 3), InvalidArgumentError, "n_max"),
        ((10, 2, True), InvalidTypeError, "n_max"),
    ],
)
def test_bad_arguments_are_typed_errors(args: tuple, error: type, argument: str) -> None:
    sel = BOTS(10)
    with pytest.raises(error) as info:
        sel.plan(*args)
    assert getattr(info.value, "argument", None) == argument
    assert sel.num_selections == 0  # refused before consuming a selection


def _small_sim(steps: int = 12) -> object:
    from bots_rft.simulate import LearnerConfig, SimConfig

    return SimConfig(
        learner=LearnerConfig(num_tasks=2000, eval_tasks=256),
        steps=steps,
        batch_size=32,
        seeds=(0,),
        methods=("bots",),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )


def test_bots_plan_in_the_simulator_stays_within_budget_and_finds_more_informative_groups() -> None:
    from bots_rft.simulate.experiment import MethodSpec, run_method
    from bots_rft.simulate.learner import make_world

    config = _small_sim()
    world = make_world(config.learner, 0)  # type: ignore[attr-defined]
    budget = config.batch_size * world.config.n_rollouts  # type: ignore[attr-defined]
    per_rollout = {}
    for kind in ("bots", "bots-plan"):
        rec = run_method(MethodSpec(kind), world, 0, config)  # type: ignore[arg-type]
        assert np.all(rec.rollouts <= budget)
        groups = rec.hist.sum(axis=1)
        per_rollout[kind] = float(np.sum(rec.etr * groups) / rec.rollouts.sum())
    assert per_rollout["bots-plan"] > per_rollout["bots"]


def test_bots_plan_builds_from_the_method_table() -> None:
    from bots_rft.selector.plan import PlannedBOTS
    from bots_rft.selector.registry import method

    def rollout(ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return counts // 2

    sel = method("bots-plan").build(100, rollout=rollout, n_rollouts=8, n_min=2, n_max=16, seed=3)
    assert isinstance(sel, PlannedBOTS)
    ids = sel.select(10)
    batch = sel.take_batch()
    assert batch is not None and batch.task_ids.tolist() == ids.tolist()
    assert batch.rollouts <= 80 and sel.take_batch() is None
    sel.update(batch.task_ids, batch.successes, batch.trials)
    with pytest.raises(InvalidArgumentError, match="n_max"):
        method("bots-plan").build(100, rollout=rollout, n_min=8, n_max=4)
    with pytest.raises(InvalidArgumentError, match="rollout"):
        method("bots-plan").build(100)


def test_bots_train_builds_bots_plan_as_the_bots_its_plans_draw_from() -> None:
    """bots train rolls out each planned task its own count (tests/train/test_train_plan.py), so the
    method's selector there is the BOTS posterior it plans from, with the method's parameters."""
    from bots_rft.train.config import TrainConfig
    from bots_rft.train.run_selector import make_selector

    sel = make_selector(TrainConfig(pool="p.parquet", method="bots-plan", lam=0.3, seed=4), 10, None, None)
    assert isinstance(sel, BOTS) and sel.lam == 0.3
    plan = sel.plan(32, 8, 32)
    assert plan.rollouts <= 32 and np.all((plan.counts >= 8) & (plan.counts <= 32))


def test_a_plan_of_no_task_draws_nothing_from_the_stream() -> None:
    """As select(0): a budget that buys no task leaves the random stream where it was."""
    a, b = BOTS(50, seed=3), BOTS(50, seed=3)
    assert a.plan(0, 1, 4).ids.size == 0 and a.plan(3, 4, 8).ids.size == 0
    np.testing.assert_array_equal(a.select(8), b.select(8))
