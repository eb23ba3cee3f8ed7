"""Batches diluted with known zero-variance tasks: the dilution test of how GRPO's progress per
step depends on a batch's share of informative groups.

A group whose rollouts all agree has zero GRPO advantage, so it adds nothing to the gradient but
still counts in the loss's mean. If a step's progress were linear in the batch-mean signal (the
simplest learner model), a batch of B informative groups plus B such fillers would learn half as
fast per step as the B groups alone; AdamW's normalised update predicts about the same speed.
:class:`FilledSelector` builds the diluted arm: each batch is the method's own selection of
``batch_size - filler_tasks`` tasks, then ``filler_tasks`` drawn uniformly (without replacement,
never a task the method picked) from a fixed set of tasks the starting policy always solves. The
method's random stream is untouched (the fillers draw from their own), so Random at batch 8 and
Random at batch 16 with 8 fillers pick the same tasks, seed for seed.

The trainer builds it from ``filler_tasks``, ``filler_column`` and ``filler_min_rate``: the fillers
are the tasks whose ``filler_column`` pass rate is at least ``filler_min_rate`` (1.0: every
sample of the measured policy solved them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import CheckpointError, InvalidArgumentError

__all__ = ["FilledSelector"]

_FORMAT = "bots-rft/filled-batches"
IntArray = npt.NDArray[np.int64]


class FilledSelector:
    """``selector``'s batches with ``filler_tasks`` tasks of ``fillers`` appended (module
    docstring). Updates go to the selector whole, fillers included: they are real evidence."""

    def __init__(self, selector: Any, fillers: Any, filler_tasks: int, *, seed: int = 0) -> None:
        self.selector = selector
        self.num_tasks = int(selector.num_tasks)
        ids = np.unique(np.asarray(fillers, dtype=np.int64))
        if ids.size and (ids[0] < 0 or ids[-1] >= self.num_tasks):
            raise InvalidArgumentError(f"fillers: task ids must lie in [0, {self.num_tasks})", "fillers")
        if filler_tasks < 1:
            raise InvalidArgumentError(f"filler_tasks: must be >= 1, got {filler_tasks}", "filler_tasks")
        self.fillers: IntArray = ids
        self.filler_tasks = int(filler_tasks)
        # Seeded apart from the selector's own stream, so the method's picks do not move.
        self._rng = np.random.default_rng([int(seed), 0xF111])

    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        own = int(batch_size) - self.filler_tasks
        if own < 1:
            raise InvalidArgumentError(
                f"batch_size: must exceed filler_tasks={self.filler_tasks}, got {batch_size}", "batch_size"
            )
        picks = np.asarray(self.selector.select(own, exclude=exclude), dtype=np.int64)
        free = np.setdiff1d(self.fillers, picks)
        if exclude is not None:
            free = np.setdiff1d(free, np.asarray(exclude, dtype=np.int64))
        if free.size < self.filler_tasks:
            raise InvalidArgumentError(
                f"filler_tasks: {self.filler_tasks} fillers a batch, but only {free.size} filler tasks are free",
                "filler_tasks",
            )
        extra = np.sort(self._rng.choice(free, size=self.filler_tasks, replace=False))
        return np.concatenate([picks, extra]).astype(np.int64)

    def update(self, task_ids: Any, successes: Any, trials: Any, *args: Any, **kwargs: Any) -> None:
        self.selector.update(task_ids, successes, trials, *args, **kwargs)

    def state_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": 1,
            "filler_tasks": self.filler_tasks,
            "fillers": self.fillers.copy(),
            "rng": self._rng.bit_generator.state,
            "selector": self.selector.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise CheckpointError("state: not a bots-rft filled-batches state")
        fillers = np.asarray(state.get("fillers"), dtype=np.int64).reshape(-1)
        if state.get("filler_tasks") != self.filler_tasks or not np.array_equal(fillers, self.fillers):
            raise CheckpointError("state: its fillers differ from this run's (filler_tasks / filler_column)")
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has an invalid rng entry ({exc})") from exc
        self.selector.load_state_dict(state["selector"])
        self._rng = rng
