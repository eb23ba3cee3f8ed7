"""MultiPool: BOTS over several pools mixed by weights (quotas, id routing, exact resume)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_rft import BOTS, BotsError, CheckpointError, Interpolation, InvalidArgumentError, InvalidTypeError, MultiPool


def pools(sizes: list[int], seed: int = 0, **kw: object) -> list[BOTS]:
    return [BOTS(n, seed=seed + i, prefetch=False, **kw) for i, n in enumerate(sizes)]  # type: ignore[arg-type]


_weights = st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=6).filter(lambda w: sum(w) > 1e-6)


@settings(max_examples=60, deadline=None)
@given(weights=_weights, batches=st.lists(st.integers(0, 40), min_size=1, max_size=25))
def test_quotas_sum_to_b_stay_within_one_of_the_weight_and_ids_fall_in_their_pools(
    weights: list[float], batches: list[int]
) -> None:
    sizes = [50 + 7 * i for i in range(len(weights))]
    mix = MultiPool(pools(sizes), weights=weights)
    w = np.asarray(weights) / sum(weights)
    given_total, owed_total = np.zeros(len(sizes)), np.zeros(len(sizes))
    for b in batches:
        quotas = mix.quotas(b)
        ids = mix.select(b)
        assert quotas.sum() == b == ids.size == np.unique(ids).size
        assert np.all(np.abs(quotas - w * b) < 1)  # floor or ceil of its share
        assert np.all(quotas[w == 0] == 0)
        counts = np.bincount(mix.pool_of(ids), minlength=len(sizes))
        assert counts.tolist() == quotas.tolist()  # ids land in the pools the quotas name
        assert np.all((ids >= 0) & (ids < sum(sizes)))
        given_total += quotas
        owed_total += w * b
        np.testing.assert_allclose(owed_total - given_total, mix.credit, atol=1e-9)
        assert np.all(np.abs(mix.credit) < 2)  # the rounding is carried, never left to pile up


def test_a_small_share_is_given_over_steps_not_dropped() -> None:
    """0.4 tasks a step: floor rounding would never pick the pool; carried credit picks it 2
    steps in 5."""
    mix = MultiPool(pools([100, 100]), weights=[0.9, 0.1])
    small = [int(mix.pool_of(mix.select(4)).sum()) for _ in range(10)]
    assert sum(small) == 4 and set(small) <= {0, 1}


def test_default_weights_follow_pool_sizes_as_trinitys_scheduler() -> None:
    mix = MultiPool(pools([300, 100]))
    assert mix.weights.tolist() == [0.75, 0.25]
    assert mix.quotas(8).tolist() == [6, 2]
    assert mix.offsets.tolist() == [0, 300, 400] and len(mix) == 400


def test_each_pool_selects_with_its_own_selector_on_local_ids() -> None:
    """A pool's picks are its selector's own picks, shifted by its offset; quotas of 0 leave
    a selector's random stream alone."""
    mix = MultiPool(pools([20, 30, 10]), weights=[1, 1, 0])
    twins = pools([20, 30, 10])
    ids = mix.select(6)
    assert ids.tolist() == twins[0].select(3).tolist() + (twins[1].select(3) + 20).tolist()
    assert mix.selectors[2].num_selections == 0


def test_update_routes_evidence_by_global_id() -> None:
    mix = MultiPool(pools([5, 5]), weights=[1, 1])
    mix.update([1, 7, 7], [2, 3, 1], 4)
    a0, b0 = mix.selectors[0].posterior(np.arange(5))
    a1, b1 = mix.selectors[1].posterior(np.arange(5))
    assert a0[1] == 3 and b0[1] == 3 and a1[2] == 5 and b1[2] == 5  # task 7 is pool 1's task 2, twice
    assert a0.sum() + b0.sum() == 10 + 4 and mix.selectors[1].num_updates == 1
    mix.update_rewards([0, 9], np.array([[1.0, 0.0], [1.0, 1.0]]))
    assert mix.selectors[0].posterior([0])[0][0] == 2 and mix.selectors[1].posterior([4])[0][0] == 3
    mix.update_rewards([2, 8], [[1.0], [0.0, 0.0, 1.0]])  # ragged rows
    assert mix.selectors[0].posterior([2])[0][0] == 2 and mix.selectors[1].posterior([3])[1][0] == 3


def test_bad_updates_touch_no_pool() -> None:
    mix = MultiPool(pools([5, 5]), weights=[1, 1])
    for args, error, text in [
        (([1, 10], [1, 1], 2), InvalidArgumentError, "task_ids: 10 at position 1 is out of range [0, 10)"),
        (([1, 7], [1, 3], 2), InvalidArgumentError, "successes: 3 at position 1 exceeds its trials 2"),
        (([1, 7], [1], 2), InvalidTypeError, "successes: has length 1"),
    ]:
        with pytest.raises(error, match=text.replace("[", r"\[").replace(")", r"\)")):
            mix.update(*args)
    with pytest.raises(InvalidTypeError, match="rewards: must be 2-D with one row per task id"):
        mix.update_rewards([1, 7], np.ones((3, 2)))
    assert all(s.num_updates == 0 for s in mix.selectors)


