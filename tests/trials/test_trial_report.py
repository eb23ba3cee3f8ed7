"""A comparison read as a trial: the held-out table (OUT/held_out.csv), the primary metric paired
by seed with its 95% Student-t interval, the decision rule's verdicts, the reference rollouts
charged, the shadow estimator on Random's batches, and ``bots compare --smoke`` on the
pre-registered trial's config."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft.errors import InvalidArgumentError
from bots_rft.report.training import RunCurves, evidence_markdown, shadow_evidence_quality
from bots_rft.report.trial import (
    COSTS,
    INCONCLUSIVE,
    REFUTED,
    SAVES,
    DecisionRule,
    Interval,
    decide,
    held_out_rows,
    paired_interval,
    read_held_out_csv,
    reference_cost,
    trial_markdown,
    write_held_out_csv,
)
from bots_rft.train.comparison import ReferenceSpec

ROOT = Path(__file__).resolve().parents[2]
RULE = DecisionRule(method="bots", baseline="random", control="reference-filter", refute_within=0.005)


def rows_of(means: dict[str, list[float]], steps: tuple[int, ...] = (0, 10)) -> list[dict[str, Any]]:
    """Held-out rows whose runs (one per seed, seeds 10, 11, ...) have ``means[method][i]`` as
    their mean over the run: evaluations spread evenly from mean - 0.01 to mean + 0.01 (greedy
    0.1 lower)."""
    rows = []
    for method, values in means.items():
        for i, mean in enumerate(values):
            for step, offset in zip(steps, np.linspace(-0.01, 0.01, len(steps))):
                acc = mean + float(offset)
                rows.append(
                    {
                        "method": method,
                        "seed": 10 + i,
                        "step": step,
                        "rollouts": 128 * step,
                        "avg_at_4": acc,
                        "greedy": acc - 0.1,
                    }
                )
    return rows


def arms(diffs: list[float], versus_control: list[float]) -> list[dict[str, Any]]:
    """Random at 0.30, 0.32, ...; bots that plus ``diffs``; reference-filter bots minus
    ``versus_control``, seed by seed."""
    random = [0.30 + 0.02 * i for i in range(len(diffs))]
    bots = [r + d for r, d in zip(random, diffs)]
    return rows_of({"random": random, "bots": bots, "reference-filter": [b - c for b, c in zip(bots, versus_control)]})


def test_paired_interval_by_hand() -> None:
    diffs = [0.01, 0.03, 0.02, 0.04]
    # mean 0.025; sample sd sqrt(0.0005 / 3); t(0.975, 3 df) = 3.182; half = t · sd / sqrt(4)
    half = 3.182 * math.sqrt(0.0005 / 3) / 2
    b = {10: 0.3, 11: 0.5, 12: 0.4, 13: 0.2}
    a = {s: v + d for (s, v), d in zip(b.items(), diffs)}
    a[99] = 0.9  # a seed the baseline lacks is not paired
    got = paired_interval(a, b)
    assert got.n == 4 and got.mean == pytest.approx(0.025) and got.half == pytest.approx(half)
    assert got.text() == "+0.025 ± 0.021" and got.excludes_zero
    # The same through the held-out rows: each run's mean over its evaluations, paired by seed.
    outcome = decide(arms(diffs, [0.0] * 4), RULE)
    assert outcome.versus_baseline.mean == pytest.approx(0.025)
    assert outcome.versus_baseline.half == pytest.approx(half)
    assert not Interval.of([0.5]).excludes_zero  # one seed: no spread to judge by


@pytest.mark.parametrize(
    ("diffs", "versus_control", "verdict", "online"),
    [
        ([0.02, 0.03, 0.025, 0.035], [0.01, 0.02, 0.015, 0.012], SAVES, True),
        ([0.02, 0.03, 0.025, 0.035], [0.01, -0.01, 0.02, -0.02], SAVES, False),
        ([0.02, 0.03, 0.025, 0.035], [-0.01, -0.02, -0.015, -0.012], SAVES, False),  # control better: not "matters"
        ([-0.02, -0.03, -0.025, -0.035], [0.01, 0.02, 0.015, 0.012], COSTS, False),
        ([0.001, -0.001, 0.002, -0.002], [0.01, 0.02, 0.015, 0.012], REFUTED, False),
        ([0.03, -0.02, 0.01, -0.01], [0.01, 0.02, 0.015, 0.012], INCONCLUSIVE, False),
        ([0.03], [0.01], INCONCLUSIVE, False),  # one paired seed decides nothing
    ],
)
def test_each_verdict_of_the_rule(diffs: list[float], versus_control: list[float], verdict: str, online: bool) -> None:
    outcome = decide(arms(diffs, versus_control), RULE)
    assert outcome.verdict == verdict and outcome.online_matters is online
    assert outcome.text == (f"{verdict}; the online part matters" if online else verdict)
    assert outcome.column == "avg_at_4" and outcome.versus_control is not None
    assert outcome.line().endswith(f"→ bots: {outcome.text}")
    # Greedy (here the sampled accuracy minus 0.1 everywhere) gives the same differences.
    greedy = decide(arms(diffs, versus_control), RULE, "greedy")
    assert greedy.verdict == verdict and greedy.versus_baseline.mean == pytest.approx(outcome.versus_baseline.mean)


def test_rule_without_control_and_bad_rules() -> None:
    rows = arms([0.02, 0.03, 0.025, 0.035], [0.01, 0.02, 0.015, 0.012])
    outcome = decide(rows, DecisionRule())
    assert outcome.verdict == SAVES and outcome.versus_control is None and not outcome.online_matters
    # A wider band refutes what the narrow one leaves inconclusive.
    loose = arms([0.004, -0.003, 0.006, -0.004], [0.0] * 4)
    assert decide(loose, RULE).verdict == INCONCLUSIVE
    assert decide(loose, DecisionRule(refute_within=0.05)).verdict == REFUTED
    with pytest.raises(InvalidArgumentError, match=r"refute_within: expected a finite number >= 0, got -0.1"):
        DecisionRule(refute_within=-0.1)
    with pytest.raises(InvalidArgumentError, match=r"control: expected a method other than 'bots'"):
        DecisionRule(control="bots")
    with pytest.raises(InvalidArgumentError, match=r"rule: the control 'mopps' has no runs"):
        decide(rows, DecisionRule(control="mopps"))


def test_evaluation_schedules_that_differ_are_refused() -> None:
    rows = rows_of({"random": [0.3, 0.4]}) + rows_of({"bots": [0.3, 0.4]}, steps=(0, 20))
    message = r"rows: bots seed 10 was evaluated at steps \[0, 20\], random seed 10 at \[0, 10\]"
    with pytest.raises(InvalidArgumentError, match=message):
        decide(rows, DecisionRule())
    with pytest.raises(InvalidArgumentError, match="one evaluation schedule"):
        trial_markdown(rows)


def curves(method: str, seed: int, evals: list[dict[str, Any]], eval_samples: int = 4) -> RunCurves:
    config = {"batch_size": 16, "rollouts": 8, "seed": seed, "eval_samples": eval_samples}
    return RunCurves(method, [{"kind": "config", "config": config}, *({"kind": "eval", **e} for e in evals)])


def test_held_out_csv_round_trip_and_header(tmp_path: Path) -> None:
    groups = {
        "random": [
            curves(
                "random",
                10,
                [
                    {"step": 0, "cum_rollouts": 0, "accuracy": 0.25, "greedy_accuracy": 0.3},
                    {"step": 10, "cum_rollouts": 1280, "accuracy": 1 / 3, "greedy_accuracy": 0.4},
                ],
            )
        ],
        "bots": [
            curves(
                "bots",
                10,
                [
                    {"step": 0, "cum_rollouts": 0, "accuracy": 0.25},  # no greedy evaluation
                    {"step": 10, "cum_rollouts": 1280, "accuracy": 0.375, "greedy_accuracy": 0.45},
                ],
            )
        ],
    }
    path = write_held_out_csv(groups, tmp_path / "held_out.csv")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "method,seed,step,rollouts,avg_at_4,greedy"
    assert lines[1:4] == ["random,10,0,0,0.25,0.3", f"random,10,10,1280,{1 / 3!r},0.4", "bots,10,0,0,0.25,"]
    rows = read_held_out_csv(path)
    assert rows == held_out_rows(groups) and rows[2]["greedy"] is None and rows[1]["avg_at_4"] == 1 / 3
    # Without sampled evaluations the logged accuracy is the greedy one.
    greedy_only = {"random": [curves("random", 3, [{"step": 0, "cum_rollouts": 0, "accuracy": 0.5}], 0)]}
    path = write_held_out_csv(greedy_only, tmp_path / "greedy.csv")
    assert path.read_text(encoding="utf-8") == "method,seed,step,rollouts,greedy\nrandom,3,0,0,0.5\n"
    assert read_held_out_csv(path) == [{"method": "random", "seed": 3, "step": 0, "rollouts": 0, "greedy": 0.5}]
    (tmp_path / "other.csv").write_text("method,seed,step,accuracy\n", encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match="has the header 'method,seed,step,accuracy'; expected"):
        read_held_out_csv(tmp_path / "other.csv")
    (tmp_path / "bad.csv").write_text("method,seed,step,rollouts,greedy\nrandom,3,ten,0,0.5\n", encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match="line 2 is no row: 'random,3,ten,0,0.5'"):
        read_held_out_csv(tmp_path / "bad.csv")
    mixed = {**groups, "mopps": [curves("mopps", 10, [], 2)]}
    with pytest.raises(InvalidArgumentError, match=r"groups: runs evaluated with different eval_samples \[2, 4\]"):
        held_out_rows(mixed)


def test_reference_cost_is_charged_to_the_methods_that_read_them() -> None:
    refs = ReferenceSpec(weak_sft_steps=300, strong_sft_steps=1200, rollouts=8)
    assert reference_cost(refs, 6000) == 96_000
    rows = arms([0.02, 0.03, 0.025, 0.035], [0.01, 0.02, 0.015, 0.012])
    text = trial_markdown(rows, RULE, reads_references={"bots", "reference-filter"}, reference_rollouts=96_000)
    assert "mean held-out avg@4 over its 2 evaluations (steps 0, 10;" in text
    assert "the reference pass rates for bots, reference-filter (96,000 reference rollouts charged to each)" in text
    assert "nothing for random" in text
    # Each run spent 1,280 rollouts (its last evaluation's); bots is charged the references on top.
    assert "| random | own rollouts only | 4 |" in text and "| 1,280 ± 0 | 0 | 1,280 ± 0 |" in text
    assert "| bots | reference pass rates | 4 |" in text and "| 1,280 ± 0 | 96,000 | 97,280 ± 0 |" in text
    assert "| bots − random | 4 | +0.028 ± 0.010 * |" in text
    assert "| bots − reference-filter | 4 |" in text and "| reference-filter − random | 4 |" in text
    assert "Outcome under the rule (avg@4 over the run, the primary metric): bots − random = +0.028 ± 0.010" in text
    assert f"→ bots: {SAVES}; the online part matters." in text
    assert "Secondary (greedy over the run): " in text


def random_run(weak: np.ndarray, strong: np.ndarray, steps: int, rng: np.random.Generator) -> RunCurves:
    """A Random run on a policy whose capability moves from 0.1 to 0.9 between the references:
    each step 16 uniform tasks, 8 rollouts each at p = μ·strong + (1 − μ)·weak."""
    recs: list[dict[str, Any]] = [{"kind": "config", "config": {"batch_size": 16, "rollouts": 8, "seed": 0}}]
    for t in range(steps):
        mu = 0.1 + 0.8 * t / (steps - 1)
        ids = rng.choice(weak.size, 16, replace=False)
        p = mu * strong[ids] + (1 - mu) * weak[ids]
        succ = rng.binomial(8, p).astype(float)
        recs.append(
            {"kind": "train", "step": t + 1, "task_ids": ids.tolist(), "successes": succ.tolist(), "capability": None}
        )
    return RunCurves("random", recs)


def test_shadow_estimator_on_random_batches_finds_informative_references() -> None:
    rng = np.random.default_rng(0)
    weak = rng.uniform(0.0, 0.6, 400) ** 2
    strong = np.clip(weak + rng.uniform(0.0, 0.8, 400), 0.0, 1.0)
    run = random_run(weak, strong, 60, rng)
    q = shadow_evidence_quality(run, weak, strong)
    # Steps whose batch was all effective or all ineffective have no AUC.
    assert q is not None and q["auc"] > 0.6 and q["pearson"] > 0.5 and q["steps"] > 40
    assert 0.5 < q["final_mu"] <= 1.0  # it tracked the capability up
    # References unrelated to the tasks predict nothing.
    shuffled = rng.permutation(400)
    blind = shadow_evidence_quality(run, weak[shuffled], strong[shuffled])
    assert blind is not None and blind["auc"] < q["auc"] - 0.1
    # The run itself logged no μ̃: only the shadow row appears.
    table = evidence_markdown({"random": [run]}, weak, strong, shadow="random")
    assert table is not None and "| shadow on random's batches |" in table and "| random |" not in table
    assert evidence_markdown({"random": [run]}, weak, strong) is None


def test_decision_naming_a_method_not_compared_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft.cli import main

    base = (ROOT / "configs" / "trial_strings_cpu.yaml").read_text(encoding="utf-8")
    cases = (
        (
            base.replace("control: reference-filter", "control: mopps"),
            "compare.decision.control: expected one of the compared methods ['random', 'bots', 'reference-filter'], "
            "got 'mopps'",
        ),
        (
            base.replace("refute_within: 0.005", "refute_within: -1"),
            "compare.decision.refute_within: must be a finite number >= 0, got -1",
        ),
        (
            base.replace("baseline: random", "baseline: bots"),
            "compare.decision.baseline: expected a method other than method (bots), got 'bots'",
        ),
    )
    for i, (text, message) in enumerate(cases):
        assert text != base
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_text(text, encoding="utf-8")
        out = tmp_path / f"out{i}"
        assert main(["compare", "--config", str(cfg), "--out", str(out), "--smoke"]) == 2, message
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert not out.exists()


@pytest.mark.slow
def test_trial_config_at_smoke_size_reports_the_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The pre-registered trial's config with --smoke: held_out.csv, the primary-metric table,
    the reference cost charged and the outcome under its rule (at this size, not a result)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.cli import main

    out = tmp_path / "trial"
    config = str(ROOT / "configs" / "trial_strings_cpu.yaml")
    assert main(["compare", "--config", config, "--smoke", "--out", str(out), "--no-progress"]) == 0
    lines = (out / "held_out.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "method,seed,step,rollouts,avg_at_2,greedy"  # --smoke evaluates avg@2
    rows = read_held_out_csv(out / "held_out.csv")
    assert len(rows) == 3 * 2 * 2  # methods × seeds × evaluations (start and end)
    assert {(r["method"], r["seed"]) for r in rows} == {
        (m, s) for m in ("random", "bots", "reference-filter") for s in (10, 11)
    }
    assert all(r["greedy"] is not None for r in rows)
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "references: 2 × 120 tasks × 2 samples = 480 rollouts, charged to bots, reference-filter." in text
    assert "| bots − reference-filter | 2 |" in text
    outcome = decide(rows, RULE)
    assert f"Outcome under the rule (avg@2 over the run, the primary metric): {outcome.line()}." in text
    assert (
        f"bots compare: outcome under the rule: (smoke run, not a result) {outcome.line()}" in capsys.readouterr().out
    )
