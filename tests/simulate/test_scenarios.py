"""The simulator's scenarios: several task sets mixed by weights, and graded rewards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_rft import BOTS
from bots_rft.cli import main as cli_main
from bots_rft.errors import ConfigError
from bots_rft.simulate.learner import LearnerConfig, make_world
from bots_rft.simulate.scenarios import ScenarioConfig, graded_rewards, run_scenario, split_world

TINY = LearnerConfig(num_tasks=900, num_groups=3, eval_tasks=200)


def _config(scenario: str, **kw: object) -> ScenarioConfig:
    return ScenarioConfig(scenario, learner=TINY, **{"steps": 5, "batch_size": 40, "seeds": (0, 1), **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({"scenario": "nope"}, "scenario"),
        ({"pool_weights": (1.0, 1.0)}, "pool_weights"),
        ({"pool_weights": (0.0, 0.0, 0.0)}, "pool_weights"),
        ({"pool_weights": (1.0, -1.0, 1.0)}, "pool_weights"),
        ({"pool_weights": (1.0, float("nan"), 1.0)}, "pool_weights"),
        ({"checks": 0}, "checks"),
        ({"steps": True}, "steps"),
        ({"seeds": ()}, "seeds"),
        ({"batch_size": 300}, "batch_size"),  # the smallest set has 270 tasks
    ],
)
def test_bad_settings_are_config_errors_naming_them(kw: dict[str, object], named: str) -> None:
    args = {"scenario": "multipool", **kw}
    with pytest.raises(ConfigError, match=named):
        ScenarioConfig(learner=TINY, **args)  # type: ignore[arg-type]


def test_split_world_orders_tasks_easiest_first_and_keeps_every_task() -> None:
    world = make_world(TINY, 3)
    split, sizes = split_world(world)
    assert sizes.tolist() == [270, 360, 270]
    assert np.all(np.diff(split.base_logit) <= 0)
    # A permutation: the same tasks, each with its own references and pace.
    assert sorted(split.base_logit.tolist()) == sorted(world.base_logit.tolist())
    k = int(np.argmax(world.base_logit))
    assert (split.weak[0], split.strong[0], split.pace[0]) == (world.weak[k], world.strong[k], world.pace[k])
    assert np.array_equal(split.eval_base, world.eval_base)


def test_weighted_arms_give_each_set_its_quota_every_step() -> None:
    config = _config("multipool", pool_weights=(1.0, 2.0, 1.0))
    for run in run_scenario(config):
        if run.arm in ("Fixed mix", "MultiPool"):
            assert np.allclose(run.shares, [[0.25, 0.5, 0.25]] * config.steps), run.arm
        assert np.allclose(run.shares.sum(axis=1), 1.0)


def test_a_set_of_weight_zero_is_never_selected() -> None:
    for run in run_scenario(_config("multipool", pool_weights=(1.0, 1.0, 0.0))):
        if run.arm in ("Fixed mix", "MultiPool"):
            assert np.all(run.shares[:, 2] == 0), run.arm


@pytest.mark.parametrize("scenario", ["multipool", "graded"])
def test_scenarios_are_deterministic_per_seed(scenario: str) -> None:
    a, b = run_scenario(_config(scenario)), run_scenario(_config(scenario))
    assert [r.arm for r in a] == list(_config(scenario).arms) * 2
    for ra, rb in zip(a, b):
        assert np.array_equal(ra.perf, rb.perf) and np.array_equal(ra.etr, rb.etr)
        assert np.array_equal(ra.shares, rb.shares)
    # All arms of a seed start from the same world and the same policy.
    assert len({r.perf[0] for r in a if r.seed == 0}) == 1


def test_graded_rewards_are_fractions_of_checks_with_mean_p() -> None:
    rng = np.random.default_rng(0)
    p = np.array([0.0, 0.3, 1.0])
    r = graded_rewards(p, 4000, 5, rng)
    assert r.shape == (3, 4000)
    assert set(np.unique(r * 5)) <= {0.0, 1.0, 2.0, 3.0, 4.0, 5.0}
    assert np.all(r[0] == 0) and np.all(r[2] == 1)
    assert abs(r[1].mean() - 0.3) < 0.02


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8), st.integers(0, 2**31 - 1))
def test_with_one_check_fractional_evidence_equals_both_thresholds(p: list[float], seed: int) -> None:
    """With one check a reward is 0 or 1: fractional evidence and thresholding agree exactly."""
    rewards = graded_rewards(np.asarray(p), 6, 1, np.random.default_rng(seed))
    ids = np.arange(len(p))
    states = []
    for threshold in (None, 1.0, 0.5):
        sel = BOTS(len(p), seed=1)
        sel.update_rewards(ids, rewards, success_threshold=threshold)
        states.append((sel.alpha.tolist(), sel.beta.tolist()))
    assert states[0] == states[1] == states[2]


def test_bots_simulate_scenario_writes_its_table_curves_and_plot(tmp_path: Path) -> None:
    out = tmp_path / "run"
    rc = cli_main(
        [
            "simulate",
            "--scenario",
            "graded",
            "--checks",
            "3",
            "--tasks",
            "300",
            "--batch",
            "16",
            "--steps",
            "3",
            "--seeds",
            "2",
            "--groups",
            "2",
            "--eval-tasks",
            "50",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    summary = (out / "summary.md").read_text()
    assert "--scenario graded" in summary and "--checks 3" in summary
    for arm in ("BOTS fractional", "BOTS threshold 1", "BOTS threshold 0.5"):
        assert f"| {arm} |" in summary
    lines = (out / "curves.csv").read_text().splitlines()
    assert len(lines) == 1 + 4 * 2 * 4  # header; 4 arms x 2 seeds x (3 steps + 1)
    assert (out / "scenario_graded.png").stat().st_size > 0


def test_bots_simulate_refuses_bad_pool_weights(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["simulate", "--scenario", "multipool", "--pool-weights", "1,2"]) != 0
    assert "--pool-weights" in capsys.readouterr().err
