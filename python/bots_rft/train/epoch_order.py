"""DAPO's data-loader order as a task selector: the generation batches of ``method=dynamic``.

DAPO (Yu et al., 2025) walks its training set in epochs, a fresh random permutation each, and
hands out the next tasks in that order; dynamic sampling then filters them on their rollouts (the
fill loop in :mod:`.trainer`). :class:`EpochOrder` is that walk, with the selector interface the
trainer gives every method (``select`` / ``update`` / ``state_dict``), so the trainer's fill loop
draws its generation batches from it as it does from BOTS.

It draws exactly as :class:`bots_rft.baselines.DynamicSampling` does without a proposer (same
seed, same permutations), and reads that class's checkpointed state, so a ``method=dynamic``
run checkpointed by a trainer that used it resumes on the same task order."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["EpochOrder"]

IdArray = npt.NDArray[np.int64]
# The state kind of DynamicSampling (no proposer), whose epoch walk this is.
_DYNAMIC_SAMPLING_KIND = "dynamic_sampling"


class EpochOrder:
    """The next tasks of a walk over the pool in epochs, a fresh permutation each.

    Unlike other selectors, :meth:`select` hands out *up to* ``batch_size`` tasks: fewer when
    fewer are selectable, as a data loader hands out what is left."""

    kind = "epoch_order"

    def __init__(self, num_tasks: int, *, seed: int = 0) -> None:
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, int):
            raise InvalidTypeError(f"num_tasks must be an int, got {num_tasks!r}", "num_tasks")
        if num_tasks <= 0:
            raise InvalidArgumentError(f"num_tasks must be > 0, got {num_tasks!r}", "num_tasks")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidArgumentError(f"seed must be an int >= 0, got {seed!r}", "seed")
        self.num_tasks = num_tasks
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._perm: IdArray = self._rng.permutation(num_tasks).astype(np.int64)
        self._cursor = 0

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        """The next ``batch_size`` tasks not in ``exclude`` (a boolean mask over the pool), in
        epoch order; fewer when fewer are left. Crossing the end of the permutation starts a new
        epoch with a fresh permutation."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise InvalidArgumentError(f"batch_size must be > 0, got {batch_size!r}", "batch_size")
        mask = np.ones(self.num_tasks, dtype=bool)
        if exclude is not None:
            excluded = np.asarray(exclude)
            if excluded.dtype != np.bool_ or excluded.shape != (self.num_tasks,):
                raise InvalidArgumentError(
                    f"exclude must be a boolean mask of {self.num_tasks} tasks, got {excluded.dtype} {excluded.shape}",
                    "exclude",
                )
            mask = ~excluded
        out: list[IdArray] = []
        need = int(batch_size)
        for _ in range(2):  # one epoch boundary at most: a draw never repeats a task
            rest = self._perm[self._cursor :]
            ok = np.flatnonzero(mask[rest])[:need]
            out.append(rest[ok])
            need -= ok.size
            if need == 0:
                self._cursor += int(ok[-1]) + 1
                break
            mask = mask.copy()
            mask[rest[ok]] = False  # no task twice in one draw across the boundary
            self._perm = self._rng.permutation(self.num_tasks).astype(np.int64)
            self._cursor = 0
        return np.concatenate(out).astype(np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """The order ignores outcomes; the feedback is still checked for shape."""
        ids, succ = np.asarray(task_ids), np.asarray(successes)
        if ids.ndim != 1 or succ.shape != ids.shape:
            raise InvalidArgumentError(
                f"task_ids and successes must be 1-D of one length, got {ids.shape} and {succ.shape}", "successes"
            )
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_tasks):
            raise InvalidArgumentError(f"task_ids must lie in [0, {self.num_tasks}), got {ids.tolist()}", "task_ids")

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "num_tasks": self.num_tasks, "seed": self.seed,
                "rng": self._rng.bit_generator.state, "perm": self._perm.copy(), "cursor": self._cursor}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output, or the state of a ``DynamicSampling`` without a
        proposer (the same walk, as checkpointed before the trainer filled batches itself)."""
        if not isinstance(state, dict):
            raise InvalidTypeError(f"state must be a dict, got {type(state).__name__}", "state")
        kind = state.get("kind")
        if kind not in (self.kind, _DYNAMIC_SAMPLING_KIND):
            raise InvalidArgumentError(f"state is for a {kind!r} selector, not {self.kind!r}", "state")
        if kind == _DYNAMIC_SAMPLING_KIND and state.get("proposer") is not None:
            raise InvalidArgumentError("state: a dynamic-sampling state with a proposer is not an epoch order", "state")
        if state.get("num_tasks") != self.num_tasks:
            raise InvalidArgumentError(f"state is for {state.get('num_tasks')!r} tasks, this order has {self.num_tasks}", "state")
        try:
            perm = np.asarray(state["perm"], dtype=np.int64)
            cursor = int(state["cursor"])
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"state is malformed: {exc}", "state") from exc
        if perm.shape != (self.num_tasks,) or not 0 <= cursor <= self.num_tasks:
            raise InvalidArgumentError("state has an invalid permutation or cursor", "state")
        self._perm, self._cursor, self._rng = perm, cursor, rng
        self.seed = int(state.get("seed", self.seed))
