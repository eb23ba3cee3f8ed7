"""ShardedBOTS: a pool split over Ray actors selects exactly what one BOTS selects."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from bots_rft.errors import BotsError, InvalidArgumentError

ray = pytest.importorskip("ray")

from bots_rft.integrations.ray import ShardedBOTS, ShardLostError  # noqa: E402

pytestmark = pytest.mark.slow

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


def wait_until_dead(actor, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=10)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the actor was still alive {timeout:.0f} s after ray.kill")


def test_a_dead_actor_is_a_typed_error_and_the_checkpoint_rebuilds(tmp_path) -> None:
    plain, sharded = selectors(2, seed=13)
    run_steps(plain, sharded, steps=2)
    path = tmp_path / "last.ckpt"
    sharded.save(str(path))
    ray.kill(sharded._shards[1])
    # ray.kill only sends the kill: a call made at once may still reach the live actor and succeed
    # (seen under load). The test is about a dead actor, so it waits until Ray reports it dead.
    wait_until_dead(sharded._shards[1])
    with pytest.raises(ShardLostError, match=r"shard 1 \(tasks \[1500, 3000\)\)") as info:
        sharded.select(B)
    assert isinstance(info.value, BotsError) and info.value.shard == 1
    rebuilt = ShardedBOTS.load(str(path), shards=2, actor_options={"num_cpus": 0})
    np.testing.assert_array_equal(rebuilt.select(B), plain.select(B))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="shards"):
        ShardedBOTS(4, shards=5)
    with pytest.raises(InvalidArgumentError, match="evidence"):
        ShardedBOTS(4, shards=2, evidence=object())  # type: ignore[arg-type]
    sharded = ShardedBOTS(10, shards=2, actor_options={"num_cpus": 0})
    with pytest.raises(InvalidArgumentError, match="batch_size: 9 exceeds the selectable pool of 8"):
        sharded.select(9, exclude=[0, 9])
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        sharded.update([10], [1.0], 2)
    np.testing.assert_array_equal(np.sort(sharded.select(8, exclude=[0, 9])), np.arange(1, 9))


# ------------------------------------------------------------------------------- parity with BOTS


def assert_same_posterior(plain, sharded) -> None:
    state = sharded.state_dict()
    np.testing.assert_array_equal(state["alpha"], plain.alpha)
    np.testing.assert_array_equal(state["beta"], plain.beta)


def test_update_rewards_maps_rewards_as_bots_does() -> None:
    plain, sharded = selectors(2, seed=17)
    rng = np.random.default_rng(5)
    for step in range(4):
        picked = plain.select(B)
        np.testing.assert_array_equal(sharded.select(B), picked)
        if step == 0:  # graded rewards in [0, 1]
            kwargs: dict = {}
            rewards: object = rng.uniform(0, 1, (B, 4))
        elif step == 1:  # rewards in [-1, 1], rescaled
            kwargs = {"reward_range": (-1.0, 1.0)}
            rewards = rng.uniform(-1, 1, (B, 4))
        elif step == 2:  # thresholded
            kwargs = {"success_threshold": 0.3}
            rewards = rng.normal(0, 1, (B, 3))
        else:  # rows of different lengths
            kwargs = {}
            rewards = [rng.integers(0, 2, 1 + i % 5).astype(float) for i in range(B)]
        plain.update_rewards(picked, rewards, **kwargs)
        sharded.update_rewards(picked, rewards, **kwargs)
    assert sharded.capability == plain.capability
    assert_same_posterior(plain, sharded)
    with pytest.raises(InvalidArgumentError, match=r"rewards: must be in \[0, 1\]"):
        sharded.update_rewards(picked[:2], [[0.5, 2.0], [1.0, 0.0]])
    assert sharded.num_updates == plain.num_updates  # the refused update changed nothing


def test_update_with_a_prediction_equals_bots() -> None:
    plain, sharded = selectors(3, seed=19)
    predicted = np.random.default_rng(6).uniform(0, 1, N)
    predicted[::5] = np.nan
    for _ in range(3):
        picked = plain.select(B)
        np.testing.assert_array_equal(sharded.select(B), picked)
        plain.update(picked, np.full(B, 2.0), 4, predicted)
        sharded.update(picked, np.full(B, 2.0), 4, predicted)
    assert sharded.capability == plain.capability  # the estimator skipped these steps
    assert_same_posterior(plain, sharded)


def test_set_params_applies_to_every_shard_and_is_checkpointed(tmp_path) -> None:
    plain, sharded = selectors(3, seed=23)
    run_steps(plain, sharded, steps=2)
    changes: list[dict] = [
        {"lam": 0.4, "target": 0.3},
        {"thompson": False},
        {"tau": 0.05, "thompson": True},
        {"rho": 0.6},
    ]
    for change in changes:
        plain.set_params(**change)
        sharded.set_params(**change)
        assert dict(sharded.params) == {k: plain.params[k] for k in sharded.params}
        run_steps(plain, sharded, steps=2, seed=len(change))
    assert_same_posterior(plain, sharded)
    path = tmp_path / "params.ckpt"
    sharded.save(str(path))
    assert dict(BOTS.load(path, prefetch=False).params) == dict(plain.params)
    resumed = ShardedBOTS.load(str(path), shards=2, actor_options={"num_cpus": 0})
    assert dict(resumed.params) == dict(sharded.params)
    np.testing.assert_array_equal(resumed.select(B), plain.select(B))


def test_set_params_validates_as_bots_and_changes_nothing_on_error() -> None:
    sharded = ShardedBOTS(10, shards=2, actor_options={"num_cpus": 0})
    before = dict(sharded.params)
    with pytest.raises(InvalidArgumentError, match="target") as ours:
        sharded.set_params(lam=0.5, target=1.5)
    with pytest.raises(InvalidArgumentError) as theirs:
        BOTS(10, prefetch=False).set_params(lam=0.5, target=1.5)
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(InvalidArgumentError, match="seed: is fixed"):
        sharded.set_params(seed=3)
    assert dict(sharded.params) == before


@pytest.mark.parametrize("thompson", [True, False], ids=["thompson", "greedy"])
def test_explain_and_posterior_equal_bots(thompson: bool) -> None:
    plain, sharded = selectors(3, seed=29, thompson=thompson)
    run_steps(plain, sharded, steps=3)
    picked = plain.select(B)
    np.testing.assert_array_equal(sharded.select(B), picked)
    assert plain.capability is not None  # so p̃ is compared too
    # The picks, plus tasks from every shard in any order, repeated.
    asked = np.concatenate([picked, [N - 1, 0, 1500, 999, 1000, 0]])
    ours, theirs = sharded.explain(asked), plain.explain(asked)
    for field in theirs._fields:
        np.testing.assert_array_equal(getattr(ours, field), getattr(theirs, field), err_msg=field)
    for got, want in zip(sharded.posterior(asked), plain.posterior(asked)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(InvalidArgumentError, match=r"task_ids: 3000 at position 1 is out of range"):
        sharded.posterior([0, N])


def test_adaptive_rho_and_lam_equal_bots(tmp_path) -> None:
    plain, sharded = selectors(2, seed=31, adaptive_rho=True, adaptive_lam=True, lam=0.2)
    run_steps(plain, sharded, steps=6)
    assert plain.rho_in_use < plain.rho  # predictions missed: the halving is exercised
    assert plain.lam_in_use != plain.lam  # the drift statistic moved λ
    assert (sharded.rho_in_use, sharded.lam_in_use) == (plain.rho_in_use, plain.lam_in_use)
    assert_same_posterior(plain, sharded)
    path = tmp_path / "adaptive.ckpt"
    sharded.save(str(path))
    resumed = ShardedBOTS.load(str(path), shards=3, actor_options={"num_cpus": 0})
    assert (resumed.rho_in_use, resumed.lam_in_use) == (plain.rho_in_use, plain.lam_in_use)
    run_steps(plain, resumed, steps=2, seed=3)
    assert_same_posterior(plain, resumed)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prefetch": True}, "prefetch"),
        ({"backend": "torch"}, "backend"),
        ({"device": "cpu"}, "device"),
        ({"evidence": object()}, "evidence"),
    ],
)
def test_bots_arguments_it_cannot_honour_are_refused_by_name(kwargs: dict, name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^{name}: ShardedBOTS") as info:
        ShardedBOTS(10, shards=2, **kwargs)
    assert info.value.argument == name


@pytest.mark.parametrize("kwargs", [{}, {"thompson": False}, {"tau": 0.05}], ids=["thompson", "greedy", "softmax"])
def test_plan_equals_bots(kwargs: dict) -> None:
    plain, sharded = selectors(3, seed=41, **kwargs)
    run_steps(plain, sharded, steps=2)
    exclude = np.arange(0, N, 7)
    for budget, n_min, n_max in ((256, 2, 16), (96, 4, 4)):
        want = plain.plan(budget, n_min, n_max, exclude=exclude)
        got = sharded.plan(budget, n_min, n_max, exclude=exclude)
        np.testing.assert_array_equal(got.ids, want.ids)
        np.testing.assert_array_equal(got.counts, want.counts)
    assert sharded.num_selections == plain.num_selections
    np.testing.assert_array_equal(sharded.select(B), plain.select(B))


def test_policy_lag_and_lag_discount_equal_bots() -> None:
    plain, sharded = selectors(2, seed=37, lag_discount=0.8)
    rng = np.random.default_rng(8)
    for step in range(4):
        picked = plain.select(B)
        np.testing.assert_array_equal(sharded.select(B), picked)
        lag = rng.integers(0, 4, B)
        if step == 2:
            plain.set_params(lag_discount=0.5)
            sharded.set_params(lag_discount=0.5)
        if step % 2:
            rewards = rng.uniform(0, 1, (B, 4))
            plain.update_rewards(picked, rewards, policy_lag=lag)
            sharded.update_rewards(picked, rewards, policy_lag=lag)
        else:
            successes = rng.binomial(8, 0.5, B).astype(float)
            plain.update(picked, successes, 8, policy_lag=lag)
            sharded.update(picked, successes, 8, policy_lag=lag)
    assert sharded.params["lag_discount"] == 0.5
    assert sharded.capability == plain.capability
    assert_same_posterior(plain, sharded)
    with pytest.raises(InvalidArgumentError, match="policy_lag: must be >= 0"):
        sharded.update([0, 1], [1.0, 1.0], 2, policy_lag=[0, -1])


def test_a_bots_argument_it_does_not_apply_is_refused_unless_at_its_default(monkeypatch) -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'no_such_argument'"):
        ShardedBOTS(10, shards=2, no_such_argument=1)
    # A BOTS that has gained an argument ShardedBOTS does not know.
    original = BOTS.__init__

    def with_new_knob(self, num_tasks, *, new_knob: float = 0.0, **kwargs) -> None:
        original(self, num_tasks, **kwargs)

    monkeypatch.setattr(BOTS, "__init__", with_new_knob)
    with pytest.raises(InvalidArgumentError, match=r"^new_knob: ShardedBOTS does not support .* got 0.5") as info:
        ShardedBOTS(10, shards=2, new_knob=0.5)
    assert info.value.argument == "new_knob"
    sharded = ShardedBOTS(10, shards=2, new_knob=0.0, actor_options={"num_cpus": 0})  # its default changes nothing
    assert "new_knob" not in sharded.params
