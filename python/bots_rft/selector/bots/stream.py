"""The bookkeeping of selections made ahead of time: a speculation (the selection the next
``select`` is expected to ask for, ranked in the background with the last update's pass) and the
task stream of ``take``/``release`` (draws, the tasks in flight, what one call skips), with the
stream's checkpoint layout."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._validation import IntArray, as_int, ids_in_pool
from ...errors import CheckpointError, InvalidArgumentError

# At most this many tasks beyond the batch size are ranked ahead of time to absorb exclusions.
_MAX_SPECULATIVE_EXTRA = 65_536


@dataclass(eq=False)
class _Speculation:
    """A selection computed ahead of time for the `select` expected next."""

    k: int  # tasks ranked
    counter: int
    target: float
    thompson: bool
    tau: float
    seed: int
    candidates: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    kth: float = math.inf


@dataclass(eq=False)
class _Draw:
    """One draw of `take`: a ranking of `k` tasks from which at most `quota` are handed out."""

    k: int  # tasks ranked
    counter: int
    quota: int
    candidates: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    kth: float = math.inf
    cursor: int = 0  # next rank to look at
    handed: int = 0
    # Tasks in flight when the draw was made or handed out since: the draw's ranking of them
    # predates evidence that is on its way, so it never hands them out.
    blocked: set[int] = field(default_factory=set)
    _ranked: list[int] | None = None

    def left(self) -> int:
        return self.quota - self.handed

    def exhausted(self) -> bool:
        return self.handed >= self.quota or self.cursor >= len(self.candidates)

    def hand_out(self, n: int, skip: _Skip) -> list[int]:
        """Up to ``n`` tasks, best first, none skipped; marks them in flight."""
        if self._ranked is None:
            self._ranked = self.candidates.tolist()
        ranked, out = self._ranked, list[int]()
        while len(out) < n and self.handed < self.quota and self.cursor < len(ranked):
            task = ranked[self.cursor]
            self.cursor += 1
            if task not in self.blocked and not skip.skips(task):
                skip.in_flight.add(task)
                out.append(task)
                self.handed += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "counter": self.counter,
            "quota": self.quota,
            "candidates": np.asarray(self.candidates, dtype=np.int64).copy(),
            "kth": self.kth,
            "cursor": self.cursor,
            "handed": self.handed,
            "blocked": np.array(sorted(self.blocked), dtype=np.int64),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], n: int) -> _Draw:
        candidates = _stored_ids(state, "candidates", n)
        draw = cls(
            as_int(state["k"], "k", minimum=0),
            as_int(state["counter"], "counter", minimum=0),
            as_int(state["quota"], "quota", minimum=1),
            candidates,
            float(state["kth"]),
        )
        draw.cursor = as_int(state["cursor"], "cursor", minimum=0, maximum=candidates.size)
        draw.handed = as_int(state["handed"], "handed", minimum=0, maximum=draw.quota)
        draw.blocked = set(_stored_ids(state, "blocked", n).tolist())
        return draw


class _Skip:
    """The tasks one `take` call may not hand out: those in flight and those it excludes."""

    def __init__(self, in_flight: set[int], mask: np.ndarray | None, ids: np.ndarray | None) -> None:
        self.in_flight = in_flight
        self._mask = mask
        self._ids: set[int] = set(ids.tolist()) if ids is not None else set()

    def skips(self, task: int) -> bool:
        if task in self.in_flight or task in self._ids:
            return True
        return bool(self._mask[task]) if self._mask is not None else False

    def count(self) -> int:
        """How many distinct tasks are skipped (O(pool size) for a mask)."""
        if self._mask is not None:
            return int(np.count_nonzero(self._mask)) + sum(1 for t in self.in_flight if not self._mask[t])
        return len(self.in_flight | self._ids) if self._ids else len(self.in_flight)


@dataclass(eq=False)
class _Stream:
    """`take`'s state: tasks handed out and awaiting evidence, the draw being handed out, and the
    next draw once made."""

    in_flight: set[int] = field(default_factory=set)
    current: _Draw | None = None
    prepared: _Draw | None = None

    def state_dict(self) -> dict[str, Any] | None:
        if not self.in_flight and self.current is None and self.prepared is None:
            return None
        return {
            "in_flight": np.array(sorted(self.in_flight), dtype=np.int64),
            "current": None if self.current is None else self.current.state_dict(),
            "prepared": None if self.prepared is None else self.prepared.state_dict(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any] | None, n: int) -> _Stream:
        if state is None:
            return cls()
        in_flight = _stored_ids(state, "in_flight", n)
        return cls(
            set(in_flight.tolist()),
            None if state.get("current") is None else _Draw.from_state_dict(state["current"], n),
            None if state.get("prepared") is None else _Draw.from_state_dict(state["prepared"], n),
        )


def _stored_ids(state: dict[str, Any], key: str, n: int) -> IntArray:
    """The task ids a checkpoint's stream holds under ``key``; ids outside the pool mean the
    checkpoint is not this selector's (or is corrupt)."""
    try:
        return ids_in_pool(state[key], n, key)
    except InvalidArgumentError as exc:
        raise CheckpointError(f"stream: {exc}") from None


def _sorted_contains(sorted_ids: IntArray, values: IntArray) -> npt.NDArray[np.bool_]:
    """For each value, whether it is in ``sorted_ids`` (ascending, distinct)."""
    at = np.searchsorted(sorted_ids, values)
    return sorted_ids[np.minimum(at, sorted_ids.size - 1)] == values
