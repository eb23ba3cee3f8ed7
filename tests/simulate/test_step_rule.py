"""The step-rule fit against real runs (``bots_rft.report.step_rule``): it recovers the rule
that made synthetic runs, and reads real run logs."""

from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

import numpy as np
import pytest

from bots_rft.errors import InvalidArgumentError
from bots_rft.report.step_rule import Candidate, RunSignal, fit_markdown, fit_step_rule, run_signal
from bots_rft.report.training import load_run

EVALS = np.arange(0, 101, 10)


def _runs(arm: str, rule: Candidate, signal: float, batch: int, seeds: int, noise: float) -> list[RunSignal]:
    rng = np.random.default_rng(zlib.crc32(arm.encode()))
    out = []
    for _ in range(seeds):
        s = np.clip(rng.normal(signal, 0.5, 100), 0.0, None)
        b = np.full(100, float(batch))
        cum = np.concatenate([[0.0], np.cumsum(rule.units(s, b))])
        gain = 0.002 * float(np.mean(cum[EVALS[1:]])) + rng.normal(0.0, noise)
        out.append(RunSignal(arm, s, b, EVALS.astype(np.float64), gain))
    return out


@pytest.mark.parametrize("truth", [Candidate("linear"), Candidate("saturating", 4.0)])
def test_the_fit_recovers_the_rule_that_made_the_runs(truth: Candidate) -> None:
    arms = {
        "batch8": _runs("batch8", truth, 2.3, 8, 10, 1e-4),
        "diluted": _runs("diluted", truth, 2.3, 16, 10, 1e-4),  # same signal, twice the groups
        "richer": _runs("richer", truth, 4.0, 16, 10, 1e-4),  # more signal
    }
    fits = fit_step_rule(arms, "batch8")
    assert fits[0].candidate == truth
    assert fits[0].scale == pytest.approx(0.002, rel=0.05)
    table = fit_markdown(arms, "batch8", fits)
    assert "linear (S / B)" in table and "saturating, K = 4" in table


def test_linear_halves_a_diluted_arm_and_saturating_does_not() -> None:
    s, b8, b16 = np.full(100, 2.0), np.full(100, 8.0), np.full(100, 16.0)
    assert Candidate("linear").units(s, b16).sum() == pytest.approx(0.5 * Candidate("linear").units(s, b8).sum())
    for k in (0.0, 4.0, math.inf):
        assert np.array_equal(Candidate("saturating", k).units(s, b16), Candidate("saturating", k).units(s, b8))


def test_run_signal_reads_a_run_log(tmp_path: Path) -> None:
    recs = [{"kind": "config", "config": {"rollouts": 4, "batch_size": 2}}]
    recs.append({"kind": "eval", "step": 0, "accuracy": 0.5})
    recs.append({"kind": "train", "step": 1, "task_ids": [3, 7], "successes": [2, 4]})
    recs.append({"kind": "eval", "step": 1, "accuracy": 0.6})
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    got = run_signal("a", load_run("a", tmp_path))
    assert got.signal.tolist() == [1.0]  # 4 * 0.5 * 0.5 + 4 * 1 * 0 = 1
    assert got.batch.tolist() == [2.0]
    assert got.gain == pytest.approx(0.1)
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs[:3]) + "\n")
    with pytest.raises(InvalidArgumentError, match="step-0 evaluation and one after it"):
        run_signal("a", load_run("a", tmp_path))


def test_fit_needs_the_reference_arm() -> None:
    with pytest.raises(InvalidArgumentError, match="reference"):
        fit_step_rule({"a": _runs("a", Candidate("linear"), 2.0, 8, 2, 0.0)}, "b")


def _fake_run(directory: Path, seed: int, batch: int, gain: float) -> None:
    """A finished run's log: 4 steps of ``batch`` tasks x 8 rollouts, evaluations at 0, 2, 4."""
    rng = np.random.default_rng(seed * 100 + batch)
    recs: list[dict[str, object]] = [{"kind": "config", "config": {"steps": 4, "rollouts": 8, "batch_size": batch}}]
    recs.append({"kind": "eval", "step": 0, "accuracy": 0.40})
    for step in range(1, 5):
        succ = rng.integers(0, 9, batch).tolist()
        recs.append({"kind": "train", "step": step, "task_ids": list(range(batch)), "successes": succ})
        if step % 2 == 0:
            recs.append({"kind": "eval", "step": step, "accuracy": 0.40 + gain * step / 4 + rng.normal(0, 0.002)})
    directory.mkdir(parents=True)
    (directory / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")


@pytest.mark.slow
def test_calibrate_simulator_runs_end_to_end_at_smoke_size(tmp_path: Path) -> None:
    import subprocess
    import sys

    for seed in range(3):
        _fake_run(tmp_path / "dilution" / "batch8" / f"seed{seed}", seed, 8, 0.02)
        _fake_run(tmp_path / "dilution" / "batch16_filled" / f"seed{seed}", seed, 16, 0.02)
        _fake_run(tmp_path / "trial" / "random" / f"seed{seed}", seed, 16, 0.04)
        _fake_run(tmp_path / "trial" / "bots" / f"seed{seed}", seed + 10, 16, 0.05)
    script = Path(__file__).parents[2] / "examples" / "trial" / "calibrate_simulator.py"
    cmd = [sys.executable, str(script), "--trial", str(tmp_path / "trial"), "--dilution", str(tmp_path / "dilution")]
    done = subprocess.run([*cmd, "--out", str(tmp_path / "out"), "--smoke"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    text = (tmp_path / "out" / "calibration.md").read_text()
    assert "(smoke run, not a result)" in text and "linear (S / B)" in text
    record = json.loads((tmp_path / "out" / "calibration.json").read_text())
    assert record["dilution"] == {"batch8": 3, "batch16_filled": 3} and len(record["predictions"]) >= 1
    bad = subprocess.run(
        [*cmd[:3], str(tmp_path / "nowhere"), *cmd[4:], "--out", str(tmp_path / "o2")], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "--trial: no directory" in bad.stderr
    assert not (tmp_path / "o2").exists()