def test_exclusions_are_split_and_a_short_pool_hands_its_quota_on() -> None:
    mix = MultiPool(pools([4, 10]), weights=[1, 1])
    ids = mix.select(6, exclude=[0, 1, 2, 5])  # pool 0 keeps task 3 only
    assert 3 in ids and not set(ids.tolist()) & {0, 1, 2, 5}
    assert np.bincount(mix.pool_of(ids), minlength=2).tolist() == [1, 5]
    mask = np.zeros(14, dtype=bool)
    mask[4:12] = True
    assert mix.quotas(4, exclude=mask).tolist() == [2, 2]  # 4 and 2 selectable: both have room
    assert mix.quotas(6, exclude=mask).tolist() == [4, 2]
    picked = mix.select(5, exclude=mask)
    assert not mask[picked].any() and picked.size == 5
    with pytest.raises(InvalidArgumentError, match="batch_size: exceeds the 6 selectable tasks of all pools, got 7"):
        mix.select(7, exclude=mask)


def test_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    weak, strong = rng.random(40), rng.random(40)

    def build() -> MultiPool:
        return MultiPool(
            [BOTS(40, seed=1, evidence=Interpolation(weak, strong)), BOTS(25, seed=2, lam=0.5)],
            weights=[2, 1],
            names=["math", "code"],
        )

    def step(mix: MultiPool) -> list[int]:
        ids = mix.select(7)
        mix.update(ids, rng_steps.integers(0, 5, size=ids.size), 4)
        return ids.tolist()

    rng_steps = np.random.default_rng(5)
    straight = build()
    for _ in range(3):
        step(straight)
    straight.save(tmp_path / "mix.ckpt")
    tail = [step(straight) for _ in range(4)]
    rng_steps = np.random.default_rng(5)
    for _ in range(3):
        rng_steps.integers(0, 5, size=7)
    resumed = MultiPool.load(tmp_path / "mix.ckpt")
    assert resumed.names == ("math", "code") and resumed.selectors[1].lam == 0.5
    assert [step(resumed) for _ in range(4)] == tail
    in_place = build()
    in_place.load_state_dict(MultiPool.load(tmp_path / "mix.ckpt").state_dict())
    np.testing.assert_array_equal(in_place.credit, MultiPool.load(tmp_path / "mix.ckpt").credit)


def test_load_state_dict_refuses_other_layouts_and_changes_nothing() -> None:
    mix = MultiPool(pools([5, 5]), weights=[1, 1])
    other = MultiPool(pools([5, 6])).state_dict()
    with pytest.raises(CheckpointError, match=r"state: its pools have \[5, 6\] tasks"):
        mix.load_state_dict(other)
    changed = MultiPool([BOTS(5, prefetch=False), BOTS(5, lam=0.9, prefetch=False)], weights=[3, 1])
    changed.select(2)
    before = [s.state_dict()["alpha"].copy() for s in mix.selectors]
    with pytest.raises(CheckpointError, match="parameters differ"):
        mix.load_state_dict(changed.state_dict())  # pool 1's λ differs: pool 0 is put back
    assert mix.weights.tolist() == [0.5, 0.5] and mix.num_selections == 0
    assert all(np.array_equal(s.state_dict()["alpha"], a) for s, a in zip(mix.selectors, before))
    with pytest.raises(CheckpointError, match="not a bots-rft MultiPool state"):
        mix.load_state_dict(mix.selectors[0].state_dict())


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(selectors=[]), InvalidTypeError, "selectors: must be a non-empty sequence of BOTS"),
        (dict(selectors=[1]), InvalidTypeError, "selectors: entry 0 must be a BOTS, got int"),
        (dict(weights=[1.0]), InvalidArgumentError, "weights: must hold one number per pool (2), got [1.0]"),
        (dict(weights=[1.0, -1.0]), InvalidArgumentError, "weights: must be finite and >= 0, got -1.0 for pool 1"),
        (dict(weights=[0, 0]), InvalidArgumentError, "weights: at least one must be > 0, got [0.0, 0.0]"),
        (dict(weights=["a", 1]), InvalidTypeError, "weights: must be numbers"),
        (dict(names=["a", "a"]), InvalidArgumentError, "names: must be distinct"),
        (dict(names=["a"]), InvalidArgumentError, "names: must be 2 strings"),
    ],
)
def test_bad_arguments_raise_typed_errors(kwargs: dict[str, object], error: type[BotsError], text: str) -> None:
    args: dict[str, object] = dict(selectors=pools([3, 3]))
    args.update(kwargs)
    with pytest.raises(error, match=text.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        MultiPool(**args)  # type: ignore[arg-type]


def test_same_selector_twice_is_refused_and_ids_are_checked() -> None:
    sel = BOTS(3)
    with pytest.raises(InvalidArgumentError, match="selectors: each pool needs its own selector"):
        MultiPool([sel, sel])
    mix = MultiPool(pools([3, 4]))
    assert mix.global_ids(1, [0, 3]).tolist() == [3, 6]
    with pytest.raises(InvalidArgumentError, match="local_ids: must lie in \\[0, 4\\) for pool 'pool1', got 4"):
        mix.global_ids(1, [4])
    with pytest.raises(InvalidArgumentError, match="pool"):
        mix.global_ids(2, [0])
    with pytest.raises(InvalidArgumentError, match="task_ids: must lie in \\[0, 7\\), got 7 at position 0"):
        mix.pool_of([7])
