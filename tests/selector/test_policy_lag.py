"""update(..., policy_lag=): evidence from stale policies discounted by lag_discount ** lag."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, InvalidArgumentError, InvalidTypeError


def _posterior(sel: BOTS) -> tuple[np.ndarray, np.ndarray]:
    return sel.alpha, sel.beta


@given(
    delta=st.floats(0.05, 1.0),
    lags=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    seed=st.integers(0, 1000),
)
def test_lag_scales_successes_and_trials(delta: float, lags: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    ids = rng.choice(20, len(lags), replace=False)
    succ = rng.integers(0, 9, len(lags)).astype(float)
    lagged, scaled = BOTS(20, lag_discount=delta), BOTS(20, lag_discount=delta)
    lagged.update(ids, succ, 8, policy_lag=np.array(lags))
    weight = delta ** np.array(lags, dtype=float)
    scaled.update(ids, succ * weight, 8 * weight)
    np.testing.assert_allclose(lagged.alpha, scaled.alpha, rtol=1e-12)
    np.testing.assert_allclose(lagged.beta, scaled.beta, rtol=1e-12)


def test_off_by_default_and_lag_zero_changes_nothing() -> None:
    ids, succ = np.array([1, 4, 7]), np.array([3.0, 0.0, 8.0])
    plain, default_delta, zero_lag = BOTS(10), BOTS(10), BOTS(10, lag_discount=0.5)
    plain.update(ids, succ, 8)
    default_delta.update(ids, succ, 8, policy_lag=5)  # lag_discount=1: no discount
    zero_lag.update(ids, succ, 8, policy_lag=0)
    for other in (default_delta, zero_lag):
        np.testing.assert_array_equal(plain.alpha, other.alpha)
        np.testing.assert_array_equal(plain.beta, other.beta)


def test_stale_evidence_moves_the_posterior_less() -> None:
    fresh, stale = BOTS(4, lag_discount=0.5, lam=0.0), BOTS(4, lag_discount=0.5, lam=0.0)
    fresh.update([0], [16], 16)
    stale.update([0], [16], 16, policy_lag=2)
    assert fresh.alpha[0] == 17.0
    assert stale.alpha[0] == 5.0  # 16 successes at weight 1/4
    assert stale.mean()[0] < fresh.mean()[0]


def test_update_rewards_takes_a_lag() -> None:
    a, b = BOTS(6, lag_discount=0.8), BOTS(6, lag_discount=0.8)
    rewards = np.array([[1, 0, 1, 1], [0, 0, 0, 1]], dtype=float)
    a.update_rewards([2, 3], rewards, policy_lag=[1, 3])
    b.update([2, 3], rewards.sum(axis=1) * [0.8, 0.8**3], np.array([4.0 * 0.8, 4.0 * 0.8**3]))
    np.testing.assert_allclose(a.alpha, b.alpha, rtol=1e-12)
    np.testing.assert_allclose(a.beta, b.beta, rtol=1e-12)


def test_a_huge_lag_is_negligible_evidence_not_an_error() -> None:
    sel = BOTS(3, lag_discount=0.5, lam=0.0)
    sel.update([1], [4], 4, policy_lag=100_000)
    assert sel.num_updates == 1
    assert sel.alpha[1] == pytest.approx(1.0)


def test_lag_discount_is_a_parameter_in_checkpoints(tmp_path: Path) -> None:
    sel = BOTS(10, lag_discount=0.7)
    assert sel.lag_discount == 0.7 and sel.params["lag_discount"] == 0.7
    sel.set_params(lag_discount=0.9)
    sel.update([1, 2], [1, 2], 4, policy_lag=[2, 1])
    sel.save(tmp_path / "sel.bots")
    back = BOTS.load(tmp_path / "sel.bots")
    assert back.params == sel.params
    for s in (sel, back):
        s.update([3], [1], 2, policy_lag=4)
    np.testing.assert_array_equal(sel.alpha, back.alpha)
    np.testing.assert_array_equal(sel.beta, back.beta)
    # A state written before lag_discount existed loads with it off.
    state = sel.state_dict()
    del state["params"]["lag_discount"]
    assert BOTS(10)._from_state(state, threads=None, evidence=None).lag_discount == 1.0


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"policy_lag": -1}, InvalidArgumentError, "policy_lag"),
        ({"policy_lag": 1.5}, InvalidTypeError, "policy_lag"),
        ({"policy_lag": [1, 2]}, InvalidArgumentError, "policy_lag"),  # two entries for three ids
        ({"policy_lag": [0, -1, 2]}, InvalidArgumentError, "policy_lag"),
        ({"policy_lag": [0.5, 1, 2]}, InvalidTypeError, "policy_lag"),
    ],
)
def test_bad_lags_are_typed_errors(kwargs: dict, error: type, argument: str) -> None:
    sel = BOTS(10, lag_discount=0.5)
    with pytest.raises(error) as info:
        sel.update([1, 2, 3], [1, 1, 1], 2, **kwargs)
    assert getattr(info.value, "argument", None) == argument
    assert sel.num_updates == 0


@pytest.mark.parametrize("value", [0.0, -0.1, 1.5, float("nan")])
def test_bad_lag_discount(value: float) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        BOTS(4, lag_discount=value)
    assert info.value.argument == "lag_discount"
    with pytest.raises(InvalidArgumentError):
        BOTS(4).set_params(lag_discount=value)


def test_simulator_delays_evidence_and_the_lag_table() -> None:
    from bots_rft.errors import ConfigError
    from bots_rft.simulate import LearnerConfig, SimConfig
    from bots_rft.simulate.experiment import MethodSpec, build_groups, run_method
    from bots_rft.simulate.learner import make_world

    base = {
        "learner": LearnerConfig(num_tasks=1500, eval_tasks=128),
        "steps": 8,
        "batch_size": 24,
        "seeds": (0,),
        "methods": ("bots",),
        "rho_sweep": (),
        "lam_sweep": (),
        "sampling_ablation": False,
    }
    world = make_world(base["learner"], 0)  # type: ignore[arg-type]
    prompt = SimConfig(**base)  # type: ignore[arg-type]
    late = SimConfig(**base, lag=3, lag_discount_sweep=(1.0, 0.5))  # type: ignore[arg-type]
    assert [label for label, _ in build_groups(late)["lag"]] == ["Random", "δ=1", "δ=0.5"]
    on_time = run_method(MethodSpec("bots"), world, 0, prompt)
    delayed = run_method(MethodSpec("bots"), world, 0, late)
    discounted = run_method(MethodSpec("bots", lag_discount=0.5), world, 0, late)
    # The first `lag` steps select alike (no evidence has reached the selector either way)...
    np.testing.assert_array_equal(on_time.hist[:1], delayed.hist[:1])
    # ...later ones differ, and so does discounting the late evidence.
    assert not np.array_equal(on_time.hist, delayed.hist)
    assert not np.array_equal(delayed.hist, discounted.hist)
    # Random has no policy_lag: its run is the same with or without lag.
    np.testing.assert_array_equal(
        run_method(MethodSpec("random"), world, 0, prompt).hist, run_method(MethodSpec("random"), world, 0, late).hist
    )
    with pytest.raises(ConfigError, match="lag"):
        SimConfig(**base, lag=-1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="lag_discount_sweep"):
        SimConfig(**base, lag_discount_sweep=(0.0,))  # type: ignore[arg-type]
    # The default key of BOTS is unchanged (lag_discount at its default is not named).
    assert MethodSpec("bots").key == "bots(lam=0.1,rho=0.1,thompson=True)"
    assert "lag_discount=0.5" in MethodSpec("bots", lag_discount=0.5).key


def test_bots_simulate_takes_the_lag_options(tmp_path: Path) -> None:
    from bots_rft.cli import main as cli_main

    out = tmp_path / "run"
    rc = cli_main(
        [
            "simulate",
            *("--tasks", "300", "--steps", "4", "--batch", "12", "--seeds", "1", "--eval-tasks", "50"),
            *("--methods", "bots", "--rho-sweep", "none", "--lam-sweep", "none", "--no-sampling-ablation"),
            *("--lag", "2", "--lag-discount-sweep", "1,0.5", "--no-plots", "--no-progress", "--out", str(out)),
        ]
    )
    assert rc == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "Late evidence" in summary and "δ=0.5" in summary
    assert "--lag 2 --lag-discount-sweep 1,0.5" in summary
