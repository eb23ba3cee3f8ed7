"""The evidence and the pool are parameters of a selector's state: a checkpoint records which
implicit evidence (estimator kind, hash of its reference arrays) and which pool of task ids its
posterior was learnt on, and load_state_dict refuses a differing one unless params= says which
wins (issue 45: a checkpoint used to swap, add or drop the run's references silently)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from bots_rft.checkpoint import load_state
from bots_rft.errors import CheckpointError, DataError
from bots_rft.estimators import MultiReference
from bots_rft.selector.bots.state import evidence_identity, pool_fingerprint

N = 12
WEAK = np.linspace(0.0, 0.8, N)
STRONG = np.clip(WEAK + 0.2, 0.0, 1.0)
DATA = Path(__file__).parents[1] / "data"


def _trained(evidence: object = None, pool: object = None) -> BOTS:
    sel = BOTS(N, evidence=evidence, seed=3)
    if pool is not None:
        sel.set_pool(pool)
    for step in range(3):
        ids = sel.select(4)
        sel.update(ids, (np.arange(4) + step) % 5, 4)
    return sel


def test_state_records_the_evidence_and_the_pool(tmp_path: Path) -> None:
    sel = _trained(Interpolation(WEAK, STRONG), pool=range(N))
    identity = sel.state_dict()["identity"]
    assert identity["evidence"]["kind"] == "interpolation" and len(identity["evidence"]["sha256"]) == 16
    assert identity["pool"] == pool_fingerprint(range(N)) == sel.pool
    # Through a file and a pickle too.
    sel.save(tmp_path / "s.bots")
    assert load_state(tmp_path / "s.bots")["identity"] == identity
    assert BOTS.load(tmp_path / "s.bots").pool == sel.pool
    assert pickle.loads(pickle.dumps(sel)).identity == identity
    assert _trained().state_dict()["identity"] == {"evidence": None, "pool": None}


def test_the_pool_fingerprint_ignores_row_order_not_ids() -> None:
    assert pool_fingerprint([3, 1, 2]) == pool_fingerprint(np.array([1, 2, 3]))
    assert pool_fingerprint([1, 2, 3]) != pool_fingerprint([1, 2, 4])


@pytest.mark.parametrize(
    ("mine", "theirs", "named"),
    [
        (None, Interpolation(WEAK, STRONG), "evidence: none here, interpolation"),  # the checkpoint would add it
        (Interpolation(WEAK, STRONG), None, "evidence: interpolation"),  # ... or drop the run's own
        (Interpolation(WEAK[::-1], STRONG), Interpolation(WEAK, STRONG), "evidence: interpolation (references"),
        (MultiReference(np.stack([WEAK, STRONG], 1)), Interpolation(WEAK, STRONG), "evidence: multi-reference"),
    ],
)
def test_differing_evidence_is_refused_unless_params_says_which_wins(mine: object, theirs: object, named: str) -> None:
    state = _trained(theirs).state_dict()
    sel = BOTS(N, evidence=mine, seed=3)
    before = sel.state_dict()
    with pytest.raises(CheckpointError, match="params='checkpoint'") as info:
        sel.load_state_dict(state)
    assert named in str(info.value)
    np.testing.assert_array_equal(sel.alpha, before["alpha"])  # nothing changed
    assert sel.identity["evidence"] == evidence_identity(before["evidence"])

    took = BOTS(N, evidence=mine, seed=3)
    took.load_state_dict(state, params="checkpoint")
    assert took.identity["evidence"] == state["identity"]["evidence"]
    np.testing.assert_array_equal(took.alpha, state["alpha"])

    kept = BOTS(N, evidence=mine, seed=3)
    kept.load_state_dict(state, params="current")
    assert kept.identity["evidence"] == evidence_identity(before["evidence"])
    assert kept.evidence is mine
    np.testing.assert_array_equal(kept.alpha, state["alpha"])


def test_the_same_evidence_loads_with_its_capability() -> None:
    state = _trained(Interpolation(WEAK, STRONG)).state_dict()
    sel = BOTS(N, evidence=Interpolation(WEAK.copy(), STRONG.copy()), seed=3)
    sel.load_state_dict(state)
    assert sel.capability == state["evidence"]["capability"] is not None


def test_another_pool_is_refused_and_an_unbound_side_is_no_difference() -> None:
    state = _trained(pool=range(N)).state_dict()
    other = BOTS(N, seed=3)
    other.set_pool(range(1, N + 1))
    with pytest.raises(CheckpointError, match="pool: task ids .* in the state"):
        other.load_state_dict(state)
    other.load_state_dict(state, params="checkpoint")
    assert other.pool == pool_fingerprint(range(1, N + 1))  # bound to its own pool still
    unbound = BOTS(N, seed=3)
    unbound.load_state_dict(state)
    assert unbound.pool == state["identity"]["pool"]
    # ... and then refuses to be bound to another pool.
    with pytest.raises(DataError, match=r"extra_info.index: this pool \(12 task ids"):
        unbound.set_pool(range(1, N + 1), source="extra_info.index")
    unbound.set_pool(reversed(range(N)))  # the same pool, rows in another order


def test_a_legacy_checkpoint_without_the_records_still_loads() -> None:
    # tests/data/legacy_selector.bots: written before identity existed (interpolation evidence).
    state = load_state(DATA / "legacy_selector.bots")
    assert "identity" not in state
    weak, strong = state["evidence"]["weak"], state["evidence"]["strong"]
    n = int(state["num_tasks"])
    sel = BOTS(n, evidence=Interpolation(weak, strong), seed=42)
    sel.set_pool(range(n))
    sel.load_state_dict(state, params="current")  # its priors are per task; the evidence is the same
    assert sel.num_updates == state["num_updates"] and sel.pool == pool_fingerprint(range(n))
    assert BOTS.load(DATA / "legacy_selector.bots").pool is None
    with pytest.raises(CheckpointError, match="evidence: none here"):
        BOTS(n, seed=42).load_state_dict(state, params="error")
