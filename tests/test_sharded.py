"""ShardedBOTS: a pool split over Ray actors selects exactly what one BOTS selects."""

from __future__ import annotations

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from bots_rft.errors import BotsError, InvalidArgumentError

ray = pytest.importorskip("ray")

from bots_rft.integrations.ray import ShardedBOTS, ShardLostError  # noqa: E402

N = 3000
B = 24


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def references(n: int = N) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    weak = rng.uniform(0, 0.6, n)
    strong = np.clip(weak + rng.uniform(0, 0.4, n), 0, 1)
    weak[::17] = np.nan  # tasks without a reference
    return weak, strong


def selectors(shards: int, **kwargs):
    weak, strong = references()
    plain = BOTS(N, evidence=Interpolation(weak, strong), prefetch=False, **kwargs)
    sharded = ShardedBOTS(
        N, shards=shards, evidence=Interpolation(weak, strong), actor_options={"num_cpus": 0}, **kwargs
    )
    return plain, sharded


def run_steps(plain, sharded, steps: int, seed: int = 0) -> None:
    """Select and update both the same way; the picks must agree at every step."""
    rng = np.random.default_rng(seed)
    truth = rng.uniform(0, 1, N)
    for step in range(steps):
        exclude = rng.choice(N, 40, replace=False) if step % 2 else (rng.uniform(size=N) < 0.1)
        picked = plain.select(B, exclude=exclude)
        np.testing.assert_array_equal(sharded.select(B, exclude=exclude), picked)
        successes = rng.binomial(8, truth[picked]).astype(float)
        plain.update(picked, successes, 8)
        sharded.update(picked, successes, 8)


@pytest.mark.parametrize(
    ("shards", "kwargs"),
    [
        (1, {"seed": 7, "lam": 0.1, "rho": 0.2}),
        (2, {"seed": 7, "lam": 0.1, "rho": 0.2}),
        (3, {"seed": 7, "lam": 0.1, "rho": 0.2}),
        (3, {"seed": 3, "thompson": False}),
        (2, {"seed": 5, "tau": 0.05}),
    ],
    ids=["thompson-1", "thompson-2", "thompson-3", "greedy-3", "softmax-2"],
)
def test_sharded_selections_equal_one_selector(shards: int, kwargs: dict) -> None:
    plain, sharded = selectors(shards, **kwargs)
    run_steps(plain, sharded, steps=6)
    assert sharded.capability == plain.capability
    state = sharded.state_dict()
    np.testing.assert_array_equal(state["alpha"], plain.alpha)
    np.testing.assert_array_equal(state["beta"], plain.beta)


def test_per_task_priors_route_to_their_shards() -> None:
    prior_alpha = np.linspace(0.5, 3, N)
    plain, sharded = selectors(3, seed=2, prior_alpha=prior_alpha, lam=0.3)
    run_steps(plain, sharded, steps=3, seed=1)


def test_checkpoint_loads_with_another_shard_count_and_into_bots(tmp_path) -> None:
    plain, sharded = selectors(2, seed=11)
    run_steps(plain, sharded, steps=3)
    path = tmp_path / "sharded.ckpt"
    sharded.save(str(path))
    resumed = ShardedBOTS.load(str(path), shards=3, actor_options={"num_cpus": 0})
    as_bots = BOTS.load(path, prefetch=False)
    assert resumed.bounds == [(0, 1000), (1000, 2000), (2000, N)]
    # Next selections: identical to the selector that never stopped.
    reference = plain
    for _ in range(3):
        want = reference.select(B)
        np.testing.assert_array_equal(resumed.select(B), want)
        np.testing.assert_array_equal(as_bots.select(B), want)
        ids = want[: B // 2]
        for selector in (reference, resumed, as_bots):
            selector.update(ids, np.full(ids.size, 3.0), 8)


def test_a_dead_actor_is_a_typed_error_and_the_checkpoint_rebuilds(tmp_path) -> None:
    plain, sharded = selectors(2, seed=13)
    run_steps(plain, sharded, steps=2)
    path = tmp_path / "last.ckpt"
    sharded.save(str(path))
    ray.kill(sharded._shards[1])
    with pytest.raises(ShardLostError, match=r"shard 1 \(tasks \[1500, 3000\)\)") as info:
        sharded.select(B)
    assert isinstance(info.value, BotsError) and info.value.shard == 1
    rebuilt = ShardedBOTS.load(str(path), shards=2, actor_options={"num_cpus": 0})
    np.testing.assert_array_equal(rebuilt.select(B), plain.select(B))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="shards"):
        ShardedBOTS(4, shards=5)
    with pytest.raises(InvalidArgumentError, match="evidence"):
        ShardedBOTS(4, shards=2, evidence=object())
    sharded = ShardedBOTS(10, shards=2, actor_options={"num_cpus": 0})
    with pytest.raises(InvalidArgumentError, match="batch_size: 9 exceeds the selectable pool of 8"):
        sharded.select(9, exclude=[0, 9])
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        sharded.update([10], [1.0], 2)
    np.testing.assert_array_equal(np.sort(sharded.select(8, exclude=[0, 9])), np.arange(1, 9))
