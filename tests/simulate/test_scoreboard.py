"""`bots scoreboard`: the fair race's matrix (regimes x information x methods x axes), its files,
and the accounting it rests on."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bots_rft.cli import main
from bots_rft.report.scoreboard import where_bots_loses
from bots_rft.simulate.experiment import MethodSpec, SimConfig, run_method
from bots_rft.simulate.fitted import FITTED_FROM, FITTED_LEARNER
from bots_rft.simulate.learner import LINEAR_LEARNING_RATE, LearnerConfig, make_world
from bots_rft.simulate.scoreboard import (
    AXES,
    ENTRANTS,
    GENERATION,
    OURS,
    REGIMES,
    ROUND_LATENCY,
    SCOREBOARD_INFORMATION,
    SCOREBOARD_LEARNER,
    ScoreboardConfig,
    ScoreboardResult,
    count_runs,
    reference_charge,
    reference_rollouts,
    run_axis,
    run_scoreboard,
    scoreboard_config,
    wall_clock,
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scoreboard") / "sb"
    assert main(["scoreboard", "--out", str(out), "--quick", "--no-progress"]) == 0
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_quick_scoreboard_writes_every_file_with_the_documented_columns(quick_run: Path) -> None:
    for name in (
        "scoreboard.csv",
        "paired.csv",
        "scoreboard.md",
        *(f"scoreboard_{i}.png" for i in ("paper", "shared", "none", "charged")),
    ):
        assert (quick_run / name).stat().st_size > 0, name
    rows = _rows(quick_run / "scoreboard.csv")
    assert list(rows[0]) == ["regime", "information", "method", "axis", "metric", "mean", "lo", "hi", "seeds"]
    regimes = {r["regime"] for r in rows}
    assert regimes == {r.name for r in REGIMES}
    assert {r["information"] for r in rows} == set(SCOREBOARD_INFORMATION) == {"paper", "shared", "none", "charged"}
    assert {r["axis"] for r in rows} == set(AXES)
    # Random against itself is exactly 1 on every axis, with all seeds.
    for r in rows:
        if r["method"] == "Random" and r["metric"] in ("ttb_100", "bsf_100"):
            assert float(r["mean"]) == pytest.approx(1.0) and r["seeds"] == "3", r
        if r["mean"]:
            assert float(r["lo"]) <= float(r["mean"]) <= float(r["hi"]), r
    # AdaRFT needs the references: it has no row where nobody gets them.
    assert not [r for r in rows if r["method"] == "AdaRFT" and r["information"] == "none"]
    paired = _rows(quick_run / "paired.csv")
    columns = ["regime", "information", "method", "peer", "axis", "metric", "mean", "lo", "hi", "seeds", "verdict"]
    assert list(paired[0]) == columns
    assert {p["method"] for p in paired} == set(OURS)
    for ours in OURS:  # each of ours against every other row
        assert {p["peer"] for p in paired if p["method"] == ours} == {e.label for e in ENTRANTS} - {ours}
    assert {p["verdict"] for p in paired} <= {"ahead", "behind", "level", "n/a"}
    md = (quick_run / "scoreboard.md").read_text()
    assert "bots scoreboard --out" in md and "## Information: none" in md and "per modelled wall-clock" in md
    assert "## Information: charged" in md and "## Where BOTS loses" in md and "## Caveats" in md
    # The header states the fitted step rule, its parameters and what they were fitted to.
    assert f"step_rule = {FITTED_LEARNER.step_rule}" in md and FITTED_FROM in md
    assert f"trajectory_noise = {FITTED_LEARNER.trajectory_noise:g}" in md
    # The charge of each regime, with its numbers (the quick paper-54k pool: 2,720 tasks).
    assert "paper-54k: 2 × 2,720 × 16 = 87,040 rollouts = 8.5 × Random's budget of 20 × 32 × 16 = 10,240" in md


@pytest.mark.slow
def test_charged_rows_are_the_paper_runs_on_charged_axes(quick_run: Path) -> None:
    """Under "charged", a row that read no references has exactly its "paper" numbers; one that
    did keeps its per-step numbers, and where its charge exceeds Random's whole rollout budget
    (the quick paper-54k pool: 8.5x) it has no score within that budget."""
    rows = {
        (r["regime"], r["information"], r["method"], r["axis"], r["metric"]): r
        for r in _rows(quick_run / "scoreboard.csv")
    }
    readers = {e.label for e in ENTRANTS if e.charged("charged")}
    assert readers == {"BOTS", "BOTS-Screen", "BOTS-Screen 4x", "AdaRFT"}
    for (regime, info, label, axis, metric), row in rows.items():
        if info != "charged":
            continue
        paper = rows[(regime, "paper", label, axis, metric)]
        if label not in readers or axis == "step":
            assert row | {"information": "paper"} == paper, row
    bsf = rows[("paper-54k", "charged", "BOTS", "rollout", "bsf_100")]
    assert bsf["seeds"] == "0" and bsf["mean"] == ""
    ttb = rows[("paper-54k", "charged", "BOTS", "rollout", "ttb_100")]
    assert ttb["seeds"] == "0" or float(ttb["mean"]) > 8.5  # never before its charge
    paired = [
        p
        for p in _rows(quick_run / "paired.csv")
        if (p["regime"], p["information"], p["method"], p["peer"], p["axis"], p["metric"])
        == ("paper-54k", "charged", "BOTS", "Random", "rollout", "bsf_100")
    ]
    assert len(paired) == 1 and paired[0]["seeds"] == "0" and paired[0]["verdict"] == "n/a"


def test_charged_axis_is_the_paper_axis_shifted_by_the_reference_cost() -> None:
    """Exactly: a row that read the references starts its rollout axis at 2 x tasks x ref_rollouts
    rollouts (in batch x n units) and its wall-clock at their generation cost; the rest, and every
    per-step axis, are the "paper" axes. "charged" adds no run."""
    regime = scoreboard_config(quick=True).regimes[4]  # noisy-refs: 4 rollouts per reference
    labels = {"Random", "BOTS", "GRESO", "DPS", "AdaRFT"}
    config = ScoreboardConfig(
        regimes=(regime,),
        entrants=tuple(e for e in ENTRANTS if e.label in labels),
        information=("paper", "charged"),
        seeds=(0, 1),
    )
    paper_only = ScoreboardConfig(
        regimes=config.regimes, entrants=config.entrants, information=("paper",), seeds=(0, 1)
    )
    assert count_runs(config) == count_runs(paper_only) == len(labels) * 2
    result = run_scoreboard(config)
    unit = regime.batch_size * regime.learner.n_rollouts
    rollouts = reference_rollouts(regime.learner)
    assert rollouts == 2 * regime.learner.num_tasks * 4
    charge = {
        "step": 0.0,
        "rollout": rollouts / unit,
        "wallclock": 0.35 * math.ceil(rollouts / unit) + 0.35 * rollouts / unit,
    }
    for entrant in config.entrants:
        for seed in config.seeds:
            key = result.keys[(regime.name, "charged", entrant.label)]
            assert key == result.keys[(regime.name, "paper", entrant.label)]
            rec = result.runs[(regime.name, key, seed)]
            for axis in AXES:
                assert reference_charge(regime, axis) == pytest.approx(charge[axis], abs=1e-12)
                paper, charged = (
                    run_axis(regime, "paper", entrant, rec, axis),
                    run_axis(regime, "charged", entrant, rec, axis),
                )
                reads = entrant.label in ("BOTS", "AdaRFT")
                shift = reference_charge(regime, axis) if reads else 0.0
                assert np.array_equal(charged, paper + shift) if shift else np.array_equal(charged, paper), (
                    entrant.label,
                    axis,
                )
    # The full paper-54k regime's charge, as the brief states it: 4.25 x Random's rollouts.
    full = REGIMES[0]
    assert reference_rollouts(full.learner) == 2 * 54_400 * 16 == 1_740_800
    assert reference_charge(full, "rollout") / full.steps == pytest.approx(4.25)
    assert reference_charge(full, "wallclock") == pytest.approx(425 * ROUND_LATENCY + 425 * GENERATION)


def test_the_fitted_settings_reach_the_scoreboard_learner() -> None:
    """Every regime but "linear-rule" runs the fitted learner; "linear-rule" the old one."""
    fitted = FITTED_LEARNER.settings()
    assert {k: SCOREBOARD_LEARNER[k] for k in fitted} == fitted
    assert SCOREBOARD_LEARNER["group_noise"] == 4.0 and SCOREBOARD_LEARNER["repeat_decay"] == 1.0
    for quick in (False, True):
        for regime in scoreboard_config(quick=quick).regimes:
            learner = regime.learner
            if regime.name == "linear-rule":
                assert learner.step_rule == "linear" and learner.trajectory_noise == 0.0
                assert learner.learning_rate == LINEAR_LEARNING_RATE and learner.num_tasks in (7_500, 400)
            else:
                assert {k: getattr(learner, k) for k in fitted} == fitted, regime.name
    assert "linear-rule" in {r.name for r in REGIMES}


def test_changing_the_fitted_file_changes_the_scoreboard() -> None:
    """The scoreboard reads bots_rft.simulate.fitted at import: other values there give other
    regimes and another header line."""
    code = (
        "import bots_rft.simulate.fitted as f\n"
        "f.FITTED_LEARNER = f.FittedLearner(step_rule='linear', saturation_k=2.0, trajectory_noise=0.125, "
        "learning_rate=0.03)\n"
        "f.FITTED_FROM = 'a test fit'\n"
        "from bots_rft.simulate.scoreboard import REGIMES\n"
        "from bots_rft.report.scoreboard import _learner_line\n"
        "c = REGIMES[0].learner\n"
        "print(c.step_rule, c.saturation_k, c.trajectory_noise, c.learning_rate)\n"
        "print(_learner_line())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "linear 2.0 0.125 0.03"
    assert "a test fit" in out[1] and "step_rule = linear" in out[1] and "trajectory_noise = 0.125" in out[1]


def _paired_row(regime: str, info: str, peer: str, axis: str, verdict: str, seeds: int = 2) -> dict[str, object]:
    return dict(
        regime=regime, information=info, method="BOTS", peer=peer, axis=axis, metric="bsf_100",
        mean=0.0, lo=0.0, hi=0.0, seeds=seeds, verdict=verdict,
    )  # fmt: skip


def _bsf_row(regime: str, info: str, method: str, axis: str, seeds: int) -> dict[str, object]:
    return dict(regime=regime, information=info, method=method, axis=axis, metric="bsf_100", seeds=seeds)


def test_where_bots_loses_lists_the_cells_it_is_behind() -> None:
    """The text is computed from the paired results: a cell made behind is listed, one where BOTS
    has no score within Random's budget (charged) is marked, and BOTS without references against
    SPEED-RL is said behind, level, or neither."""
    regimes = (replace(REGIMES[3], name="drift"), replace(REGIMES[1], name="math-7.5k"))
    config = ScoreboardConfig(regimes=regimes, information=("paper", "none", "charged"), seeds=(0, 1))
    result = ScoreboardResult(config, {})
    result.paired = [
        _paired_row("drift", "paper", "GRESO", "rollout", "behind"),
        _paired_row("math-7.5k", "paper", "GRESO", "step", "ahead"),
        _paired_row("math-7.5k", "charged", "Random", "rollout", "n/a", seeds=0),
        _paired_row("drift", "none", "SPEED-RL 1x", "wallclock", "level"),
        _paired_row("drift", "none", "SPEED-RL 4x", "step", "ahead"),
    ]
    result.rows = [
        _bsf_row("math-7.5k", "charged", "BOTS", "rollout", 0),
        _bsf_row("math-7.5k", "charged", "Random", "rollout", 2),
    ]
    text = "\n".join(where_bots_loses(result))
    assert "**GRESO**: BOTS behind in 1 cell: per rollout: drift (paper)." in text
    assert "**Random**: BOTS behind in 1 cell: per rollout: math-7.5k (charged ▽)." in text
    assert "BOTS is behind a row in 2 of 5 " in text
    assert "**SPEED-RL 1x**, of 1 (regime, axis) cells: level in 1 (per wall-clock: drift); ahead in 0." in text
    assert "**SPEED-RL 4x**, of 1 (regime, axis) cells: behind or level in none; ahead in 1." in text
    assert "BOTS-Screen 4x (like SPEED-RL 4x) trains on screening rollouts generated several steps" in text
    assert "`drift` regime, TTB measures only the steps before the drop" in text
    result.paired = result.paired[1:2]
    result.rows = []
    text = "\n".join(where_bots_loses(result))
    assert "BOTS is behind no row in any of the 1 (row, regime, information, axis) cells." in text


@pytest.mark.slow
def test_paired_differences_are_bots_against_the_same_seeds(quick_run: Path) -> None:
    """Where every seed reached it, the paired mean is the difference of the two rows' means."""
    rows = {
        (r["regime"], r["information"], r["method"], r["axis"], r["metric"]): r
        for r in _rows(quick_run / "scoreboard.csv")
    }
    checked = 0
    for p in _rows(quick_run / "paired.csv"):
        if p["metric"] != "bsf_100" or p["seeds"] != "3":
            continue
        key = (p["regime"], p["information"])
        bots = rows[(*key, p["method"], p["axis"], "bsf_100")]
        peer = rows[(*key, p["peer"], p["axis"], "bsf_100")]
        assert float(p["mean"]) == pytest.approx(float(bots["mean"]) - float(peer["mean"]), abs=1e-9)
        checked += 1
    assert checked > 100


