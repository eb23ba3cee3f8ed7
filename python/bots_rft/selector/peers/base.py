"""The machinery every selector that rolls out itself shares
(:class:`bots_rft.selector.protocol.RollsOut`).

A subclass implements two hooks:

- ``_roll_step(batch_size, allowed)``: choose tasks, roll them out through :meth:`_roll` (which
  validates the callback's answer and counts every rollout), and return the step's
  :class:`~bots_rft.selector.protocol.RolledBatch` (the groups to train on, with their own trials,
  and every rollout spent) plus the groups it wants to learn from at :meth:`update` (usually every
  group it rolled out, the discarded ones included);
- ``_learn(task_ids, successes, trials)``: update its state from those groups;

and, for checkpoints, ``_extra_state()`` / ``_load_extra_state(state)``. :class:`SelfRolling` does
the rest the same way for every peer: argument checks with the package's typed errors, rollback of
a selection whose rollout callback failed, the hand-over through :meth:`take_batch`, feedback
checks, and the common part of the state dict (pool size, seed, random stream, rollouts spent).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..._validation import as_int, feedback, selectable
from ..._validation import batch_size as _check_batch
from ...errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from ...parameters import SEED
from ..protocol import RolledBatch, check_state

__all__ = ["SelfRolling", "Groups", "IdArray", "FloatArray", "restore_rng", "check_state", "saved_array", "prior_rates"]

IdArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
Groups = tuple[IdArray, FloatArray, FloatArray]


def restore_rng(state: Any) -> np.random.Generator:
    """A generator at a saved ``bit_generator.state`` (a malformed one is a CheckpointError)."""
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = state
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"state: has an invalid rng entry ({exc})") from exc
    return rng


def saved_array(state: dict[str, Any], key: str, shape: tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
    """``state[key]`` as an array of ``shape`` and ``dtype``, or a CheckpointError naming the key."""
    try:
        arr = np.array(state[key], dtype=dtype)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"state: has a malformed {key!r} entry ({exc})") from exc
    if arr.shape != shape:
        raise CheckpointError(f"state: {key!r} has shape {arr.shape}, expected {shape}")
    return arr


def prior_rates(prior: npt.ArrayLike, num_tasks: int) -> FloatArray:
    """Per-task success-rate estimates given before any rollout (NaN: unknown), checked: one per
    task, each in [0, 1] or NaN."""
    rates = np.array(prior, dtype=np.float64)
    if rates.shape != (num_tasks,):
        raise InvalidArgumentError(f"prior: expected {num_tasks} pass rates, got shape {rates.shape}", "prior")
    known = rates[~np.isnan(rates)]
    if np.any((known < 0) | (known > 1)):
        raise InvalidArgumentError(
            f"prior: pass rates must lie in [0, 1] or be NaN, got min {known.min()}, max {known.max()}", "prior"
        )
    return rates


class SelfRolling:
    """Base of the selectors that roll out inside :meth:`select` (see the module docstring)."""

    kind = "self_rolling"

    def __init__(self, num_tasks: int, rollout: Any, *, seed: int = SEED.default) -> None:
        self.num_tasks = as_int(num_tasks, "num_tasks", minimum=1)
        if not callable(rollout):
            raise InvalidTypeError(f"rollout: must be callable, got {rollout!r}", "rollout")
        self.rollout = rollout
        self.seed = SEED.check(seed)
        self._rng = np.random.default_rng(self.seed)
        #: Every rollout generated, summed over all selections (screening and discards included).
        self.total_rollouts = 0
        self._spent = 0  # rollouts of the selection in progress
        self._pending: RolledBatch | None = None
        self._to_learn: Groups | None = None

    # ----------------------------------------------------------------------------- hooks
    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        raise NotImplementedError

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        raise NotImplementedError

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        return None

    # ----------------------------------------------------------------------------- rolling out
    def _roll(self, task_ids: IdArray, counts: npt.ArrayLike) -> FloatArray:
        """Roll out ``task_ids[i]`` ``counts[i]`` times through the callback; the successes, checked.
        Every rollout is charged to the selection in progress."""
        ids = np.asarray(task_ids, dtype=np.int64)
        k = np.broadcast_to(np.asarray(counts, dtype=np.int64), ids.shape).copy()
        if ids.size == 0:
            return np.zeros(0, dtype=np.float64)
        succ = np.asarray(self.rollout(ids, k), dtype=np.float64)
        if succ.shape != ids.shape:
            raise InvalidArgumentError(f"rollout: returned shape {succ.shape} for {ids.size} tasks", "rollout")
        if np.any(~np.isfinite(succ)) or np.any(succ < 0) or np.any(succ > k):
            raise InvalidArgumentError("rollout: returned successes outside [0, counts]", "rollout")
        self._spent += int(k.sum())
        return succ

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        """Roll out this step's tasks and return the ids to train on (:meth:`take_batch` has the rest)."""
        allowed = selectable(exclude, self.num_tasks)
        available = self.num_tasks if allowed is None else int(allowed.sum())
        b = _check_batch(batch_size, available)
        saved = self.state_dict()  # a failing rollout callback must leave the selector as it was
        self._spent = 0
        try:
            batch, to_learn = self._roll_step(b, allowed)
        except BaseException:
            self.load_state_dict(saved)
            raise
        self.total_rollouts += self._spent
        self._pending, self._to_learn = batch, to_learn
        return batch.task_ids.copy()

    def take_batch(self) -> RolledBatch | None:
        """The last selection's batch (its groups, their trials, and the rollouts it cost), once."""
        pending, self._pending = self._pending, None
        return pending

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """Checks the feedback; then learns from every group the last selection rolled out (the
        trained ones and those it discarded), with the outcomes the rollout callback returned."""
        ids, _, _ = feedback(task_ids, successes, trials, self.num_tasks)
        if self._to_learn is None:
            raise InvalidArgumentError("update: no selection is waiting for feedback", "task_ids")
        rolled = self._to_learn[0]
        stray = ids[~np.isin(ids, rolled)]
        if stray.size:
            raise InvalidArgumentError(
                f"task_ids: task {int(stray[0])} was not rolled out by the last selection", "task_ids"
            )
        groups, self._to_learn = self._to_learn, None
        self._learn(*groups)

    # ----------------------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "rng": self._rng.bit_generator.state,
            "total_rollouts": self.total_rollouts,
            **self._extra_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        rng = restore_rng(st.get("rng"))
        try:
            total = int(st["total_rollouts"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has a malformed rollout count ({exc})") from exc
        self._load_extra_state(st)  # checks (and raises) before the common part changes
        self._rng, self.total_rollouts = rng, total
        self.seed = int(st.get("seed", self.seed))
        self._pending = self._to_learn = None
