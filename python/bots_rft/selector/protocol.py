"""What every task selector provides, and how a selector that rolls out itself hands its batch over.

- :class:`Selector`: what a trainer (or ``bots simulate``) needs from any task selector:
  :class:`~bots_rft.BOTS`, the selectors of :mod:`bots_rft.selector.static` and the peers of
  :mod:`bots_rft.selector.peers` all satisfy it;
- :func:`check_state`: the check every selector's :meth:`Selector.load_state_dict` starts with.
- :class:`PosteriorSelector`: the contract every BOTS backend keeps, extending
  :class:`Selector`: what a trainer or an integration may call on a BOTS selector whichever
  backend holds its posterior; and the types its methods return or take (:class:`Plan`,
  :class:`Picks`, :data:`ParamsOnLoad`).

- :func:`selectable`, :func:`check_batch_size` and :func:`check_feedback`: the argument checks
  every selector's ``select`` and ``update`` start with (the package's typed errors, naming the
  argument).

**Selectors that roll out themselves** (:class:`RollsOut`). A method whose rollout mode is not
``plain`` (:class:`bots_rft.selector.registry.RolloutMode`) gets a rollout callback and spends
rollouts inside :meth:`Selector.select`:
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

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from .._validation import FloatArray, IntArray, as_int, selectable
from .._validation import batch_size as check_batch_size
from .._validation import feedback as check_feedback
from ..errors import CheckpointError, InvalidArgumentError

__all__ = [
    "Selector",
    "RolloutFn",
    "CountedRolloutFn",
    "RolledBatch",
    "RollsOut",
    "check_num_tasks",
    "check_state",
    "selectable",
    "check_batch_size",
    "check_feedback",
    "PosteriorSelector",
    "Plan",
    "Picks",
    "ParamsOnLoad",
]

IdArray = npt.NDArray[np.int64]
#: ``rollout(task_ids) -> successes``: rolls out each task n times, returns success counts.
RolloutFn = Callable[[IdArray], npt.NDArray[Any]]
#: ``rollout(task_ids, counts) -> successes``: rolls out task ``task_ids[i]`` ``counts[i]`` times.
CountedRolloutFn = Callable[[IdArray, npt.NDArray[np.int64]], npt.NDArray[Any]]


# How load_state_dict resolves a state whose parameters differ from the selector's.
ParamsOnLoad = Literal["error", "checkpoint", "current"]


class Plan(NamedTuple):
    """A plan: the tasks to roll out (best first, as :meth:`~bots_rft.BOTS.select` ranks them)
    and how many rollouts each gets (``counts[i]`` for ``ids[i]``)."""

    ids: IntArray
    counts: IntArray

    @property
    def rollouts(self) -> int:
        """Rollouts the plan spends (never more than its budget)."""
        return int(self.counts.sum())


class Picks(NamedTuple):
    """One selection's picks with what was drawn and why (:meth:`BOTS.explain`).

    ``theta``: each pick's sampled success rate (its Thompson draw, as the core computed it in
    float32) or its posterior mean (``thompson=False``); ``score``: −|θ − p*|, what the rule
    ranks by (with ``tau`` > 0 the rule samples from softmax(score / τ)); ``alpha``/``beta``: the
    posterior the draw came from; ``predicted``: the estimator's p̃ (NaN: none)."""

    ids: IntArray
    theta: FloatArray
    score: FloatArray
    alpha: FloatArray
    beta: FloatArray
    predicted: FloatArray


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


@runtime_checkable
class PosteriorSelector(Selector, Protocol):
    """A :class:`~bots_rft.selector.protocol.Selector` holding a Beta posterior per task: a BOTS
    selector on any backend: :class:`~bots_rft.BOTS` on the Rust core
    (``backend="rust"``) or on torch (``backend="torch"``), and
    :class:`~bots_rft.selector.backends.sharded.ShardedBOTS` (a pool over Ray actors). Each takes the same
    arguments, raises the same errors for the same bad input, and writes and reads one
    checkpoint layout, so a run can move between them.

    Beyond this contract, each backend says what it does not provide:

    - the task stream (``take``, ``release``, ``in_flight``) is BOTS's on the Rust core; the torch
      backend raises :class:`~bots_rft.errors.UnsupportedByBackendError` for it, and
      ``ShardedBOTS`` has none;
    - ``alpha``/``beta`` (the whole pool), ``mean`` and ``predicted`` are BOTS's (both
      backends); ``ShardedBOTS`` has none (use :meth:`posterior` for some tasks, or
      :meth:`state_dict`);
    - ``load_state_dict`` restores a selector in place on both BOTS backends; ``ShardedBOTS``
      raises :class:`~bots_rft.errors.UnsupportedByBackendError` and is rebuilt from a state with
      ``ShardedBOTS.from_state_dict`` (its shards are new actors).

    ``load`` (a classmethod) reads a checkpoint on every backend, with the backend's own options.
    """

    @property
    def num_tasks(self) -> int: ...

    @property
    def num_selections(self) -> int: ...

    @property
    def num_updates(self) -> int: ...

    @property
    def params(self) -> MappingProxyType[str, Any]: ...

    @property
    def capability(self) -> float | None: ...

    @property
    def rho_in_use(self) -> float: ...

    @property
    def lam_in_use(self) -> float: ...

    def __len__(self) -> int: ...

    def set_params(self, **changes: Any) -> None:
        """Change parameters between steps (validated before any is applied)."""
        ...

    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """The ``batch_size`` tasks nearest the target, best first, ties to the lower id."""
        ...

    def plan(self, rollout_budget: int, n_min: int, n_max: int, exclude: Any = None) -> Plan:
        """Tasks and a rollout count for each under ``rollout_budget``."""
        ...

    def explain(self, task_ids: Any) -> Picks:
        """What the last selection drew for ``task_ids`` and why."""
        ...

    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        """(α, β) of the given tasks."""
        ...

    def update(
        self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None, *, policy_lag: Any = None
    ) -> None:
        """Fold one step's rollout results into the posterior."""
        ...

    def update_rewards(
        self,
        task_ids: Any,
        rewards: Any,
        *,
        reward_range: tuple[float, float] | None = None,
        success_threshold: float | None = None,
        policy_lag: Any = None,
    ) -> None:
        """``update`` from a reward matrix."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, in the one checkpoint layout."""
        ...

    def load_state_dict(self, state: dict[str, Any], *, params: ParamsOnLoad = "error") -> None:
        """Restore a :meth:`state_dict`; ``params`` says whose parameters win if they differ."""
        ...

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically."""
        ...

    def close(self) -> None:
        """Finish any work in flight."""
        ...
