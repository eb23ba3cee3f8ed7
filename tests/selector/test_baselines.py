"""Behaviour of the static selectors (Random, Offline), DAPO's epoch order and dynamic sampling, and
the shared Selector protocol."""

from __future__ import annotations

import numpy as np
import pytest

from bots_rft.errors import BotsError, CheckpointError, InvalidArgumentError, InvalidTypeError
from bots_rft.selector.peers.dapo import DynamicSampling, EpochOrder
from bots_rft.selector.protocol import Selector
from bots_rft.selector.static import OfflineSelector, RandomSelector

# ------------------------------------------------------------------------------------------
# Protocol
# ------------------------------------------------------------------------------------------


def test_every_selector_satisfies_the_protocol() -> None:
    from bots_rft import BOTS

    w = np.linspace(0, 1, 20)
    selectors = [
        RandomSelector(20),
        OfflineSelector(w, w),
        DynamicSampling(20, lambda ids: np.full(ids.size, 8), n_rollouts=16),
        EpochOrder(20),
        BOTS(20),
    ]
    for sel in selectors:
        assert isinstance(sel, Selector), type(sel).__name__


# ------------------------------------------------------------------------------------------
# Random
# ------------------------------------------------------------------------------------------


def test_random_distinct_in_range_and_uniform() -> None:
    sel = RandomSelector(50, seed=3)
    counts = np.zeros(50, dtype=int)
    for _ in range(2000):
        ids = sel.select(10)
        assert ids.dtype == np.int64 and ids.size == 10
        assert np.unique(ids).size == 10
        assert ids.min() >= 0 and ids.max() < 50
        counts[ids] += 1
    # Each task is expected 400 times (sd ~ 19); 6 sd either way is a generous "uniform-ish".
    assert counts.min() > 400 - 120 and counts.max() < 400 + 120


def test_random_seeded_and_exclude() -> None:
    a, b = RandomSelector(100, seed=1), RandomSelector(100, seed=1)
    assert np.array_equal(a.select(7), b.select(7))
    assert not np.array_equal(RandomSelector(100, seed=2).select(7), RandomSelector(100, seed=1).select(7))
    ids = a.select(90, exclude=np.arange(10))
    assert ids.min() >= 10 and np.unique(ids).size == 90
    mask = np.zeros(100, dtype=bool)
    mask[50:] = True
    assert a.select(50, exclude=mask).max() < 50


def test_random_state_round_trip() -> None:
    a = RandomSelector(100, seed=5)
    a.select(10)
    state = a.state_dict()
    expected = a.select(10)
    b = RandomSelector(100, seed=0)
    b.load_state_dict(state)
    assert np.array_equal(b.select(10), expected)


def test_random_bad_input_raises_and_keeps_state() -> None:
    a, b = RandomSelector(10, seed=9), RandomSelector(10, seed=9)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        a.select(11)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        a.select(0)
    with pytest.raises(InvalidTypeError, match="batch_size"):
        a.select(2.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="exclude"):
        a.select(2, exclude=[10])
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        a.select(5, exclude=np.arange(6))
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        a.update([10], [1], 4)
    with pytest.raises(InvalidArgumentError, match="successes"):
        a.update([1], [5], 4)
    with pytest.raises(BotsError):
        a.load_state_dict({"kind": "offline", "num_tasks": 10})
    assert np.array_equal(a.select(4), b.select(4))
    with pytest.raises(InvalidArgumentError):
        RandomSelector(0)


# ------------------------------------------------------------------------------------------
# Offline
# ------------------------------------------------------------------------------------------


def test_offline_orders_easy_to_hard_by_strong_then_weak() -> None:
    strong = np.array([0.5, 1.0, 0.5, 0.0, 1.0, np.nan, 0.5])
    weak = np.array([0.1, 0.2, 0.3, 0.9, 0.2, 1.0, np.nan])
    sel = OfflineSelector(weak, strong)
    # strong 1.0: tasks 1, 4 (tie on weak too: lower index first); strong 0.5: weak 0.3 (2),
    # 0.1 (0), NaN weak (6) last among them; then strong 0.0 (3); NaN strong (5) last.
    assert sel.order.tolist() == [1, 4, 2, 0, 6, 3, 5]
    assert sel.select(3).tolist() == [1, 4, 2]
    assert sel.select(3).tolist() == [0, 6, 3]
    # Served in order, wrapping into a new pass over the curriculum.
    assert sel.select(3).tolist() == [5, 1, 4]


