"""Trial 2's pre-registered config (configs/trial2_strings_cpu.yaml): the RL pool is a fixed subset
of the built training pool while the warm-up and the references learn from all of it; the rule's
learning and ETR checks; the selection statistics the report gives; the prediction script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "trial2_strings_cpu.yaml")


def _rows(values: dict[str, list[tuple[float, float]]]) -> list[dict[str, Any]]:
    """Held-out rows: per method, per seed, (step-0 score, score at step 10)."""
    rows = []
    for method, per_seed in values.items():
        for seed, (start, later) in enumerate(per_seed):
            rows.append({"method": method, "seed": seed, "step": 0, "rollouts": 0, "avg_at_4": start, "greedy": None})
            rows.append({"method": method, "seed": seed, "step": 10, "rollouts": 8, "avg_at_4": later, "greedy": None})
    return rows


def test_the_config_states_trial_twos_design() -> None:
    """What the issue fixed before any run, as the command reads it."""
    from bots_rft.train.compare_plan import plan_comparison

    plan = plan_comparison(CONFIG, {}, out="runs/trial2")
    spec = plan.spec
    assert plan.methods == ["random", "bots", "mopps", "reference-filter"]
    assert plan.seeds == list(range(30, 50)) and plan.jobs == 2
    assert spec.pool is not None and spec.pool.tasks == 6000 and spec.pool.seed == 1
    rows = spec.pool.subset_rows()
    assert rows == [int(r) for r in np.random.default_rng(20261201).choice(6000, 160, replace=False)]
    assert spec.references is not None
    assert (spec.references.weak_sft_steps, spec.references.strong_sft_steps, spec.references.seed) == (300, 1200, 1)
    d = plan.decision
    assert d is not None
    assert [(c["name"], c["method"], c["baseline"]) for c in d["contrasts"]] == [
        ("C1", "bots", "reference-filter"),
        ("C2", "mopps", "random"),
        ("C3", "bots", "random"),
    ]
    assert (d["alpha"], d["equivalence"], d["learning_check"], d["etr_margin"]) == (0.05, 0.0075, "random", 0.05)
    cfg = plan.cfg
    assert (cfg.steps, cfg.batch_size, cfg.rollouts, cfg.sft_steps, cfg.eval_every, cfg.eval_samples) == (
        100,
        16,
        8,
        600,
        10,
        4,
    )
    assert (cfg.lam, cfg.rho, cfg.target, cfg.thompson) == (0.1, 0.1, 0.5, True)


@pytest.mark.slow
def test_trial2_smoke_trains_on_the_subset_and_warms_up_on_the_whole_pool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.cli import main
    from bots_rft.data import TaskPool
    from bots_rft.train.logger import read_metrics

    out = tmp_path / "trial2"
    argv = ["compare", "--config", CONFIG, "--smoke", "--out", str(out), "--no-progress"]
    assert main([*argv, "--prepare-only"]) == 0
    full = TaskPool.load(out / "pool" / "full_train.parquet")
    rl = TaskPool.load(out / "pool" / "train.parquet")
    rows = np.random.default_rng(20261201).choice(120, 60, replace=False)  # --smoke: 60 of 120
    assert len(full) == 120 and np.array_equal(rl.ids, full.ids[rows])  # the subset keeps its task ids
    assert {"weak_sft10_pass_rate", "strong_sft40_pass_rate"} <= set(rl.difficulty_columns)  # measured on it
    warm = json.loads((out / "warmup" / "bots_compare_warmup.json").read_text(encoding="utf-8"))
    assert warm["pool"] == str(out / "pool" / "full_train.parquet")  # the warm-up learned from every task
    assert main([*argv, "--reuse"]) == 0
    printed = capsys.readouterr().out
    assert "outcome under the rule: (smoke run, not a result) C1 bots − reference-filter: " in printed
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "Learning check: random's gain over the run" in text and "ETR check (mean training ETR" in text
    assert "| Method | seeds | ETR | re-selection share | median gap (steps) |" in text
    for run in (out / "mopps").glob("seed*"):
        for r in read_metrics(run / "metrics.jsonl"):
            if r.get("kind") == "train":
                assert set(r["task_ids"]) <= set(range(60))  # rows of the RL pool


def test_a_subset_larger_than_the_pool_and_a_margin_without_its_arm_are_refused(tmp_path: Path) -> None:
    from bots_rft.errors import ConfigError
    from bots_rft.train.comparison import DecisionSpec, PoolSpec

    with pytest.raises(ConfigError, match="train_subset"):
        PoolSpec(tasks=100, train_subset=101)
    with pytest.raises(ConfigError, match="etr_margin"):
        DecisionSpec(contrasts=[{"method": "bots", "baseline": "random"}], etr_margin=0.05)
    with pytest.raises(ConfigError, match="learning_check"):
        DecisionSpec(learning_check="random")  # only with contrasts
    assert "train_subset" not in PoolSpec(tasks=100).record()  # older pools' records still match


def test_the_learning_check_withholds_every_verdict_when_random_did_not_learn() -> None:
    from bots_rft.report.trial import NOT_READ, SUPPORTED, Contrast, ContrastRule, decide_contrasts

    rule = ContrastRule((Contrast("bots", "random", "C3"),), learning_check="random")
    flat = [(0.40, 0.40 + d) for d in (0.001, -0.002, 0.0, 0.001, -0.001, 0.0)]
    better = [(0.40, 0.40 + d + 0.05) for d in (0.001, -0.002, 0.0, 0.001, -0.001, 0.0)]
    out = decide_contrasts(_rows({"random": flat, "bots": better}), rule)
    assert not out.learned and out.results[0].verdict == NOT_READ
    assert "failed: no contrast is read" in "\n".join(out.checks())
    learns = [(0.40, 0.45 + d) for d in (0.001, -0.002, 0.0, 0.001, -0.001, 0.0)]
    more = [(0.40, 0.50 + d) for d in (0.002, -0.001, 0.0, 0.001, -0.002, 0.001)]
    out = decide_contrasts(_rows({"random": learns, "bots": more}), rule)
    assert out.learned and out.results[0].verdict == SUPPORTED


def test_the_etr_margin_notes_a_method_that_did_not_change_what_it_trained_on() -> None:
    from bots_rft.report.trial import SUPPORTED, Contrast, ContrastRule, decide_contrasts

    rule = ContrastRule(
        (Contrast("bots", "random", "C3"), Contrast("mopps", "random", "C2")),
        learning_check="random",
        etr_margin=0.05,
    )
    learns = [(0.40, 0.45 + d) for d in (0.001, -0.002, 0.0, 0.001, -0.001, 0.0)]
    more = [(0.40, 0.50 + d) for d in (0.002, -0.001, 0.0, 0.001, -0.002, 0.001)]
    rows = _rows({"random": learns, "bots": more, "mopps": more})
    out = decide_contrasts(rows, rule, etr={"random": 0.40, "bots": 0.44, "mopps": 0.50})
    bots, mopps = out.results
    assert bots.verdict == SUPPORTED and "bots did not change what it trained on" in bots.note
    assert mopps.verdict == SUPPORTED and mopps.note == ""
    assert "bots 0.440 (+0.040), mopps 0.500 (+0.100)" in "\n".join(out.checks())
    # Without the runs' ETR (a held_out.csv alone) the check says it was not applied.
    assert "not applied" in "\n".join(decide_contrasts(rows, rule).checks())


def test_reselection_counts_returns_and_their_gaps() -> None:
    from bots_rft.report.training import RunCurves, reselection, selection_markdown

    records = [
        {"kind": "train", "step": 1, "task_ids": [0, 1], "etr": 0.5},
        {"kind": "train", "step": 2, "task_ids": [2, 3], "etr": 0.5},
        {"kind": "train", "step": 4, "task_ids": [0, 4], "etr": 0.5},
        {"kind": "train", "step": 7, "task_ids": [0, 1], "etr": 0.5},
    ]
    run = RunCurves("bots", records)
    share, gap = reselection(run)
    assert share == pytest.approx(3 / 8)  # 0 at step 4, 0 and 1 at step 7
    assert gap == 3.0  # gaps 3, 3, 6
    assert reselection(RunCurves("x", records[:2])) == (0.0, pytest.approx(float("nan"), nan_ok=True))
    assert "| bots | 2 | 0.500 ± 0.000 | 0.375 ± 0.000 | 3.0 ± 0.0 |" in selection_markdown({"bots": [run, run]})


@pytest.mark.slow
def test_the_prediction_script_runs_at_its_smoke_size(tmp_path: Path) -> None:
    """docs/trial2/prediction.md's program at its --smoke size: the tables the page shows."""
    cmd = [sys.executable, str(ROOT / "examples" / "trial2" / "predict.py"), "--smoke"]
    cal = str(ROOT / "docs" / "trial" / "calibration.json")
    done = subprocess.run([*cmd, "--calibration", cal, "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "prediction.md").read_text(encoding="utf-8")
    assert "| C1 = bots − reference-filter |" in text and "| C3 |" in text
    bad = subprocess.run(
        [*cmd, "--calibration", str(tmp_path / "none.json"), "--out", str(tmp_path)], text=True, capture_output=True
    )
    assert bad.returncode == 2 and "--calibration" in bad.stderr


def _log(path: Path, steps: list[dict[str, Any]], evals: dict[int, float]) -> Path:
    records: list[dict[str, Any]] = [{"kind": "config", "step": 0, "config": {}, "machine": {"cpu": "x"}}]
    records += [{"kind": "train", "step": i + 1, **s} for i, s in enumerate(steps)]
    records += [{"kind": "eval", "step": s, "accuracy": a, "greedy_accuracy": a} for s, a in evals.items()]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"loss": 0.25000000000000006}, "the loss parted first, with the same picks and successes"),
        ({"successes": [8, 3]}, "successes parted before picks: a sampled token differs"),
        ({"task_ids": [1, 7]}, "picks parted with identical successes before them: the selection or what it reads"),
    ],
)
def test_diverge_names_the_first_step_and_what_parted(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    """examples/trial/diverge.py: the first step whose picks, successes or loss differ, and what
    that says (the selection path, a sampled token, the arithmetic)."""
    steps = [{"task_ids": [1, 2], "successes": [8, 4], "loss": 0.25} for _ in range(4)]
    other = [dict(s) for s in steps]
    other[2] = {**other[2], **change}  # step 3
    a = _log(tmp_path / "a.jsonl", steps, {0: 0.4, 2: 0.5, 4: 0.6})
    b = _log(tmp_path / "b.jsonl", other, {0: 0.4, 2: 0.5, 4: 0.61})
    cmd = [sys.executable, str(ROOT / "examples" / "trial" / "diverge.py")]
    done = subprocess.run([*cmd, str(a), str(b)], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "first differ at step 3" in done.stdout and expected in done.stdout
    assert "first evaluation that differs: step 4" in done.stdout
    same = subprocess.run([*cmd, str(a), str(a)], capture_output=True, text=True)
    assert same.returncode == 0 and "identical picks, successes and loss at every step 1-4" in same.stdout
    bad = subprocess.run([*cmd, str(a), str(tmp_path / "none.jsonl")], capture_output=True, text=True)
    assert bad.returncode == 2 and "b: no file" in bad.stderr


def test_the_committed_outcome_recomputes_from_the_committed_evaluations() -> None:
    """docs/trial2/held_out.csv (every evaluation of every run) under the config's rule gives the
    outcome docs/training.md and the README report, and all 80 runs are in it."""
    from bots_rft.report.compare_summary import decision_rule
    from bots_rft.report.trial import SUPPORTED, ContrastRule, decide_contrasts, read_held_out_csv
    from bots_rft.train.compare_plan import plan_comparison

    rule = decision_rule(plan_comparison(CONFIG, {}, out="runs/trial2"))
    assert isinstance(rule, ContrastRule)
    rows = read_held_out_csv(ROOT / "docs" / "trial2" / "held_out.csv")
    runs = {(r["method"], r["seed"]) for r in rows}
    assert len(runs) == 80 and {s for _, s in runs} == set(range(30, 50))
    assert all(sum(1 for r in rows if (r["method"], r["seed"]) == run) == 11 for run in runs)
    out = decide_contrasts(rows, rule)
    assert out.learned
    assert [(c.name, c.verdict) for c in out.results] == [("C1", SUPPORTED), ("C2", SUPPORTED), ("C3", SUPPORTED)]
    training = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for c in out.results:
        i = c.interval
        quoted = f"{i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}]"
        assert quoted in training, quoted
        assert quoted in readme, quoted
