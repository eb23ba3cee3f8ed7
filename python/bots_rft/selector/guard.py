"""Starvation and verifier-failure guard over groups of tasks (a pool's source or category).

A group whose tasks all score 0 looks, to any selector, exactly like a group that is too hard: its
posteriors sink toward 0, the rule stops picking it, and it starves silently. Often the cause is
not difficulty but a format or verifier mismatch (a dataset whose answers are boxed differently,
a checker that never matches). :class:`GroupGuard` wraps a selector with per-task group labels and

- **detects** a group whose rolled-out tasks have scored 0 in every one of its last
  ``zero_streak`` updates that included it (at least ``zero_streak`` updates, every rollout a
  failure), **warns once** naming the group (:class:`AllZeroGroupWarning`), and keeps it in
  :attr:`GroupGuard.flagged` for loggers (``bots/all_zero_groups``);
- **keeps a minimum exploration share** per group: each batch holds at least
  ``ceil(min_share × B)`` tasks (:meth:`GroupGuard.quota`) of every group that has that many
  selectable, so no group
  starves however its posterior looks. The selector's own picks come first; a group short of its
  share gets its best tasks by the selector's rule (a selection restricted to the group), and the
  batch drops its lowest-ranked picks from groups above their share to stay at B.

Its counters are part of :meth:`GroupGuard.state_dict`, beside the selector's state, so a resumed
run warns, flags and fills exactly as the uninterrupted one.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

from .._validation import as_int, as_real, exclusion
from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError

__all__ = ["GroupGuard", "AllZeroGroupWarning"]

IntArray = npt.NDArray[np.int64]
_FORMAT = "bots-rft/group-guard"


class AllZeroGroupWarning(UserWarning):
    """A group's tasks have all scored 0 for a while: a verifier or format mismatch, or truly too
    hard (see :class:`GroupGuard`)."""


class GroupGuard:
    """A selector (BOTS or any with ``select(batch_size, exclude=)`` and ``update``) with
    per-group starvation detection and a minimum exploration share (module docstring).

    ``groups``: one label per task (strings or ints: a source, a category); ``min_share`` in
    [0, 1 / number of groups]: the least share of each batch per group (0: no floor);
    ``zero_streak`` ≥ 1: updates in a row, each with the group's rollouts all failures, that flag
    the group."""

    def __init__(self, selector: Any, groups: Any, *, min_share: float = 0.0, zero_streak: int = 3) -> None:
        labels = np.asarray(groups)
        if labels.ndim != 1:
            raise InvalidTypeError(f"groups: must be one label per task (1-D), got shape {labels.shape}", "groups")
        n = int(selector.num_tasks)
        if labels.size != n:
            raise InvalidArgumentError(f"groups: has {labels.size} labels, the selector has {n} tasks", "groups")
        names, codes = np.unique(labels, return_inverse=True)
        self.selector = selector
        self.names: list[str] = [str(x) for x in names.tolist()]
        self._codes: IntArray = codes.astype(np.int64)
        self._sizes = np.bincount(self._codes, minlength=len(self.names))
        share = as_real(min_share, "min_share")
        if not (0.0 <= share <= 1.0 / len(self.names)):
            raise InvalidArgumentError(
                f"min_share: must be in [0, 1/{len(self.names)}] for {len(self.names)} groups, got {min_share!r}",
                "min_share",
            )
        self.min_share = share
        self.zero_streak = as_int(zero_streak, "zero_streak", minimum=1)
        g = len(self.names)
        # Per group: updates in a row whose rollouts of the group all failed, and whether warned.
        self._streak = np.zeros(g, dtype=np.int64)
        self._warned = np.zeros(g, dtype=bool)

    @property
    def num_tasks(self) -> int:
        return int(self._codes.size)

    @property
    def flagged(self) -> list[str]:
        """The groups flagged as all-zero (and warned about), in label order."""
        return [name for name, w in zip(self.names, self._warned) if w]

    def group_of(self, task_ids: Any) -> list[str]:
        """The group label of each task."""
        return [self.names[c] for c in self._codes[np.asarray(task_ids, dtype=np.int64)]]

    def quota(self, batch_size: int) -> int:
        """The least number of tasks per group in a batch of ``batch_size``: ceil(min_share × B),
        at most B // (number of groups) so that every group's floor fits in the batch."""
        if self.min_share == 0:
            return 0
        return min(math.ceil(self.min_share * batch_size - 1e-9), batch_size // len(self.names))

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """The selector's batch with every group at its minimum share (module docstring)."""
        b = as_int(batch_size, "batch_size", minimum=0)
        picks = np.asarray(self.selector.select(b, exclude=exclude), dtype=np.int64)
        q = self.quota(b)
        if q == 0 or b == 0:
            return picks
        mask, ids = exclusion(exclude, self.num_tasks)
        blocked = np.zeros(self.num_tasks, dtype=bool)
        if mask is not None:
            blocked |= mask
        elif ids is not None:
            blocked[ids] = True
        selectable = np.bincount(self._codes[~blocked], minlength=len(self.names))
        counts = np.bincount(self._codes[picks], minlength=len(self.names))
        want = np.minimum(q, selectable)
        extra: list[IntArray] = []
        taken = blocked.copy()
        taken[picks] = True
        for g in np.flatnonzero(counts < want):
            # The group's best tasks by the selector's own rule: a selection restricted to it.
            others = taken | (self._codes != g)
            extra.append(np.asarray(self.selector.select(int(want[g] - counts[g]), exclude=others), dtype=np.int64))
        if not extra:
            return picks
        added = np.concatenate(extra)
        # Make room: drop the lowest-ranked picks of groups above their floor.
        surplus = counts - want
        keep = np.ones(picks.size, dtype=bool)
        to_drop = added.size
        for i in range(picks.size - 1, -1, -1):
            if to_drop == 0:
                break
            g = self._codes[picks[i]]
            if surplus[g] > 0:
                keep[i] = False
                surplus[g] -= 1
                to_drop -= 1
        return np.concatenate([picks[keep], added])

    # ----------------------------------------------------------------------------- evidence
    def update(self, task_ids: Any, successes: Any, trials: Any, *args: Any, **kwargs: Any) -> None:
        """The selector's update, then the groups' all-zero streaks (and the one-time warning)."""
        self.selector.update(task_ids, successes, trials, *args, **kwargs)
        self._observe(task_ids, successes, stacklevel=4)

    def observe(self, task_ids: Any, successes: Any) -> list[str]:
        """Count one update's evidence toward the all-zero streaks without updating the selector
        (for loops that update it themselves); returns the groups flagged by it."""
        return self._observe(task_ids, successes, stacklevel=4)

    def _observe(self, task_ids: Any, successes: Any, *, stacklevel: int) -> list[str]:
        ids = np.asarray(task_ids, dtype=np.int64).reshape(-1)
        succ = np.asarray(successes, dtype=np.float64).reshape(-1)
        if ids.size != succ.size:
            raise InvalidArgumentError(f"successes: has {succ.size} entries, task_ids {ids.size}", "successes")
        g = len(self.names)
        seen = np.bincount(self._codes[ids], minlength=g) > 0
        scored = np.bincount(self._codes[ids], weights=succ, minlength=g) > 0
        self._streak[seen & scored] = 0
        self._streak[seen & ~scored] += 1
        newly = np.flatnonzero((self._streak >= self.zero_streak) & ~self._warned)
        for code in newly:
            self._warned[code] = True
            warnings.warn(
                f"group {self.names[code]!r}: every rollout of its tasks scored 0 in the last "
                f"{int(self._streak[code])} updates that included it. A format or verifier mismatch "
                "looks exactly like 'too hard'; check this group's answers against its reward function.",
                AllZeroGroupWarning,
                stacklevel=stacklevel,
            )
        return [self.names[c] for c in newly]

    def metrics(self, prefix: str = "bots/") -> dict[str, float]:
        """``<prefix>all_zero_groups``: how many groups are flagged."""
        return {f"{prefix}all_zero_groups": float(self._warned.sum())}

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "version": 1,
            "names": list(self.names),
            "min_share": self.min_share,
            "zero_streak": self.zero_streak,
            "streak": self._streak.copy(),
            "warned": self._warned.copy(),
            "selector": self.selector.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise CheckpointError("state: not a bots-rft group guard state")
        if list(state.get("names", [])) != self.names:
            raise CheckpointError("state: its groups differ from this guard's")
        try:
            streak = np.asarray(state["streak"], dtype=np.int64).reshape(-1)
            warned = np.asarray(state["warned"], dtype=bool).reshape(-1)
            min_share, zero_streak = float(state["min_share"]), int(state["zero_streak"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: malformed group guard state ({type(exc).__name__}: {exc})") from None
        if streak.size != len(self.names) or warned.size != len(self.names):
            raise CheckpointError("state: its counters do not match the groups")
        self.selector.load_state_dict(state["selector"])
        self._streak, self._warned = streak, warned
        self.min_share, self.zero_streak = min_share, zero_streak