def test_offline_exclude_and_state() -> None:
    strong = np.linspace(1.0, 0.0, 10)  # task 0 easiest
    sel = OfflineSelector(np.zeros(10), strong)
    assert sel.select(3, exclude=[1]).tolist() == [0, 2, 3]
    state = sel.state_dict()
    expected = sel.select(4)
    other = OfflineSelector(np.zeros(10), strong)
    other.load_state_dict(state)
    assert other.select(4).tolist() == expected.tolist() == [4, 5, 6, 7]
    with pytest.raises(CheckpointError, match="cursor 99"):
        other.load_state_dict({"kind": "offline", "num_tasks": 10, "cursor": 99})
    with pytest.raises(InvalidTypeError, match="strong: has length 4, expected 3"):
        OfflineSelector(np.zeros(3), np.zeros(4))
    with pytest.raises(InvalidArgumentError, match="weak: must be in"):
        OfflineSelector(np.full(3, 1.5), np.zeros(3))


# ------------------------------------------------------------------------------------------
# DAPO dynamic sampling
# ------------------------------------------------------------------------------------------


class TableRollout:
    """Deterministic rollouts: task k always gets ``table[k]`` successes; records every call."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self.calls: list[np.ndarray] = []

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        self.calls.append(ids.copy())
        return self.table[ids]


def test_dapo_keeps_only_effective_tasks_and_counts_extra_rollouts() -> None:
    n, N, B = 4, 400, 10
    table = np.where(np.arange(N) % 4 == 0, 2, 0)  # every 4th task effective (2 of 4)
    roll = TableRollout(table)
    sel = DynamicSampling(N, roll, n_rollouts=n, oversample=2.0, seed=0)
    ids = sel.select(B)
    succ = sel.take_rollouts()
    assert succ is not None and sel.take_rollouts() is None  # handed over once
    assert ids.size == B and np.unique(ids).size == B
    assert np.all(ids % 4 == 0) and np.array_equal(succ, table[ids])
    rolled = sum(c.size for c in roll.calls)
    assert rolled == 20 * len(roll.calls)  # generation batches of 2 * B
    assert sel.total_rollouts == rolled * n
    assert sel.extra_rollouts == (rolled - B) * n
    assert sel.last_rounds == len(roll.calls)
    # The kept tasks' rollouts are reused: the trainer does not roll them out again.
    assert ids.size * n + sel.extra_rollouts == sel.total_rollouts


def test_dapo_no_task_twice_within_an_epoch_and_tops_up() -> None:
    n, N = 4, 60
    roll = TableRollout(np.zeros(N, dtype=int))  # nothing is ever effective
    sel = DynamicSampling(N, roll, n_rollouts=n, oversample=1.0, max_rounds=3, seed=1)
    ids = sel.select(10)
    assert ids.size == 10  # topped up with ineffective tasks after max_rounds
    assert sel.last_rounds == 3
    drawn = np.concatenate(roll.calls)
    assert drawn.size == 30 and np.unique(drawn).size == 30
    sel.select(10)
    drawn = np.concatenate(roll.calls)
    assert drawn.size == 60 and np.unique(drawn).size == 60  # one full epoch, no repeats
    assert sel.extra_rollouts == (60 - 20) * n


def test_dapo_exclude_state_and_validation() -> None:
    N = 50
    table = np.full(N, 1)
    sel = DynamicSampling(N, TableRollout(table), n_rollouts=2, seed=4)
    ids = sel.select(5, exclude=np.arange(25))
    assert ids.min() >= 25
    state = sel.state_dict()
    a = sel.select(5)
    other = DynamicSampling(N, TableRollout(table), n_rollouts=2, seed=0)
    other.load_state_dict(state)
    assert np.array_equal(other.select(5), a)
    assert other.extra_rollouts == sel.extra_rollouts
    with pytest.raises(InvalidArgumentError, match="oversample"):
        DynamicSampling(N, TableRollout(table), oversample=0.5)
    with pytest.raises(InvalidTypeError, match="rollout"):
        DynamicSampling(N, None)  # type: ignore[arg-type]
    bad = DynamicSampling(N, lambda ids: np.zeros(ids.size + 1), n_rollouts=2)
    before = bad.state_dict()
    with pytest.raises(InvalidArgumentError, match="rollout"):
        bad.select(3)
    after = bad.state_dict()
    assert after["cursor"] == before["cursor"] and np.array_equal(after["perm"], before["perm"])
    assert after["rng"] == before["rng"] and after["total_rollouts"] == 0


# ------------------------------------------------------------------------------------------
# DAPO's epoch order: the walk DynamicSampling and the trainer's method=dynamic share
# ------------------------------------------------------------------------------------------


def test_epoch_order_is_the_walk_dynamic_sampling_rolls_out() -> None:
    """Dynamic sampling without a proposer rolls out exactly the batches an EpochOrder of the
    same seed hands out, each excluding what the step already rolled out."""
    N = 30
    roll = TableRollout(np.zeros(N, dtype=int))  # nothing effective: every round is drawn
    sel = DynamicSampling(N, roll, n_rollouts=4, oversample=1.0, max_rounds=3, seed=7)
    order = EpochOrder(N, seed=7)
    for _ in range(4):
        sel.select(4)
        rolled = np.zeros(N, dtype=bool)
        for call in roll.calls:
            expected = order.select(4, exclude=rolled)
            np.testing.assert_array_equal(call, expected)
            rolled[expected] = True
        roll.calls.clear()
    np.testing.assert_array_equal(sel.state_dict()["perm"], order.state_dict()["perm"])


def test_epoch_order_walks_epochs_and_hands_out_what_is_left() -> None:
    order = EpochOrder(10, seed=3)
    first = np.concatenate([order.select(4), order.select(4)])
    tail = order.select(4)  # crosses into the next epoch: 2 old tasks, then 2 of a new permutation
    assert np.unique(np.concatenate([first, tail[:2]])).size == 10
    assert np.unique(tail).size == 4
    left = np.zeros(10, dtype=bool)
    left[[1, 5]] = True
    assert sorted(order.select(4, exclude=~left).tolist()) == [1, 5]  # fewer when fewer are left
    assert order.select(3, exclude=np.arange(10)).size == 0


def test_epoch_order_refuses_bad_input_naming_the_argument() -> None:
    with pytest.raises(InvalidTypeError, match=r"^num_tasks: must be an integer, got 3\.0"):
        EpochOrder(3.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"^num_tasks: must be >= 1, got 0"):
        EpochOrder(0)
    with pytest.raises(InvalidArgumentError, match=r"^seed: must be an integer >= 0, got -1"):
        EpochOrder(5, seed=-1)
    order = EpochOrder(5)
    with pytest.raises(InvalidArgumentError, match=r"^batch_size: must be >= 1, got 0"):
        order.select(0)
    with pytest.raises(InvalidTypeError, match=r"^exclude: a mask must have shape \(5,\)"):
        order.select(2, exclude=np.zeros(4, dtype=bool))
    with pytest.raises(InvalidArgumentError, match=r"^task_ids: 5 at position 0 is out of range"):
        order.update([5], [1], 4)
    with pytest.raises(CheckpointError, match=r"^state: is for a 'random' selector, not 'epoch_order'"):
        order.load_state_dict(RandomSelector(5).state_dict())
    with pytest.raises(CheckpointError, match=r"^state: has a malformed epoch walk"):
        order.load_state_dict({**order.state_dict(), "rng": "garbage"})


def test_epoch_order_resumes_from_its_own_state_and_from_dynamic_sampling() -> None:
    order = EpochOrder(20, seed=2)
    order.select(7)
    again = EpochOrder(20)
    again.load_state_dict(order.state_dict())
    np.testing.assert_array_equal(again.select(15), order.select(15))
    # A DynamicSampling without a proposer checkpoints the same walk under its own kind.
    sel = DynamicSampling(20, TableRollout(np.full(20, 1)), n_rollouts=2, seed=2)
    sel.select(5)
    from_ds = EpochOrder(20)
    from_ds.load_state_dict(sel.state_dict())
    order = EpochOrder(20, seed=2)
    order.select(max(5, int(np.ceil(3.0 * 5))))  # the one generation batch sel drew
    np.testing.assert_array_equal(from_ds.select(9), order.select(9))
    from bots_rft import BOTS

    proposed = DynamicSampling(20, TableRollout(np.full(20, 1)), n_rollouts=2, proposer=BOTS(20, n_rollouts=2))
    with pytest.raises(CheckpointError, match="proposer"):
        EpochOrder(20).load_state_dict(proposed.state_dict())


# ------------------------------------------------------------------------------------------
# Dynamic sampling with BOTS proposing the generation batches
# ------------------------------------------------------------------------------------------


def _run_filtered_bots(steps: int, n: int = 8, num_tasks: int = 60, batch: int = 6, seed: int = 0):
    """BOTS proposes, DAPO's filter keeps the effective groups, the trainer reports the kept batch.

    Tasks 0-19 always pass, 20-39 always fail, 40-59 pass half their rollouts."""
    from bots_rft import BOTS

    table = np.where(np.arange(num_tasks) < 20, n, np.where(np.arange(num_tasks) < 40, 0, n // 2))
    roll = TableRollout(table)
    sel = DynamicSampling(
        num_tasks,
        roll,
        n_rollouts=n,
        oversample=2.0,
        max_rounds=4,
        seed=seed,
        proposer=BOTS(num_tasks, n_rollouts=n, seed=seed),
    )
    picks = []
    for _ in range(steps):
        ids = sel.select(batch)
        succ = sel.take_rollouts()
        assert succ is not None
        sel.update(ids, succ, float(n))  # what a trainer reports: only the batch it trains on
        picks.append(ids)
    return sel, roll, picks, table


def test_filtered_groups_still_reach_the_proposer() -> None:
    """Regression: the all-pass / all-fail groups DAPO's filter drops are the evidence that tells
    BOTS a task is solved or hopeless; without it their posterior stays at the prior mean 0.5 (the
    target) and BOTS keeps proposing them."""
    sel, roll, picks, table = _run_filtered_bots(steps=20)
    bots = sel.proposer
    assert bots is not None
    rolled = np.unique(np.concatenate(roll.calls))
    mean = bots.mean()
    always = rolled[rolled < 20]
    never = rolled[(rolled >= 20) & (rolled < 40)]
    assert always.size and never.size  # some of each were rolled out, and filtered
    # Not exactly 1 and 0: lam=0.1 discounts every posterior toward the prior each step, so a
    # task seen once sits at 0.9 and drifts back (0.68 after 19 steps); the prior mean 0.5 is
    # what a selector that never saw these groups is left with.
    assert np.all(mean[always] > 0.6) and mean[always].mean() > 0.8, mean[always]
    assert np.all(mean[never] < 0.4) and mean[never].mean() < 0.2, mean[never]
    # Once known, they are rarely proposed again: in the last ten generation batches, tasks
    # already seen to always pass or always fail make up far less than their 2/3 of the pool
    # (about 0.15 over seeds 0-4; the discount brings them back toward the target slowly).
    seen: set[int] = set()
    known_share = []
    for call in roll.calls:
        known_share.append(np.mean([i < 40 and i in seen for i in call.tolist()]))
        seen.update(call.tolist())
    assert np.mean(known_share[-10:]) < 0.3, known_share
    # The batch the trainer sees is all effective.
    assert all(np.all(table[p] == 4) for p in picks)
    # The defect this guards against: a selector fed only the kept batch never learns them.
    from bots_rft import BOTS

    blind = BOTS(60, n_rollouts=8, seed=0)
    for p in picks:
        blind.update(p, table[p], 8.0)
    assert np.all(blind.mean()[:40] == 0.5)


def test_proposer_update_is_one_step_per_selection() -> None:
    sel, roll, _, _ = _run_filtered_bots(steps=3)
    assert sel.proposer is not None and sel.proposer.num_updates == 3  # not one per round
    assert sel.proposer.num_selections == len(roll.calls)  # one proposal per generation batch


def test_proposer_state_round_trip_and_validation() -> None:
    from bots_rft import BOTS

    sel, _, _, table = _run_filtered_bots(steps=4)
    state = sel.state_dict()
    other = DynamicSampling(
        60, TableRollout(table), n_rollouts=8, oversample=2.0, max_rounds=4, proposer=BOTS(60, n_rollouts=8, seed=0)
    )
    other.load_state_dict(state)
    assert np.array_equal(other.select(6), sel.select(6))
    plain = DynamicSampling(60, TableRollout(table), n_rollouts=8)
    with pytest.raises(CheckpointError, match="proposer"):
        plain.load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="proposer"):
        DynamicSampling(60, TableRollout(table), proposer=BOTS(59))
    with pytest.raises(InvalidTypeError, match="proposer"):
        DynamicSampling(60, TableRollout(table), proposer=object())  # type: ignore[arg-type]
    # Feedback for a task that was not rolled out is refused, and changes nothing.
    fresh_roll = TableRollout(table)
    fresh = DynamicSampling(60, fresh_roll, n_rollouts=8, proposer=BOTS(60, n_rollouts=8))
    fresh.select(3)
    assert fresh.proposer is not None
    before = fresh.proposer.state_dict()
    outsider = int(np.setdiff1d(np.arange(60), np.concatenate(fresh_roll.calls))[0])
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        fresh.update(np.array([outsider]), np.array([1.0]), 8.0)
    after = fresh.proposer.state_dict()
    assert np.array_equal(after["alpha"], before["alpha"]) and after["num_updates"] == before["num_updates"]


def test_failing_rollout_leaves_the_proposer_untouched() -> None:
    from bots_rft import BOTS

    calls = {"n": 0}

    def flaky(ids: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("rollout worker died")
        return np.zeros(ids.size)  # nothing effective: forces a second round

    sel = DynamicSampling(40, flaky, n_rollouts=4, oversample=1.0, proposer=BOTS(40, n_rollouts=4))
    assert sel.proposer is not None
    before = sel.proposer.state_dict()
    with pytest.raises(RuntimeError):
        sel.select(5)
    after = sel.proposer.state_dict()
    assert after["num_selections"] == before["num_selections"]
