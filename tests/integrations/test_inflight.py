"""The in-flight bookkeeping the asynchronous adapters share (bots_rft.integrations.inflight)."""

from __future__ import annotations

import numpy as np
import pytest

from bots_rft.errors import CheckpointError
from bots_rft.integrations.inflight import InFlight


def test_a_task_in_flight_is_excluded_until_each_of_its_groups_comes_back() -> None:
    blocked = np.array([False, True, False, False])
    f = InFlight(blocked)
    assert f.free == 3 and f.exclusion.tolist() == [False, True, False, False] and len(f) == 0
    f.hand_out(0)
    f.hand_out(0)  # every task in flight: an adapter picks among all of them again
    f.hand_out(2)
    assert f.free == 1 and f.ids().tolist() == [0, 2] and len(f) == 2
    f.come_back([0])
    assert f.exclusion[0] and f.free == 1  # one of its two groups is still out
    f.come_back([0, 2])
    assert f.free == 3 and f.ids().tolist() == [] and not f.exclusion[[0, 2]].any()
    f.come_back([3])  # a group restored from before a resume: nothing was in flight
    assert f.counts[3] == 0 and f.free == 3
    assert f.exclusion[1]  # a blocked task stays excluded whatever comes back
    f.come_back([1])
    assert f.exclusion[1] and f.free == 3


def test_its_state_round_trips_and_a_state_of_another_pool_is_refused() -> None:
    f = InFlight(np.zeros(5, dtype=bool))
    for t in (1, 1, 4):
        f.hand_out(t)
    g = InFlight(np.zeros(5, dtype=bool))
    g.load(f.state())
    assert g.counts.tolist() == [0, 2, 0, 0, 1] and g.free == 3 and g.exclusion.tolist() == f.exclusion.tolist()
    with pytest.raises(CheckpointError, match="has 3 tasks, this sampler 5"):
        g.load(np.zeros(3, dtype=np.int64))
    assert g.counts.tolist() == [0, 2, 0, 0, 1]  # nothing changed
    g.clear()
    assert len(g) == 0 and g.free == 5
