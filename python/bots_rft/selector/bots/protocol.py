"""The contract every BOTS backend keeps (:class:`PosteriorSelector`): what a trainer or an
integration may call on a BOTS selector whichever backend holds its posterior. It extends
:class:`bots_rft.selector.protocol.Selector`, what every task-selection method provides."""

from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from ..._validation import FloatArray, IntArray
from ..plan import Plan
from ..protocol import Selector
from .base import Picks
from .state import ParamsOnLoad


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
