"""The estimator interface: the selector talks to every estimator of implicit evidence through
`Estimator` (observe / commit / predict_all / state_dict), so a new estimator needs no change in
the selector."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, CheckpointError, Estimator, Interpolation, StepEvidence, _core
from bots_rft.errors import InvalidArgumentError

N = 50


class RunningMean(Estimator):
    """A second estimator: predicts every task at the running mean success rate of past batches."""

    def __init__(self) -> None:
        self.mean: float | None = None
        self.observed = 0

    def observe(self, batch: _core.Batch) -> StepEvidence:
        rate = float(np.sum(batch.successes) / np.sum(batch.trials))
        mean = rate if self.mean is None else 0.5 * (self.mean + rate)
        return StepEvidence({"predicted": np.full(N, mean)}, mean)

    def commit(self, step: StepEvidence) -> None:
        self.mean = step.next_state
        self.observed += 1

    def predict_all(self) -> Any:
        return None if self.mean is None else np.full(N, self.mean)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": "running-mean", "mean": self.mean, "observed": self.observed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean, self.observed = state["mean"], state["observed"]


def test_a_new_estimator_plugs_in_through_the_interface() -> None:
    est = RunningMean()
    sel = BOTS(N, evidence=est, lam=0.0, rho=0.5, n_rollouts=4)
    sel.update([0, 1], [4, 0], 4)  # rate 0.5: every other task gets rho*n*0.5 = 1 of each
    assert est.mean == 0.5 and est.observed == 1
    np.testing.assert_allclose(sel.alpha[2:], 2.0)
    np.testing.assert_allclose(sel.beta[2:], 2.0)
    assert sel.predicted() is not None and sel.evidence is est


def test_a_rejected_update_does_not_commit() -> None:
    est = RunningMean()
    sel = BOTS(N, evidence=est)
    with pytest.raises(InvalidArgumentError):
        sel.update([0, N], [1, 1], 4)
    assert est.observed == 0


def test_checkpoints_of_a_custom_estimator_need_the_object(tmp_path: Path) -> None:
    est = RunningMean()
    sel = BOTS(N, evidence=est, seed=3)
    sel.update([0, 1], [3, 1], 4)
    sel.save(tmp_path / "s.bots")
    with pytest.raises(CheckpointError, match="custom estimator"):
        BOTS.load(tmp_path / "s.bots")
    fresh = RunningMean()
    back = BOTS.load(tmp_path / "s.bots", evidence=fresh)
    assert fresh.mean == est.mean and back.evidence is fresh
    assert np.array_equal(back.select(5), sel.select(5))
    copy = pickle.loads(pickle.dumps(sel))  # the object travels with the pickle
    assert isinstance(copy.evidence, RunningMean) and copy.evidence.mean == est.mean


def test_interpolation_and_a_plain_plugin_go_through_the_same_interface() -> None:
    weak = np.linspace(0, 0.5, N)
    a = BOTS(N, evidence=Interpolation(weak, weak + 0.4), seed=1)

    class Plain:  # only predict(): the ImplicitEvidence protocol
        def predict(self, ids: Any, successes: Any, trials: Any) -> Any:
            return np.full(N, 0.25)

    b = BOTS(N, evidence=Plain(), seed=1)
    for sel in (a, b):
        sel.update([0, 1, 2], [1, 2, 3], 4)
        assert sel.state_dict()["evidence"]["kind"] in ("interpolation", "custom")
    assert a.capability is not None and b.capability is None


def test_the_selector_has_no_special_case_for_an_estimator() -> None:
    import bots_rft.selector as package

    # Every module of the selector package (the torch and sharded backends know the interpolation
    # estimator by design: one caches its references on the device, the other supports no other).
    files = list(Path(package.__file__).parent.glob("*.py"))
    calls = [
        node
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
    ]
    named = {ast.unparse(c.args[1]) for c in calls}
    assert not named & {"Interpolation", "ImplicitEvidence", "Estimator"}, named


def test_a_zero_min_gap_is_refused_where_it_is_given() -> None:
    """min_gap = 0 would let a batch whose two reference means are equal (both references 0 on it,
    common with a weak reference) divide by zero; the selector then failed at its next read, after
    the update had been taken. Every estimator that takes the gap refuses 0 when it is built."""
    weak, strong = [0.3] * 4, [0.3] * 4
    with pytest.raises(InvalidArgumentError, match=r"^min_gap: must lie in \(0, 1\), got 0\.0$"):
        Interpolation(weak, strong, min_gap=0.0)
    from bots_rft.estimators import MultiReference

    with pytest.raises(InvalidArgumentError, match=r"^min_gap: must lie in \(0, 1\), got 0$"):
        MultiReference(np.array([weak, strong]).T, min_gap=0)
    # The smallest gap allowed still skips such a batch: no estimate, nothing infinite.
    sel = BOTS(4, evidence=Interpolation(weak, strong), seed=1)
    ids = sel.select(2)
    sel.update(ids, [3, 1], [8, 8])
    assert sel.capability is None and np.isfinite(sel.mean()).all()
