"""`bots scoreboard`: the fair race's matrix (regimes x information x methods x axes), its files,
and the accounting it rests on."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from bots_rft.cli import main
from bots_rft.simulate.experiment import MethodSpec, SimConfig, run_method
from bots_rft.simulate.learner import LearnerConfig, make_world
from bots_rft.simulate.scoreboard import (
    AXES,
    ENTRANTS,
    OURS,
    REGIMES,
    ROUND_LATENCY,
    count_runs,
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


def test_quick_scoreboard_writes_every_file_with_the_documented_columns(quick_run: Path) -> None:
    for name in (
        "scoreboard.csv",
        "paired.csv",
        "scoreboard.md",
        *(f"scoreboard_{i}.png" for i in ("paper", "shared", "none")),
    ):
        assert (quick_run / name).stat().st_size > 0, name
    rows = _rows(quick_run / "scoreboard.csv")
    assert list(rows[0]) == ["regime", "information", "method", "axis", "metric", "mean", "lo", "hi", "seeds"]
    regimes = {r["regime"] for r in rows}
    assert regimes == {r.name for r in REGIMES}
    assert {r["information"] for r in rows} == {"paper", "shared", "none"}
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
