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
