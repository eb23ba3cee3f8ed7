"""What every task selector provides, and how a selector that rolls out itself hands its batch over.

- :class:`Selector`: what a trainer (or ``bots simulate``) needs from any task selector:
  :class:`~bots_rft.BOTS`, the selectors of :mod:`bots_rft.selector.static` and the peers of
  :mod:`bots_rft.selector.peers` all satisfy it;
- :func:`check_state`: the check every selector's :meth:`Selector.load_state_dict` starts with.

**Selectors that roll out themselves** (:class:`RollsOut`). A method whose table entry has
``rolls_out=True`` gets a rollout callback and spends rollouts inside :meth:`Selector.select`:
screening rollouts, oversampled generation batches, refills, or a number of rollouts chosen per
task. The callback is ``rollout(task_ids)`` (:data:`RolloutFn`; ``n_rollouts`` each) or, for a
selector that chooses the counts, ``rollout(task_ids, counts)`` (:data:`CountedRolloutFn`;
``counts[i]`` rollouts of task i). After ``select`` the caller takes the step's
:class:`RolledBatch` with :meth:`RollsOut.take_batch`: the groups to train on, their successes
**and** trials (one per task, which may differ), and every rollout the selection generated, the
discarded ones included. The caller trains on that batch, charges ``rollouts`` to the budget, and
feeds the batch back with ``update(task_ids, successes, trials)``. This is how the simulator runs
every such method (the peers of :mod:`bots_rft.selector.peers` and any planner that allocates rollouts per
task), so each is charged for every rollout it generates. DAPO's dynamic sampling
(:class:`bots_rft.selector.peers.dapo.DynamicSampling`) predates the protocol and hands its batch over
through ``take_rollouts`` and ``total_rollouts`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._validation import as_int
from ..errors import CheckpointError, InvalidArgumentError

__all__ = [
    "Selector",
    "RolloutFn",
    "CountedRolloutFn",
    "RolledBatch",
    "RollsOut",
    "check_num_tasks",
    "check_state",
]

IdArray = npt.NDArray[np.int64]
#: ``rollout(task_ids) -> successes``: rolls out each task n times, returns success counts.
RolloutFn = Callable[[IdArray], npt.NDArray[Any]]
#: ``rollout(task_ids, counts) -> successes``: rolls out task ``task_ids[i]`` ``counts[i]`` times.
CountedRolloutFn = Callable[[IdArray, npt.NDArray[np.int64]], npt.NDArray[Any]]


@dataclass(frozen=True)
class RolledBatch:
    """One step of a selector that rolls out itself (:class:`RollsOut`): the groups to train on
    and what generating them cost.

    ``task_ids``, ``successes`` and ``trials`` have one entry per trained task; ``trials[i]`` is
    the number of rollouts behind ``successes[i]`` (tasks may differ). ``rollouts`` counts every
    rollout the step generated, each charged once, in the step that generated it: more than
    ``trials.sum()`` when screening rollouts, filtered groups or refills were spent on tasks it does
    not train on; possibly fewer when it trains on groups rolled out in an earlier step and queued
    (SPEED-RL's qualified prompts), which that step was charged for."""

    task_ids: IdArray
    successes: npt.NDArray[np.float64]
    trials: npt.NDArray[np.float64]
    rollouts: int

    def __post_init__(self) -> None:
        n = self.task_ids.shape
        if self.successes.shape != n or self.trials.shape != n:
            raise InvalidArgumentError(
                f"task_ids, successes, trials: shapes differ ({n}, {self.successes.shape}, {self.trials.shape})",
                "successes",
            )
        if self.rollouts < 0:
            raise InvalidArgumentError(f"rollouts: must be >= 0, got {self.rollouts}", "rollouts")


@runtime_checkable
class RollsOut(Protocol):
    """A selector that rolls out inside :meth:`Selector.select` (module docstring): after each
    ``select`` the step's :class:`RolledBatch` is taken once with :meth:`take_batch`."""

    def take_batch(self) -> RolledBatch | None:
        """The last selection's batch (its groups and the rollouts it cost), once; then None."""
        ...


@runtime_checkable
class Selector(Protocol):
    """An online task selector: pick a batch, learn from its rollouts, checkpoint."""

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        """``batch_size`` distinct task ids to roll out next (``exclude``: ids or a bool mask)."""
        ...

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """Feed back the successes out of ``trials`` of each rolled-out task."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this selector is."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`."""
        ...


def check_num_tasks(num_tasks: object) -> int:
    """``num_tasks`` as a pool size (an int >= 1), or the package's typed error naming it."""
    return as_int(num_tasks, "num_tasks", minimum=1)


def check_state(state: object, kind: str, num_tasks: int) -> dict[str, Any]:
    """A state dict of this kind of selector over ``num_tasks`` tasks. A state that does not fit
    is a :class:`CheckpointError`, as for BOTS."""
    if not isinstance(state, dict):
        raise CheckpointError(f"state: must be a dict, got {type(state).__name__}")
    if state.get("kind") != kind:
        raise CheckpointError(f"state: is for a {state.get('kind')!r} selector, not {kind!r}")
    if state.get("num_tasks") != num_tasks:
        raise CheckpointError(f"state: has num_tasks={state.get('num_tasks')!r}, this selector {num_tasks}")
    return state
