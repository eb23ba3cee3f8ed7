"""Prompt batches chosen by BOTS, and evidence fed back once per training step.

What trainers with dynamic sampling (several generation batches per step) or asynchronous
rollouts (prompts in flight across steps) need; the SkyRL-train and AReaL integrations use both:

- :class:`BOTSBatchSampler`: a torch sampler over dataset rows that yields ``batch_size`` rows at
  a time, each batch chosen by the selector at the moment the data loader reaches it, never
  choosing a task whose earlier rollouts have not been folded into the posterior yet ("in
  flight"). Its ``state_dict`` carries the selector, so a ``StatefulDataLoader`` checkpoint
  resumes the posterior and the position in the pass; the state is one ``bytes`` value in the
  package's checkpoint format (:func:`pack_state`), so a trainer that pickles its data loader's
  state (SkyRL's and verl's ``data.pt``, AReaL's recover file) stores no object of ours, and a
  tampered or foreign state is refused with a :class:`~bots_rft.errors.CheckpointError`.
- :class:`EvidenceBuffer`: collects ``(task id, reward)`` of every rollout as it is scored, from
  any thread, and folds them into the selector in one ``update`` per training step
  (:meth:`EvidenceBuffer.flush`), returning the step's ``bots/*`` metrics.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from .tasks import missing_extra

try:
    from torch.utils.data import Sampler
except ModuleNotFoundError as _exc:  # the core install: say which extra brings torch
    raise missing_extra(_exc, __name__) from None

from ..checkpoint import from_bytes, to_bytes
from ..errors import CheckpointError, DataError, InvalidArgumentError
from ..metrics.step import Pick, calibration_step_metrics, capability_metrics, outcome_metrics, pick_metrics
from .tasks import RewardClip, check_selector, load_selector_state

__all__ = ["BOTSBatchSampler", "EvidenceBuffer", "pack_state", "unpack_state"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_NOT_IN_FLIGHT = -1
_BATCH_SAMPLER_FORMAT = "bots-rft/batch-sampler"


def pack_state(kind: str, state: dict[str, Any]) -> dict[str, Any]:
    """``{"format": kind, "checkpoint": <bytes>}``: ``state`` (JSON scalars, lists, dicts and numpy
    arrays) encoded in the package's checkpoint format (:mod:`bots_rft.checkpoint`: versioned,
    checksummed, no pickle). What the samplers hand a trainer that saves data-loader state with
    pickle or ``torch.save``: those then store only a str and a bytes value."""
    return {"format": kind, "checkpoint": to_bytes(state)}


def unpack_state(kind: str, state: Any, source: str) -> dict[str, Any]:
    """The ``state`` :func:`pack_state` packed; a state of another kind, layout or version, and a
    truncated or altered ``checkpoint``, raise :class:`~bots_rft.errors.CheckpointError`."""
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{source}: must be a mapping from {kind!r}, got {type(state).__name__}")
    if state.get("format") != kind:
        raise CheckpointError(
            f"{source}: not a {kind!r} state (format {state.get('format')!r}); it was written by another sampler "
            "or by a bots-rft that stored it unpacked"
        )
    blob = state.get("checkpoint")
    if not isinstance(blob, (bytes, bytearray)):
        raise CheckpointError(f"{source}: 'checkpoint' must be bytes in the bots-rft format, got {type(blob).__name__}")
    return from_bytes(bytes(blob), source=source)


class BOTSBatchSampler(Sampler[int]):
    """Dataset rows, ``batch_size`` at a time, each batch chosen by the selector when reached.

    ``rows_of_task[k]`` is the dataset row of task ``k`` (-1: not in the dataset, never chosen;
    see :func:`bots_rft.integrations.tasks.rows_of_tasks`). ``allowed`` (a boolean mask over
    tasks) restricts the choice further, e.g. to one data-parallel rank's share of the pool.
    One pass yields ``num_batches`` batches (default: selectable tasks // ``batch_size``).

    A chosen task stays *in flight*, excluded from later batches, until :meth:`settle` reports
    that its rollouts were folded into the posterior, so a task is never drawn again on a
    posterior that has not seen its last outcome. ``release_after`` (number of
    :meth:`end_step` calls) frees tasks whose rollouts never report (a rollout that failed or was
    dropped before scoring); and when fewer than ``batch_size`` tasks are free, the oldest in-flight
    tasks are freed first (counted in :attr:`num_forced_releases`).
    """

    def __init__(
        self,
        selector: Any,
        rows_of_task: Any,
        batch_size: int,
        *,
        num_batches: int | None = None,
        allowed: Any = None,
        release_after: int | None = None,
    ) -> None:
        check_selector(selector)
        rows = np.ascontiguousarray(rows_of_task, dtype=np.int64)
        n = int(selector.num_tasks)
        if rows.ndim != 1 or len(rows) != n:
            raise InvalidArgumentError(
                f"rows_of_task: needs one entry per task ({n}), got shape {rows.shape}", "rows_of_task"
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size: must be an int >= 1, got {batch_size!r}", "batch_size")
        selectable = rows >= 0
        if allowed is not None:
            mask = np.asarray(allowed)
            if mask.dtype != np.bool_ or mask.shape != (n,):
                raise InvalidArgumentError(
                    f"allowed: must be a boolean mask of length {n}, got {mask.dtype} {mask.shape}", "allowed"
                )
            selectable &= mask
        available = int(np.count_nonzero(selectable))
        if batch_size > available:
            raise InvalidArgumentError(
                f"batch_size: {batch_size} prompts per batch, but only {available} tasks can be chosen", "batch_size"
            )
        if release_after is not None and (
            isinstance(release_after, bool) or not isinstance(release_after, int) or release_after < 1
        ):
            raise InvalidArgumentError(
                f"release_after: must be None or an int >= 1, got {release_after!r}", "release_after"
            )
        self.selector = selector
        #: What a restored state whose selector parameters, evidence or pool differ from this
        #: selector's does: ``"error"`` (refused), ``"checkpoint"`` or ``"current"`` (which wins).
        self.resume_params = "error"
        self.rows_of_task = rows
        self.batch_size = int(batch_size)
        self.num_batches = available // self.batch_size if num_batches is None else int(num_batches)
        if self.num_batches < 1:
            raise InvalidArgumentError(f"num_batches: must be >= 1, got {num_batches!r}", "num_batches")
        self.release_after = release_after
        self._blocked: BoolArray = ~selectable  # never choosable
        # Step (end_step count) at which each in-flight task was chosen; -1 when not in flight.
        self._since = np.full(n, _NOT_IN_FLIGHT, dtype=np.int64)
        self._steps = 0
        self._lock = threading.Lock()
        #: Selections not yet reported by :meth:`take_picks` (for metrics), oldest first.
        self._picks: deque[Pick] = deque(maxlen=256)
        #: Tasks freed because too few were free for a batch (their evidence was still pending).
        self.num_forced_releases = 0
        self.num_selected = 0
        # Position in the current pass, so that a data-loader checkpoint resumes mid-pass.
        self._batch = 0
        self._current: IntArray | None = None
        self._offset = 0
        self._resume = False

    # ------------------------------------------------------------------------ sampling
    def __len__(self) -> int:
        return self.num_batches * self.batch_size

    def __iter__(self) -> Iterator[int]:
        if not self._resume:
            self._batch, self._current, self._offset = 0, None, 0
        self._resume = False
        while True:
            if self._current is None or self._offset >= len(self._current):
                if self._batch >= self.num_batches:
                    return
                # Lazily, when the loader reaches this batch: it sees every update so far.
                self._current = self.select_batch()
                self._offset = 0
                self._batch += 1
            row = int(self.rows_of_task[self._current[self._offset]])
            self._offset += 1
            yield row

    def select_batch(self) -> IntArray:
        """Choose the next ``batch_size`` task ids (not in flight) and mark them in flight."""
        with self._lock:
            exclude = self._exclusion()
            pick = Pick.timed(self.selector, self.batch_size, exclude=exclude)
            self._since[pick.task_ids] = self._steps
            self._picks.append(pick)
            self.num_selected += 1
        return pick.task_ids

    def _exclusion(self) -> BoolArray | None:
        in_flight = self._since != _NOT_IN_FLIGHT
        exclude = self._blocked | in_flight
        short = self.batch_size - (exclude.size - int(np.count_nonzero(exclude)))
        if short > 0:
            # Too few free tasks: free the oldest in-flight ones (their evidence is late or lost).
            flying = np.flatnonzero(in_flight & ~self._blocked)
            oldest = flying[np.argsort(self._since[flying], kind="stable")[:short]]
            self._since[oldest] = _NOT_IN_FLIGHT
            exclude[oldest] = False
            self.num_forced_releases += int(oldest.size)
        return exclude if exclude.any() else None

    # ------------------------------------------------------------------------ in flight
    def settle(self, task_ids: Any = None) -> None:
        """Tasks whose rollouts were folded into the posterior may be chosen again (all when
        ``task_ids`` is None)."""
        with self._lock:
            if task_ids is None:
                self._since[:] = _NOT_IN_FLIGHT
            else:
                self._since[np.asarray(task_ids, dtype=np.int64)] = _NOT_IN_FLIGHT

    def end_step(self) -> None:
        """One training step is over: tasks in flight for ``release_after`` steps are freed."""
        with self._lock:
            self._steps += 1
            if self.release_after is not None:
                stale = (self._since != _NOT_IN_FLIGHT) & (self._steps - self._since >= self.release_after)
                self._since[stale] = _NOT_IN_FLIGHT

    def in_flight(self) -> IntArray:
        """Task ids chosen and not yet settled."""
        with self._lock:
            return np.flatnonzero(self._since != _NOT_IN_FLIGHT).astype(np.int64)

    def take_picks(self) -> list[Pick]:
        """Selections made since the last call (for metrics)."""
        with self._lock:
            picks = list(self._picks)
            self._picks.clear()
        return picks

    # ------------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Selector, in-flight tasks and position in the pass (saved with the data loader), packed
        by :func:`pack_state`."""
        with self._lock:
            return pack_state(
                _BATCH_SAMPLER_FORMAT,
                {
                    "selector": self.selector.state_dict(),
                    "batch": self._batch,
                    "current": None if self._current is None else self._current.copy(),
                    "offset": self._offset,
                    "since": self._since.copy(),
                    "steps": self._steps,
                    "num_selected": self.num_selected,
                },
            )

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; the next ``iter`` continues the saved pass. A state of
        another sampler, or one altered or truncated, raises :class:`CheckpointError`."""
        state = unpack_state(_BATCH_SAMPLER_FORMAT, state, "data loader state (BOTSBatchSampler)")
        try:
            since = np.asarray(state["since"], dtype=np.int64)
            batch, offset, steps = int(state["batch"]), int(state["offset"]), int(state["steps"])
            current = state["current"]
            selector_state = state["selector"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: not a BOTSBatchSampler state ({exc})") from None
        if since.shape != self._since.shape:
            raise CheckpointError(f"state: saved for {since.size} tasks, this sampler has {self._since.size}")
        load_selector_state(
            self.selector, selector_state, params=self.resume_params, knob="resume_params", source="data loader state"
        )
        with self._lock:
            self._since = since.copy()
            self._batch, self._offset, self._steps = batch, offset, steps
            self._current = None if current is None else np.asarray(current, dtype=np.int64).copy()
            self.num_selected = int(state.get("num_selected", 0))
            self._resume = True


class EvidenceBuffer:
    """Per-rollout ``(task id, reward)`` records, folded into the selector once per step.

    :meth:`record` may be called from any thread (asynchronous rollout workers), any number of
    times per step; :meth:`flush` makes one ``selector.update`` of everything recorded since the
    last flush, settles those tasks in ``sampler`` (all in-flight tasks with
    ``settle_all=True``, for trainers whose every chosen prompt is rolled out within the step)
    and returns the step's metrics. Rewards become successes by
    :func:`~bots_rft.integrations.tasks.successes_from_rewards` (clipped into [0, 1], or
    thresholded with ``success_threshold``); NaN rewards are not trials.
    """

    def __init__(
        self,
        selector: Any,
        sampler: BOTSBatchSampler | None = None,
        *,
        success_threshold: float | None = None,
        where: str = "bots_rft.integrations",
    ) -> None:
        self.selector = selector
        self.sampler = sampler
        self.success_threshold = None if success_threshold is None else float(success_threshold)
        self._successes = RewardClip(self.success_threshold, where)  # validates the threshold now
        self._ids: list[IntArray] = []
        self._rewards: list[FloatArray] = []
        self._lock = threading.Lock()
        #: Updates made (one per flush that had evidence).
        self.num_updates = 0
        #: Metrics of the most recent flush.
        self.last_metrics: dict[str, float] = {}

    def record(self, task_ids: Any, rewards: Any) -> None:
        """One entry per rollout; a scalar task id applies to every reward given."""
        r = np.asarray(rewards, dtype=np.float64).reshape(-1)
        ids = np.asarray(task_ids)
        if ids.ndim == 0:
            ids = np.full(r.size, ids)
        ids = ids.reshape(-1)
        if ids.size != r.size:
            raise DataError(f"rewards: {r.size} rewards for {ids.size} task ids")
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise DataError(f"task ids must be integers, got {ids[:3]!r}")
        ids = ids.astype(np.int64)
        n = int(self.selector.num_tasks)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids[(ids < 0) | (ids >= n)][0])
            raise DataError(f"task id {bad} is outside [0, {n}) (the selector's num_tasks)")
        with self._lock:
            self._ids.append(ids)
            self._rewards.append(r)

    def pending(self) -> int:
        """Rollouts recorded since the last flush."""
        with self._lock:
            return sum(a.size for a in self._ids)

    def flush(self, *, settle_all: bool = False) -> dict[str, float]:
        """Fold everything recorded since the last flush into the selector (one update) and
        return ``bots/*`` metrics: ``etr`` and ``mean_reward_of_picks`` of the fed groups,
        ``groups``/``rollouts`` fed, ``update_ms``, ``select_ms`` and ``pick_mean_p*`` of the
        selections since the last flush, ``capability`` (μ̃) where the selector estimates it."""
        with self._lock:
            ids = np.concatenate(self._ids) if self._ids else np.zeros(0, np.int64)
            rewards = np.concatenate(self._rewards) if self._rewards else np.zeros(0)
            self._ids, self._rewards = [], []
        succ = self._successes(rewards)
        ok = ~np.isnan(succ)
        ids, succ = ids[ok], succ[ok]
        metrics: dict[str, float] = {}
        if ids.size:
            start = time.perf_counter()
            self.selector.update(ids, succ, 1.0)
            metrics["bots/update_ms"] = (time.perf_counter() - start) * 1e3
            self.num_updates += 1
            metrics.update(outcome_metrics(ids, succ))
        if self.sampler is not None:
            self.sampler.settle(None if settle_all else ids)
            self.sampler.end_step()
            picks = self.sampler.take_picks()
            if picks:
                metrics["bots/select_ms"] = float(sum(p.select_ms for p in picks))
                means = [p.posterior_means for p in picks if p.posterior_means is not None]
                if means:
                    metrics.update(pick_metrics(np.concatenate(means)))
            if ids.size:  # the picks' predictions (made when picked) against this update's outcomes
                predicted = {task: mean for p in picks for task, mean in p.predictions().items()}
                metrics.update(calibration_step_metrics(ids, succ, 1.0, predicted))
        metrics.update(capability_metrics(self.selector))
        metrics.update(self._successes.metrics())
        self.last_metrics = metrics
        return metrics
