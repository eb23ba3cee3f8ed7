"""BOTS over several task pools mixed by weights: one selector per pool, one id space.

Trinity-RFT trains on several task sets at once: its taskset scheduler concatenates them, shuffles
the list of "which set" slots once per epoch, and reads each step's batch from the next slice, so
a set's share of a step is its share of the tasks on average but varies from step to step.
:class:`MultiPool` does the same job with BOTS: a selector per pool (each with its own posterior,
evidence and parameters) and a mixing rule that splits every batch by given weights,
deterministically.

Ids are global: pool ``i`` holds ids ``offsets[i] .. offsets[i] + len(pool i) - 1``, in the
order the pools were given, so a concatenated dataset's row numbers work unchanged.

The split of a batch of ``B`` (:meth:`MultiPool.quotas`): pool ``i`` is owed ``w_i·B`` tasks.
It gets ``floor(w_i·B)``, and the ``B - Σ floor(w_i·B)`` tasks left over go one each to the
pools with a fractional part, those with the largest carried credit first (ties: lower pool
index). A pool's credit is what it has been owed minus what it got, summed over past
selections. So every quota is ``floor(w_i·B)`` or ``ceil(w_i·B)`` (within 1 of ``w_i·B``), the
quotas sum to ``B``, a pool of weight 0 gets nothing, and over many steps each pool's total
stays within a task or two of its weight's share (the credit carries the rounding forward, so a
pool owed 0.4 tasks a step gets 2 tasks every 5 steps instead of never; the gap is
:attr:`MultiPool.credit`, which randomised tests with up to 40 pools kept below 1.01). When
exclusions leave a pool fewer selectable tasks than its quota, it gets what it has and the
rest goes to the pools with room, largest credit first.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._validation import as_ids, as_int, exclusion, feedback
from ..checkpoint import read_checkpoint, write_checkpoint
from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from ..estimators import ImplicitEvidence
from .bots import BOTS

__all__ = ["MultiPool"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

STATE_FORMAT = "bots-rft/multipool"
STATE_VERSION = 1

ParamsOnLoad = Literal["error", "checkpoint", "current"]


def _weights(weights: Any, sizes: list[int]) -> FloatArray:
    """Weights normalised to sum 1; None: proportional to the pools' sizes (Trinity's rule)."""
    if weights is None:
        w = np.asarray(sizes, dtype=np.float64)
    else:
        try:
            w = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidTypeError(f"weights: must be numbers, one per pool, got {weights!r:.80}", "weights") from None
        if w.shape != (len(sizes),):
            raise InvalidArgumentError(
                f"weights: must hold one number per pool ({len(sizes)}), got {weights!r:.80}", "weights"
            )
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(f"weights: must be finite and >= 0, got {float(w[i])!r} for pool {i}", "weights")
        if w.sum() <= 0:
            raise InvalidArgumentError(f"weights: at least one must be > 0, got {w.tolist()}", "weights")
    return np.asarray(w / w.sum(), dtype=np.float64)


class MultiPool:
    """Several BOTS selectors, one per task pool, behind one selector's interface.

    >>> mix = MultiPool([BOTS(len(math_pool)), BOTS(len(code_pool))], weights=[3, 1])
    >>> ids = mix.select(256)             # 192 math ids (0..), 64 code ids (len(math_pool)..)
    >>> mix.update(ids, successes, trials=16)

    ``selectors``: the pools' selectors, each built for its own pool (size, evidence,
    parameters). ``weights``: each pool's share of a batch (normalised; any non-negative numbers,
    not all 0); None, the default, weighs pools by their number of tasks as Trinity-RFT's taskset
    scheduler does. ``names``: labels for messages and metrics (default ``pool0``, ``pool1``...).
    """

    def __init__(
        self, selectors: Sequence[BOTS], weights: Sequence[float] | None = None, names: Sequence[str] | None = None
    ) -> None:
        if isinstance(selectors, BOTS) or not isinstance(selectors, Sequence) or len(selectors) == 0:
            raise InvalidTypeError(
                f"selectors: must be a non-empty sequence of BOTS, got {selectors!r:.80}", "selectors"
            )
        for i, sel in enumerate(selectors):
            if not isinstance(sel, BOTS):
                raise InvalidTypeError(f"selectors: entry {i} must be a BOTS, got {type(sel).__name__}", "selectors")
        if len({id(s) for s in selectors}) != len(selectors):
            raise InvalidArgumentError("selectors: each pool needs its own selector, got one object twice", "selectors")
        self._selectors = tuple(selectors)
        sizes = [s.num_tasks for s in self._selectors]
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self._offsets = np.concatenate(([0], np.cumsum(self._sizes)))
        self._weights = _weights(weights, sizes)
        if names is None:
            self._names = tuple(f"pool{i}" for i in range(len(sizes)))
        else:
            if isinstance(names, str) or len(names) != len(sizes) or not all(isinstance(n, str) for n in names):
                raise InvalidArgumentError(f"names: must be {len(sizes)} strings, got {names!r:.80}", "names")
            if len(set(names)) != len(names):
                raise InvalidArgumentError(f"names: must be distinct, got {list(names)}", "names")
            self._names = tuple(names)
        self._credit = np.zeros(len(sizes), dtype=np.float64)
        self._num_selections = 0

    # ----------------------------------------------------------------------------- layout
    @property
    def selectors(self) -> tuple[BOTS, ...]:
        return self._selectors

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    @property
    def weights(self) -> FloatArray:
        """The normalised weights (a copy)."""
        return self._weights.copy()

    @property
    def credit(self) -> FloatArray:
        """Per pool, tasks owed minus tasks given over all selections so far (a copy)."""
        return self._credit.copy()

    @property
    def offsets(self) -> IntArray:
        """Global id of each pool's first task, then the total: pool ``i`` is
        ``offsets[i] <= id < offsets[i + 1]``."""
        return self._offsets.copy()

    @property
    def num_tasks(self) -> int:
        return int(self._offsets[-1])

    def __len__(self) -> int:
        return self.num_tasks

    @property
    def num_selections(self) -> int:
        return self._num_selections

    def __repr__(self) -> str:
        pools = ", ".join(f"{n}: {int(s)} tasks, w={w:.3g}" for n, s, w in zip(self._names, self._sizes, self._weights))
        return f"MultiPool({pools})"

    def pool_of(self, task_ids: Any) -> IntArray:
        """The pool index of each global id."""
        ids = self._global_ids(task_ids, "task_ids")
        return np.asarray(np.searchsorted(self._offsets, ids, side="right") - 1, dtype=np.int64)

    def global_ids(self, pool: int, local_ids: Any) -> IntArray:
        """Pool ``pool``'s task ids as global ids."""
        p = as_int(pool, "pool", minimum=0, maximum=len(self._selectors) - 1)
        local = as_ids(local_ids, "local_ids")
        bad = (local < 0) | (local >= self._sizes[p])
        if bad.any():
            raise InvalidArgumentError(
                f"local_ids: must lie in [0, {int(self._sizes[p])}) for pool {self._names[p]!r}, got {int(local[bad][0])}",
                "local_ids",
            )
        return np.asarray(local + self._offsets[p], dtype=np.int64)

    def _global_ids(self, task_ids: Any, name: str) -> IntArray:
        ids = as_ids(task_ids, name)
        bad = (ids < 0) | (ids >= self.num_tasks)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InvalidArgumentError(
                f"{name}: must lie in [0, {self.num_tasks}), got {int(ids[i])} at position {i}", name
            )
        return ids

    # ----------------------------------------------------------------------------- mixing
    def _split(self, batch_size: int, available: IntArray) -> tuple[IntArray, FloatArray]:
        """(quotas, credit after giving them) for a batch of ``batch_size``; see the module doc."""
        owed = self._weights * batch_size
        quotas = np.floor(owed).astype(np.int64)
        frac = owed - quotas
        credit = self._credit + frac  # as if every pool got its floor
        left = batch_size - int(quotas.sum())
        if left > 0:
            eligible = np.flatnonzero(frac > 0)
            order = eligible[np.lexsort((eligible, -credit[eligible]))]
            quotas[order[:left]] += 1
            credit[order[:left]] -= 1.0
        # Exclusions can leave a pool short: it gives what it has, the others take the rest.
        short = quotas > available
        if short.any():
            surplus = int((quotas - available)[short].sum())
            credit[short] += (quotas - available)[short]
            quotas[short] = available[short]
            for _ in range(surplus):
                room = np.flatnonzero(quotas < available)
                best = room[np.lexsort((room, -credit[room]))][0]
                quotas[best] += 1
                credit[best] -= 1.0
        return quotas, credit

    def _available(self, mask: npt.NDArray[np.bool_] | None, ids: IntArray | None) -> IntArray:
        if mask is not None:
            counted = np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))
            excluded = counted[self._offsets[1:]] - counted[self._offsets[:-1]]
        elif ids is not None:
            excluded = np.bincount(np.searchsorted(self._offsets, ids, side="right") - 1, minlength=self._sizes.size)
        else:
            excluded = np.zeros_like(self._sizes)
        return np.asarray(self._sizes - excluded, dtype=np.int64)

    def quotas(self, batch_size: int, exclude: Any = None) -> IntArray:
        """How many tasks each pool would give to ``select(batch_size, exclude)`` now (changes
        nothing)."""
        b = as_int(batch_size, "batch_size", minimum=0)
        mask, ids = exclusion(exclude, self.num_tasks)
        available = self._available(mask, ids)
        if b > int(available.sum()):
            raise InvalidArgumentError(
                f"batch_size: exceeds the {int(available.sum())} selectable tasks of all pools, got {b}", "batch_size"
            )
        return self._split(b, available)[0]

    # ----------------------------------------------------------------------------- select / update
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """``batch_size`` distinct global ids: pool by pool in pool order, each pool's
        :meth:`BOTS.select` of its quota (its best first). ``exclude``: global ids or a boolean
        mask over all pools. A pool with a quota of 0 is not asked (its random stream does not
        move)."""
        b = as_int(batch_size, "batch_size", minimum=0)
        mask, ids = exclusion(exclude, self.num_tasks)
        available = self._available(mask, ids)
        if b > int(available.sum()):
            raise InvalidArgumentError(
                f"batch_size: exceeds the {int(available.sum())} selectable tasks of all pools, got {b}", "batch_size"
            )
        quotas, credit = self._split(b, available)
        parts = []
        for p, (sel, q) in enumerate(zip(self._selectors, quotas)):
            if q == 0:
                continue
            lo, hi = int(self._offsets[p]), int(self._offsets[p + 1])
            local_exclude: Any = None
            if mask is not None:
                local_exclude = mask[lo:hi]
            elif ids is not None:
                local_exclude = ids[(ids >= lo) & (ids < hi)] - lo
            parts.append(sel.select(int(q), exclude=local_exclude) + lo)
        self._credit = credit
        self._num_selections += 1
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)

    def _route(self, ids: IntArray) -> list[tuple[int, npt.NDArray[np.bool_]]]:
        """(pool, entries of ``ids`` in it) for every pool with at least one entry."""
        pools = np.searchsorted(self._offsets, ids, side="right") - 1
        return [(int(p), pools == p) for p in np.unique(pools)]

    def update(self, task_ids: Any, successes: Any, trials: Any) -> None:
        """Route one step's evidence (as :meth:`BOTS.update`: ``successes[i]`` of ``trials``
        (scalar or per entry) for global id ``task_ids[i]``) to the pools the ids belong to.
        Everything is checked before any pool is updated; pools without entries are not
        touched."""
        ids, succ, tri = feedback(task_ids, successes, trials, self.num_tasks)
        for p, entries in self._route(ids):
            self._selectors[p].update(ids[entries] - self._offsets[p], succ[entries], tri[entries])

    def update_rewards(self, task_ids: Any, rewards: Any) -> None:
        """Route a reward matrix [B, n] (or B reward sequences of varying length), row ``i`` for
        global id ``task_ids[i]``, to the pools' :meth:`BOTS.update_rewards`. The ids and the
        row count are checked before any pool is updated; each pool checks its own rows."""
        ids = self._global_ids(task_ids, "task_ids")
        if isinstance(rewards, np.ndarray):
            if rewards.ndim != 2 or rewards.shape[0] != ids.size:
                raise InvalidTypeError(
                    f"rewards: must be 2-D with one row per task id ({ids.size}), got shape {rewards.shape}", "rewards"
                )
            rows: Any = rewards
        elif isinstance(rewards, (list, tuple)) and len(rewards) == ids.size:
            rows = list(rewards)
        else:
            raise InvalidTypeError(
                f"rewards: must be a [batch, rollouts] array or one sequence per task id ({ids.size}), got {rewards!r:.80}",
                "rewards",
            )
        for p, entries in self._route(ids):
            part: Any
            if isinstance(rows, np.ndarray):
                part = rows[entries]
            else:
                part = [rows[i] for i in np.flatnonzero(entries)]
                # Rows of equal length as a matrix, so that update_rewards takes its fast path.
                if len({len(r) for r in part}) == 1:
                    part = np.asarray(part, dtype=np.float64)
            self._selectors[p].update_rewards(ids[entries] - self._offsets[p], part)

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Every pool's selector state, the weights, names and the mixing credit: enough to
        resume exactly (the same quotas and the same ids as an uninterrupted run)."""
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "names": list(self._names),
            "sizes": self._sizes.copy(),
            "weights": self._weights.copy(),
            "credit": self._credit.copy(),
            "num_selections": self._num_selections,
            "pools": [s.state_dict() for s in self._selectors],
        }

    def load_state_dict(self, state: dict[str, Any], *, params: ParamsOnLoad = "error") -> None:
        """Restore a :meth:`state_dict` into a MultiPool over pools of the same sizes; ``params``
        as in :meth:`BOTS.load_state_dict`, for every pool. The weights are the state's. All or
        nothing: if a pool refuses its state, the pools loaded before it are put back."""
        layout = _layout(state)
        if layout["sizes"] != [int(s) for s in self._sizes]:
            raise CheckpointError(
                f"state: its pools have {layout['sizes']} tasks, this MultiPool's have {self._sizes.tolist()}"
            )
        before = [sel.state_dict() for sel in self._selectors]
        done = 0
        try:
            for sel, pool_state in zip(self._selectors, layout["pools"]):
                sel.load_state_dict(pool_state, params=params)
                done += 1
        except Exception:
            for sel, old in zip(self._selectors[:done], before):
                sel.load_state_dict(old, params="checkpoint")
            raise
        self._names = tuple(layout["names"])
        self._weights = layout["weights"]
        self._credit = layout["credit"]
        self._num_selections = layout["num_selections"]

    def save(self, path: str | os.PathLike[str]) -> None:
        """One checkpoint file with every pool (atomic, as :meth:`BOTS.save`)."""
        write_checkpoint(path, self.state_dict())

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        evidence: Sequence[ImplicitEvidence | None] | None = None,
    ) -> MultiPool:
        """Read a checkpoint written by :meth:`save`. ``evidence``: per pool, the custom
        (non-interpolation) estimator its selector used, as :meth:`BOTS.load` takes it."""
        state = read_checkpoint(path)
        layout = _layout(state)
        k = len(layout["sizes"])
        if evidence is not None and len(evidence) != k:
            raise InvalidArgumentError(f"evidence: must hold one entry per pool ({k}), got {len(evidence)}", "evidence")
        selectors = []
        for i, (n, pool_state) in enumerate(zip(layout["sizes"], layout["pools"])):
            sel = BOTS(n, threads=threads, evidence=None if evidence is None else evidence[i])
            sel.load_state_dict(pool_state, params="checkpoint")
            selectors.append(sel)
        out = cls(selectors, weights=layout["weights"], names=layout["names"])
        out._credit = layout["credit"]
        out._num_selections = layout["num_selections"]
        return out


def _layout(state: Any) -> dict[str, Any]:
    """The checked top level of a MultiPool state (the pools' own states are checked by BOTS)."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        got = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"state: not a bots-rft MultiPool state (format {got!r})")
    version = state.get("version")
    if not isinstance(version, int) or version > STATE_VERSION:
        raise CheckpointError(f"state: version {version!r} is newer than this bots-rft reads ({STATE_VERSION})")
    try:
        pools = list(state["pools"])
        sizes = [int(s) for s in np.asarray(state["sizes"]).reshape(-1)]
        weights = np.asarray(state["weights"], dtype=np.float64).reshape(-1)
        credit = np.asarray(state["credit"], dtype=np.float64).reshape(-1)
        names = [str(n) for n in state["names"]]
        num_selections = int(state["num_selections"])
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"state: malformed MultiPool state ({exc})") from None
    k = len(pools)
    if not (k == len(sizes) == weights.size == credit.size == len(names)) or k == 0:
        raise CheckpointError(f"state: pools, sizes, weights, credit and names disagree in number ({k} pools)")
    if not (np.all(np.isfinite(weights)) and np.all(weights >= 0) and math.isclose(float(weights.sum()), 1.0)):
        raise CheckpointError(f"state: weights must be >= 0 and sum to 1, got {weights.tolist()}")
    if not np.all(np.isfinite(credit)):
        raise CheckpointError(f"state: credit must be finite, got {credit.tolist()}")
    return {
        "pools": pools,
        "sizes": sizes,
        "weights": weights,
        "credit": credit,
        "names": names,
        "num_selections": num_selections,
    }