def test_each_information_setting_runs_once_per_distinct_reading() -> None:
    """Methods that read no references run once for all three settings; BOTS, DPS and Knapsack-RL
    run with and without them."""
    cfg = scoreboard_config(quick=True)
    per_regime = count_runs(cfg) // len(cfg.regimes) // len(cfg.seeds)
    assert per_regime == len(ENTRANTS) + 5  # BOTS and both BOTS-Screens without, DPS and Knapsack-RL with
    keys = {e.label: {e.spec(i).key for i in ("paper", "shared", "none") if e.runs_under(i)} for e in ENTRANTS}
    assert len(keys["BOTS"]) == len(keys["BOTS-Screen"]) == len(keys["DPS"]) == len(keys["Knapsack-RL"]) == 2
    assert len(keys["GRESO"]) == len(keys["Random"]) == len(keys["AdaRFT"]) == 1


def test_wall_clock_charges_each_generation_round() -> None:
    """A plain GRPO step costs 1; a step of k sequential rounds pays the fixed latency k times; a
    step that only trains (SPEED-RL's queue) pays only training."""
    world = make_world(LearnerConfig(num_tasks=400, eval_tasks=64, num_groups=2), 0)
    config = SimConfig(learner=world.config, steps=6, batch_size=16, seeds=(0,), methods=("random",))
    unit = 16.0 * 16
    plain = run_method(MethodSpec("random"), world, 0, config)
    assert np.allclose(np.diff(wall_clock(plain, unit)), 1.0)
    dapo = run_method(MethodSpec("dynamic", extra=(("oversample", 1.0),)), world, 0, config)
    steps = np.diff(wall_clock(dapo, unit))
    expected = ROUND_LATENCY * dapo.rounds + 0.35 * dapo.rollouts / unit + 0.30 * dapo.trained / unit
    assert np.allclose(steps, expected) and np.all(steps[dapo.rounds > 1] > 1.0)
    speed = run_method(MethodSpec("speed", extra=(("gen_ratio", 8.0),)), world, 0, config)
    idle = speed.rounds == 0
    assert idle.any() and np.allclose(np.diff(wall_clock(speed, unit))[idle], 0.30)
    assert not math.isnan(float(wall_clock(speed, unit)[-1]))
