"""Tasks in flight: handed to a trainer whose groups have not come back yet.

An asynchronous trainer (verl's replay buffer, TRL's async GRPO) asks for the next task before
the rollouts of the last ones are scored. A task already in flight is kept out of the next picks,
so the selector does not spend two groups on what it has not yet learned about; when every
selectable task is in flight the adapter picks among all of them rather than stall the trainer.
:class:`InFlight` keeps that count per task, with the tasks that can never be picked (no dataset
row) always excluded, and how many stay free, so an adapter never scans the pool to learn it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import CheckpointError

__all__ = ["InFlight"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class InFlight:
    """Groups in flight per task, over a pool of ``len(blocked)`` tasks, ``blocked`` (e.g. tasks
    with no dataset row) never selectable."""

    def __init__(self, blocked: BoolArray) -> None:
        self.blocked = np.asarray(blocked, dtype=bool).copy()
        self.counts: IntArray = np.zeros(self.blocked.size, dtype=np.int64)
        self._excluded = self.blocked.copy()
        self._free = int(np.count_nonzero(~self._excluded))

    def hand_out(self, task: int) -> None:
        """One more group of ``task`` is in flight."""
        self.counts[task] += 1
        self._set(task)

    def come_back(self, tasks: Iterable[int]) -> None:
        """One group of each listed task came back (listed twice: two groups); a task with none
        in flight (a group restored from before a resume) stays at zero."""
        for task in tasks:
            if self.counts[task] > 0:
                self.counts[task] -= 1
            self._set(task)

    def _set(self, task: int) -> None:
        excluded = bool(self.blocked[task] or self.counts[task] > 0)
        self._free += int(self._excluded[task]) - int(excluded)
        self._excluded[task] = excluded

    @property
    def exclusion(self) -> BoolArray:
        """The tasks a pick must skip: blocked or in flight (the live mask; do not modify)."""
        return self._excluded

    @property
    def free(self) -> int:
        """How many tasks a pick may choose (neither blocked nor in flight)."""
        return self._free

    def ids(self) -> IntArray:
        """The tasks with a group in flight."""
        return np.flatnonzero(self.counts > 0).astype(np.int64)

    def __len__(self) -> int:
        return int(np.count_nonzero(self.counts))

    def clear(self) -> None:
        """Nothing in flight (groups of an earlier run never come back)."""
        self.load(np.zeros_like(self.counts))

    def state(self) -> IntArray:
        """The counts, for a checkpoint."""
        return self.counts.copy()

    def load(self, counts: Any) -> None:
        """Counts from :meth:`state`, checked against this pool's size."""
        arr = np.asarray(counts, dtype=np.int64)
        if arr.shape != self.counts.shape:
            raise CheckpointError(f"state: has {arr.size} tasks, this sampler {self.counts.size}")
        self.counts = arr.copy()
        self._excluded = self.blocked | (self.counts > 0)
        self._free = int(np.count_nonzero(~self._excluded))
