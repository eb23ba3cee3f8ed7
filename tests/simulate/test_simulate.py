"""The simulated learner, the experiment loop and ``bots simulate`` end to end (tiny configs)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from bots_rft.cli import main as cli_main
from bots_rft.errors import ConfigError
from bots_rft.report.simulation import quick_comparison
from bots_rft.simulate import LearnerConfig, SimulatedLearner, make_world
from bots_rft.simulate.experiment import MethodSpec, SimConfig, build_groups, run_method

# No trajectory noise: these tests check the learner's deterministic response to a batch's signal
# (the noise, on by default, is tested on its own below).
TINY = LearnerConfig(num_tasks=600, num_groups=3, eval_tasks=200, trajectory_noise=0.0)


def test_world_is_determined_by_seed() -> None:
    a, b, c = make_world(TINY, 7), make_world(TINY, 7), make_world(TINY, 8)
    for name in ("group", "base_logit", "pace", "weak", "strong", "eval_base"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert not np.array_equal(a.base_logit, c.base_logit)
    # Reference pass rates are measured from 16 rollouts: multiples of 1/16, noisy around truth.
    assert np.allclose(a.weak * 16, np.round(a.weak * 16))
    assert np.mean(a.weak != a.weak_true) > 0
    assert a.strong.mean() > a.weak.mean()


def test_learner_is_deterministic_per_seed_and_stream() -> None:
    world = make_world(TINY, 0)
    ids = np.arange(0, 600, 7)

    def trajectory(stream: int) -> tuple[list[np.ndarray], float]:
        learner = SimulatedLearner(world, seed=0, stream=stream)
        outs = []
        for _ in range(3):
            s = learner.rollout(ids)
            learner.train(ids, s)
            outs.append(s)
        return outs, learner.evaluate()

    (s1, e1), (s2, e2), (s3, _) = trajectory(1), trajectory(1), trajectory(2)
    assert all(np.array_equal(x, y) for x, y in zip(s1, s2)) and e1 == e2
    assert not all(np.array_equal(x, y) for x, y in zip(s1, s3))


def test_learning_signal_vanishes_when_rollouts_agree() -> None:
    world = make_world(TINY, 0)
    learner = SimulatedLearner(world, seed=0)
    before = learner.evaluate()
    ids = np.arange(20)
    n = TINY.n_rollouts
    assert learner.train(ids, np.where(ids % 2 == 0, 0, n)) == 0.0  # all 0/n or n/n
    assert learner.evaluate() == before and np.all(learner.ability == 0)
    assert learner.train(ids, np.full(20, n // 2)) == pytest.approx(1.0)  # maximal signal
    assert learner.evaluate() > before


def test_run_method_is_deterministic() -> None:
    config = SimConfig(learner=TINY, steps=5, batch_size=16, seeds=(0,))
    world = make_world(TINY, 0)
    for spec in (MethodSpec("random"), MethodSpec("bots"), MethodSpec("dapo")):
        a = run_method(spec, world, 0, config)
        b = run_method(spec, world, 0, config)
        assert np.array_equal(a.perf, b.perf) and np.array_equal(a.hist, b.hist), spec.key
        assert a.hist.sum() == 5 * 16
    dapo = run_method(MethodSpec("dapo"), world, 0, config)
    assert np.all(dapo.rollouts >= 16 * TINY.n_rollouts)


def test_headline_table_counts_rollouts_as_well_as_steps() -> None:
    """Methods that roll out batch x n per step have the same TTB/BSF per rollout as per step;
    DAPO's dynamic sampling spends more per step, so its TTB per rollout is worse (larger) than
    per step and the headline table shows it. Strict valid never exceeds ETR."""
    from bots_rft.report.simulation import group_rows
    from bots_rft.report.tables import markdown_table
    from bots_rft.simulate.experiment import run_experiment

    config = SimConfig(
        learner=TINY,
        steps=8,
        batch_size=16,
        seeds=(0, 1),
        methods=("random", "bots", "dynamic"),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )
    rows = {r.key: r for r in group_rows(run_experiment(config, progress=False), "methods")}
    for key in ("random", "bots(lam=0.1,rho=0.1,thompson=True)"):
        r = rows[key]
        assert r.rollouts == 1.0
        assert r.ttb_rollouts == pytest.approx(r.ttb, nan_ok=True) and r.bsf_rollouts == pytest.approx(r.bsf)
    dyn = rows["dynamic"]
    assert dyn.rollouts > 1.0
    for by_step, by_rollout in zip(dyn.ttb, dyn.ttb_rollouts):
        if by_step is not None and by_rollout is not None and not np.isnan(by_step):
            assert by_rollout > by_step
    assert all(0.0 <= r.strict_valid <= r.etr for r in rows.values())
    table = markdown_table(list(rows.values()))
    assert "TTB 100% ↓ (rollouts)" in table and "BSF 50% ↑ (rollouts)" in table and "Strict valid ↑" in table
    assert {"ttb_rollouts_100", "bsf_rollouts_25", "strict_valid"} <= set(dyn.to_dict())


def test_groups_share_runs_and_start_with_random() -> None:
    config = SimConfig(learner=TINY, steps=3, batch_size=8, seeds=(0,))
    groups = build_groups(config)
    assert list(groups) == ["methods", "rho", "lambda", "sampling"]
    assert all(rows[0][0] == "Random" for rows in groups.values())
    keys = {spec.key for rows in groups.values() for _, spec in rows}
    bots = dict(groups["methods"])["BOTS"].key
    assert dict(groups["rho"])["ρ=0.1"].key == bots == dict(groups["lambda"])["λ=0.1"].key
    assert len(keys) == 17  # 6 methods + 5 ρ + 5 λ + sampling off


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="methods"):
        SimConfig(learner=TINY, methods=("bogus",))
    with pytest.raises(ConfigError, match="batch_size"):
        SimConfig(learner=TINY, batch_size=601)
    with pytest.raises(ConfigError, match="rho_sweep"):
        SimConfig(learner=TINY, rho_sweep=(1.5,))
    with pytest.raises(ConfigError, match="transfer"):
        LearnerConfig(transfer=2.0)
    with pytest.raises(ConfigError, match=r"min_gap: must lie in \(0, 1\), got -0.1"):
        SimConfig(learner=TINY, min_gap=-0.1)


def test_min_gap_reaches_every_interpolation_estimator() -> None:
    from bots_rft import Interpolation
    from bots_rft.simulate.experiment import MethodSpec, make_selector
    from bots_rft.simulate.learner import SimulatedLearner, make_world

    config = SimConfig(learner=TINY, min_gap=0.03)
    world = make_world(TINY, seed=0)
    for kind in ("bots", "dots"):
        sel = make_selector(MethodSpec(kind), world, 0, SimulatedLearner(world, 0), config)
        assert isinstance(sel.evidence, Interpolation) and sel.evidence.min_gap == 0.03


EXPECTED_FILES = [
    "summary.md",
    "tables.csv",
    "curves.csv",
    "evidence.csv",
    "results.json",
    "heatmap_random.csv",
    "heatmap_offline.csv",
    "heatmap_bots-mopps.csv",
    "heatmap_bots-dots.csv",
    "heatmap_bots.csv",
    "heatmap_dapo-ds.csv",
    "curves_methods.png",
    "curves_rho.png",
    "curves_lambda.png",
    "curves_sampling.png",
    "heatmap_random_vs_bots.png",
    "evidence_quality.png",
    "calibration.png",
]


@pytest.mark.slow
def test_cli_simulate_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    rc = cli_main(
        [
            "simulate",
            "--tasks",
            "400",
            "--steps",
            "6",
            "--batch",
            "16",
            "--seeds",
            "2",
            "--groups",
            "3",
            "--eval-tasks",
            "100",
            "--rho-sweep",
            "0,0.5",
            "--lam-sweep",
            "0.5",
            "--learner",
            "weak_level=0.5",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    for name in EXPECTED_FILES:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    stdout = capsys.readouterr().out
    assert "TTB 50%" in stdout and "| BOTS |" in stdout
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for text in (
        "## Methods",
        "## Impact of ρ",
        "## Impact of λ",
        "## Posterior sampling",
        "## Implicit-evidence quality",
        "| DAPO-DS |",
        "--learner weak_level=0.5",
    ):
        assert text in summary, text
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [r["label"] for r in result["tables"]["rho"]] == ["Random", "ρ=0", "ρ=0.5"]
    assert result["tables"]["methods"][0]["ttb_50"] in (1.0, "n/a")
    assert result["tables"]["methods"][0]["ttb_rollouts_50"] in (1.0, "n/a")
    assert len(result["curves"]["dynamic"]["rollouts_spent"]) == len(result["curves"]["dynamic"]["perf"]["mean"])
    assert result["config"]["learner"]["weak_level"] == 0.5
    with (out / "curves.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    # Runs: 6 methods + ρ=0, ρ=0.5 + λ=0.5 + sampling off = 10 per seed, 7 rows (steps 0..6) each.
    assert len(rows) == 10 * 2 * 7
    with (out / "heatmap_bots.csv").open(encoding="utf-8") as fh:
        heat = list(csv.reader(fh))
    assert len(heat) == 1 + 6 and len(heat[0]) == 1 + 17
    assert all(abs(sum(float(v) for v in row[1:]) - 1.0) < 1e-3 for row in heat[1:])


def test_cli_simulate_rejects_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["simulate", "--tasks", "100", "--batch", "8", "--methods", "random,bogus", "--out", str(tmp_path)])
    assert rc == 2 and "bogus" in capsys.readouterr().err
    rc = cli_main(["simulate", "--tasks", "100", "--batch", "8", "--learner", "nope=1", "--out", str(tmp_path)])
    assert rc == 2 and "nope" in capsys.readouterr().err
    rc = cli_main(["simulate", "--tasks", "100", "--batch", "8", "--learner", "step_rule=adam", "--out", str(tmp_path)])
    assert rc == 2 and "step_rule" in capsys.readouterr().err
    rc = cli_main(
        ["simulate", "--tasks", "100", "--batch", "8", "--learner", "learning_rate=x", "--out", str(tmp_path)]
    )
    assert rc == 2 and "learning_rate" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cli_learner_overrides_take_the_step_rule_by_name() -> None:
    """`--learner step_rule=linear` (the learner before the fit, a documented sensitivity run) and
    `--learner learning_rate=none` (the rule's own step size) reach LearnerConfig."""
    from bots_rft.commands.simulate import _learner_overrides

    got = _learner_overrides([("step_rule", "linear"), ("trajectory_noise", "0"), ("learning_rate", "none")])
    assert got == {"step_rule": "linear", "trajectory_noise": 0.0, "learning_rate": None}
    assert LearnerConfig(**got).step_size == 0.06


def test_quick_comparison_returns_markdown() -> None:
    text = quick_comparison(num_tasks=400, steps=5, seed=1)
    for label in ("Random", "Offline", "BOTS-MoPPS", "BOTS-DOTS", "BOTS", "DAPO-DS"):
        assert f"| {label} |" in text
    assert "TTB 50%" in text and text.count("\n|") == 8
    with pytest.raises(ConfigError):
        quick_comparison(num_tasks=10)


def test_rule_tables_and_keys_of_default_runs_unchanged() -> None:
    from bots_rft.simulate.experiment import build_groups

    lc = LearnerConfig(num_tasks=64, eval_tasks=16)
    config = SimConfig(learner=lc, batch_size=8, tau_sweep=(0.0, 0.1), target_sweep=(0.3,), adaptive_ablation=True)
    groups = build_groups(config)
    assert [label for label, _ in groups["tau"]] == ["Random", "τ=0", "τ=0.1"]
    assert groups["tau"][1][1].key == "bots(lam=0.1,rho=0.1,thompson=True)"  # the default keeps its key (and stream)
    assert groups["tau"][2][1].key == "bots(lam=0.1,rho=0.1,thompson=True,tau=0.1)"
    assert groups["target"][1][1].target == 0.3
    assert [s.adaptive_lam for _, s in groups["adaptive"][1:]] == [False, False, True, True]
    assert MethodSpec("mopps").key == "mopps" and MethodSpec("random", tau=0.5).key == "random"


def test_learner_shift_moves_every_ability_once_at_its_step() -> None:
    from bots_rft.simulate import SimulatedLearner, make_world

    lc = LearnerConfig(num_tasks=64, eval_tasks=16, shift_step=2, shift=-1.5, learning_rate=0.0, trajectory_noise=0.0)
    learner = SimulatedLearner(make_world(lc, 0), 0)
    ids = np.arange(8)
    for expected in (0.0, -1.5, -1.5):
        learner.train(ids, learner.rollout(ids))
        assert np.allclose(learner.ability, expected)


def test_step_rules_differ_exactly_on_diluted_batches() -> None:
    """The linear rule halves a step's progress when B zero-variance groups join B informative
    ones; the saturating rule does not move at all (their signal is 0)."""
    from bots_rft.simulate.learner import LearnerConfig, SimulatedLearner, make_world

    def gain(rule: str, diluted: bool) -> float:
        # One step size for both rules and no trajectory noise: the rules alone differ.
        c = LearnerConfig(
            num_tasks=200,
            eval_tasks=16,
            step_rule=rule,
            saturation_k=2.0,
            repeat_decay=1.0,
            learning_rate=0.06,
            trajectory_noise=0.0,
        )
        learner = SimulatedLearner(make_world(c, 0), 0)
        ids = np.arange(8)
        succ = np.full(8, 8)  # r = 1/2 with 16 rollouts: signal 1 each
        if diluted:
            ids, succ = np.arange(16), np.concatenate([succ, np.full(8, 16)])  # 8 more at 16/16
        learner.train(ids, succ)
        return float(learner.ability.sum())

    assert gain("linear", True) == pytest.approx(0.5 * gain("linear", False), rel=1e-12)
    assert gain("saturating", True) == gain("saturating", False)
    # Saturating: S / (S + K) with S = 8, K = 2, against the linear mean of 1.
    assert gain("saturating", False) == pytest.approx(0.8 * gain("linear", False), rel=1e-12)


def test_trajectory_noise_leaves_rollouts_alone_and_spreads_runs() -> None:
    from bots_rft.simulate.learner import LearnerConfig, SimulatedLearner, make_world

    quiet = LearnerConfig(num_tasks=200, eval_tasks=16, trajectory_noise=0.0)
    noisy = LearnerConfig(num_tasks=200, eval_tasks=16, trajectory_noise=0.05)
    a, b = SimulatedLearner(make_world(quiet, 0), 1), SimulatedLearner(make_world(noisy, 0), 1)
    ids = np.arange(16)
    assert np.array_equal(a.rollout(ids), b.rollout(ids))  # the first draw, before any training
    a.train(ids, np.full(16, 8))
    b.train(ids, np.full(16, 8))
    assert not np.array_equal(a.ability, b.ability)


def test_learner_refuses_an_unknown_step_rule() -> None:
    from bots_rft.errors import ConfigError
    from bots_rft.simulate.learner import LearnerConfig

    with pytest.raises(ConfigError, match="step_rule"):
        LearnerConfig(step_rule="adam")
    with pytest.raises(ConfigError, match="trajectory_noise"):
        LearnerConfig(trajectory_noise=-1.0)


def test_the_default_learner_is_the_one_fitted_to_the_real_trainer() -> None:
    """LearnerConfig's step rule, K, trajectory noise and step size are FITTED_LEARNER's; the
    linear rule and other K get their own step size unless one is given."""
    from bots_rft.simulate.fitted import FITTED_LEARNER
    from bots_rft.simulate.learner import LINEAR_LEARNING_RATE, default_learning_rate

    c = LearnerConfig()
    fitted = FITTED_LEARNER.settings()
    assert {k: getattr(c, k) for k in fitted if k != "learning_rate"} == {
        k: v for k, v in fitted.items() if k != "learning_rate"
    }
    assert c.learning_rate is None and c.step_size == FITTED_LEARNER.learning_rate
    assert LearnerConfig(**fitted).step_size == c.step_size  # the fitted values build a valid learner
    assert LearnerConfig(step_rule="linear").step_size == LINEAR_LEARNING_RATE
    # Another K: a batch of 256 tasks with summed signal 76.8 moves as far as under the linear rule.
    k = 4.0
    assert default_learning_rate("saturating", k) * 76.8 / (76.8 + k) == pytest.approx(LINEAR_LEARNING_RATE * 0.3)
    assert LearnerConfig(step_rule="linear", learning_rate=0.5).step_size == 0.5
    with pytest.raises(ConfigError, match="learning_rate"):
        LearnerConfig(learning_rate=-1.0)
    with pytest.raises(ConfigError, match="learning_rate"):
        LearnerConfig(learning_rate=float("nan"))


def test_lam_and_rho_reach_every_bots_variant_not_only_bots() -> None:
    """`bots simulate --lam/--rho` set λ and ρ of every method that takes them (bots-plan,
    bots-screen, bots-multiref, bots-sim), not only of `bots`; presets that fix them (MoPPS, DOTS)
    keep theirs. A run at the defaults keeps the key (and random streams) it had."""
    from bots_rft.simulate.experiment import SimConfig, build_groups

    variants = ("bots-plan", "bots-screen", "bots-multiref", "bots-sim")
    small = LearnerConfig(num_tasks=100, eval_tasks=16)
    changed = build_groups(
        SimConfig(learner=small, batch_size=8, methods=("random", *variants, "mopps"), lam=0.5, rho=0.3)
    )
    specs = {spec.kind: spec for _, spec in changed["methods"]}
    for name in variants:
        assert (specs[name].lam, specs[name].rho) == (0.5, 0.3), name
        assert "lam=0.5" in specs[name].key and "rho=0.3" in specs[name].key, specs[name].key
    assert (specs["mopps"].lam, specs["mopps"].rho) == (0.0, 0.0)
    default = build_groups(SimConfig(learner=small, batch_size=8, methods=("random", *variants)))
    assert [spec.key for _, spec in default["methods"][1:]] == list(variants)


def test_method_params_reach_every_compared_method_that_takes_them() -> None:
    """SimConfig.method_params (bots simulate --param NAME=VALUE) set a method's own parameters:
    each reaches the compared methods that take it (and do not fix it), in their run keys; a
    name no compared method takes, one with its own setting, a repeat or a value out of range is
    refused naming it."""
    from bots_rft.simulate.experiment import SimConfig, build_groups

    small = LearnerConfig(num_tasks=100, eval_tasks=16)
    base = dict(learner=small, batch_size=8, methods=("random", "bots", "dots", "mopps", "adarft"))
    groups = build_groups(SimConfig(**base, method_params=(("momentum", 0.5), ("step_size", 0.2))))
    specs = {spec.kind: spec for _, spec in groups["methods"]}
    assert dict(specs["bots"].extra) == {"momentum": 0.5} and "momentum=0.5" in specs["bots"].key
    assert dict(specs["dots"].extra) == {"momentum": 0.5}
    assert specs["mopps"].extra == () and dict(specs["adarft"].extra) == {"step_size": 0.2}
    for bad, match in (
        ((("nope", 1.0),), "no compared method takes 'nope'"),
        ((("lam", 0.5),), "own setting"),
        ((("momentum", 0.5), ("momentum", 0.6)), "given twice"),
        ((("momentum", 2.0),), "momentum"),
    ):
        with pytest.raises(ConfigError, match=match):
            SimConfig(**base, method_params=bad)


def test_cli_param_sets_a_method_parameter_and_refuses_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    small = ["--tasks", "200", "--batch", "8", "--steps", "3", "--seeds", "1", "--groups", "2", "--eval-tasks", "20"]
    small += ["--rho-sweep", "none", "--lam-sweep", "none", "--no-sampling-ablation", "--no-progress"]
    out = tmp_path / "run"
    rc = cli_main(["simulate", *small, "--methods", "random,adarft", "--param", "step_size=0.2", "--out", str(out)])
    assert rc == 0
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert result["config"]["method_params"] == [["step_size", 0.2]]
    assert "--param step_size=0.2" in (out / "summary.md").read_text(encoding="utf-8")
    capsys.readouterr()
    for bad, message in (
        ("nope=1", "--param nope: no compared method takes it"),
        ("step_size=x", "--param step_size: expected a float, got 'x'"),
    ):
        where = tmp_path / bad.replace("=", "_")
        rc = cli_main(["simulate", *small, "--methods", "random,adarft", "--param", bad, "--out", str(where)])
        assert rc == 2 and message in capsys.readouterr().err
        assert not where.exists()
