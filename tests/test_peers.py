"""The peers from the literature (bots_rft.peers) and the simulator's per-task rollout counts."""

from __future__ import annotations

import numpy as np
import pytest

from bots_rft.baselines import RolledBatch
from bots_rft.errors import InvalidArgumentError, InvalidTypeError
from bots_rft.simulate import LearnerConfig, SimulatedLearner, make_world

TINY = LearnerConfig(num_tasks=600, num_groups=3, eval_tasks=200)


# ---------------------------------------------------------------------------------------------
# Per-task rollout counts in the simulated learner
# ---------------------------------------------------------------------------------------------


def test_rollout_without_counts_is_the_draw_it_always_was() -> None:
    world = make_world(TINY, 0)
    ids = np.arange(0, 600, 11)
    plain, counted = SimulatedLearner(world, 0, stream=3), SimulatedLearner(world, 0, stream=3)
    assert np.array_equal(plain.rollout(ids), counted.rollout(ids, np.full(ids.size, TINY.n_rollouts)))


def test_rollout_counts_bound_each_tasks_successes() -> None:
    learner = SimulatedLearner(make_world(TINY, 0), 0)
    ids = np.arange(50)
    counts = np.arange(50) % 7
    succ = learner.rollout(ids, counts)
    assert succ.shape == (50,) and np.all(succ >= 0) and np.all(succ <= counts)
    assert np.all(succ[counts == 0] == 0)
    with pytest.raises(InvalidTypeError, match="counts"):
        learner.rollout(ids, np.full(50, 2.5))
    with pytest.raises(InvalidTypeError, match="counts"):
        learner.rollout(ids, np.ones(49, dtype=np.int64))
    with pytest.raises(InvalidArgumentError, match="counts"):
        learner.rollout(ids, -np.ones(50, dtype=np.int64))


def test_train_takes_each_tasks_signal_from_its_own_trials() -> None:
    world = make_world(TINY, 0)
    ids = np.arange(10)
    a, b = SimulatedLearner(world, 0), SimulatedLearner(world, 0)
    # 2 of 4 and 8 of 16 are the same rate: the same step.
    assert a.train(ids, np.full(10, 2), np.full(10, 4)) == pytest.approx(1.0)
    assert b.train(ids, np.full(10, 8)) == pytest.approx(1.0)
    assert np.array_equal(a.ability, b.ability) and np.array_equal(a.memory, b.memory)
    with pytest.raises(InvalidArgumentError, match="trials"):
        a.train(ids, np.zeros(10), np.zeros(10))


def test_rolled_batch_refuses_to_charge_less_than_it_trained_on() -> None:
    ids = np.arange(3, dtype=np.int64)
    RolledBatch(ids, np.ones(3), np.full(3, 4.0), rollouts=20)
    with pytest.raises(InvalidArgumentError, match="rollouts"):
        RolledBatch(ids, np.ones(3), np.full(3, 4.0), rollouts=11)
    with pytest.raises(InvalidArgumentError, match="shapes differ"):
        RolledBatch(ids, np.ones(2), np.full(3, 4.0), rollouts=12)
