"""BOTS for TRL's ``AsyncGRPOTrainer``: streaming selection, prompts in flight excluded.

>>> from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
>>> stream = AsyncBOTS(BOTS(len(ds), evidence=...), ds, task_id_column="task_id")
>>> trainer = AsyncGRPOTrainer(model="Qwen/...", reward_funcs=[stream.recording(accuracy)],
...                            train_dataset=stream.prompts, args=AsyncGRPOConfig(...))
>>> stream.attach(trainer)               # metrics, checkpoints, resume
>>> trainer.train()

How the trainer runs (trl 1.16, ``trl.experimental.async_grpo``): rank 0 spawns a CUDA-free child
process (``AsyncRolloutWorker`` running ``_AsyncRolloutLoop``). Whenever generation slots free up,
the child takes the next row with ``next(iter(train_dataset))`` (one row per prompt group), has
vLLM generate ``num_generations`` completions for it, scores each finished group with the reward
functions and queues the samples for the trainer. The loop has no public hook; the two things of
ours it runs, both in the child, are the dataset's iterator and the reward functions. So:

- :attr:`AsyncBOTS.prompts` is the train dataset: its iterator asks the selector for one task at a
  time with :meth:`bots_rft.BOTS.take`, which hands out the ranks of one Thompson draw (one draw
  per update's worth of groups), never a task whose group is in flight (picked, not yet scored),
  and prepares the next draw in the background, so a pick costs microseconds whatever the pool
  size;
- :meth:`AsyncBOTS.recording` wraps the success reward function: once it has scored a group, the
  group's rewards update the selector and release the task. Every scored group reaches BOTS,
  before anything downstream drops samples (``max_staleness`` discards stale samples in the
  trainer process, after scoring);
- the selector lives in the trainer process (rank 0). A small local server
  (``multiprocessing.connection``, random authentication key, a thread per connection) answers the
  child; the objects shipped to the child carry only its address, so checkpoints and metrics read
  the selector directly;
- :meth:`AsyncBOTS.attach` adds ``bots/*`` metrics to the trainer's logs (through the rollout
  worker's ``metrics_queue``, the channel the trainer drains in ``log()``), writes the selector
  into every ``checkpoint-<step>/`` and restores it on ``train(resume_from_checkpoint=...)``.

Limits: TRL draws one row per group, so a draw's picks go out one by one while the groups before
them are still being scored (evidence reaches the next draw, not the current one); evidence arrives
when a group is scored, which may be after the policy has moved on (the trainer's staleness
bound applies); groups in flight at a checkpoint are lost on resume, as TRL loses them (TRL also
warns that it restarts "from prompt 0": it repositions only map-style datasets, and here BOTS
chooses the prompts anyway). ``AsyncGRPOTrainer`` is experimental; this module was tested against
trl 1.16.0 with its real rollout loop on CPU, the vLLM call replaced (see the tests).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InvalidArgumentError
from ..metrics.step import Pick, pick_metrics
from .gates import Seam, Window, check_framework
from .inflight import InFlight
from .tasks import (
    RewardClip,
    bind_pool,
    check_references_by_id,
    check_resume_params,
    check_rollouts,
    check_selector,
    column_values,
    missing_extra,
    rows_of_tasks,
)

try:
    from .trl import add_checkpointing, task_ids_and_rewards
except ModuleNotFoundError as _exc:  # the core install: say which extra brings torch
    raise missing_extra(_exc, __name__) from None

__all__ = ["AsyncBOTS", "BOTSPrompts", "RecordingReward"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class _Selection:
    """The selector plus the bookkeeping of tasks in flight and the metrics since the last
    :meth:`take_metrics`. Thread-safe: the server answers each connection on its own thread.

    Scored groups are folded into the posterior ``groups_per_update`` at a time, one
    ``selector.update`` each, so that BOTS's per-update discount λ means what it means in a
    synchronous run (one update per training step), not one discount per group. A task stays
    excluded from selection until the update holding its group is applied.

    A selector with ``take`` (:class:`bots_rft.BOTS`) hands tasks out from one Thompson draw per
    ``groups_per_update`` picks (so each update's evidence shapes the draws that follow it),
    prepared in the background, and keeps the tasks in flight itself; any other selector makes
    one ``select(1)`` per pick with the tasks in flight excluded."""

    def __init__(
        self, selector: Any, rows_of_task: IntArray, success_threshold: float | None, groups_per_update: int
    ) -> None:
        self.selector = selector
        self.rows_of_task = rows_of_task
        self.success_threshold = success_threshold
        self._successes = RewardClip(success_threshold, "bots_rft.integrations.trl_async (the success reward function)")
        self.groups_per_update = groups_per_update
        self.lock = threading.Lock()
        self._no_row = rows_of_task < 0
        self._no_row_ids = np.flatnonzero(self._no_row)
        self._streams = callable(getattr(selector, "take", None))
        # Tasks in flight (picked, not yet fed), with the tasks without a row always excluded, and
        # how many stay free, kept current so that a pick never scans the pool to learn it.
        self._in_flight = InFlight(self._no_row)
        self._pending: list[tuple[IntArray, FloatArray]] = []
        # Each task in flight's posterior mean when picked (for bots/calibration_brier); metrics only.
        self._predicted: dict[int, float] = {}
        self._reset_metrics()

    def _reset_metrics(self) -> None:
        self._m: dict[str, list[float]] = {
            "select_ms": [0.0, 0.0],
            "update_ms": [0.0, 0.0],
            "etr": [0.0, 0.0],
            "reward": [0.0, 0.0],
            "in_flight_repicks": [0.0, 0.0],
            # Calibration (bots_rft.metrics.calibration) as sums that add up over windows: the Brier score's
            # squared errors over rollouts, and groups whose rollouts all agree.
            "brier": [0.0, 0.0],
            "zero_variance": [0.0, 0.0],
        }
        self._pick_means: list[float] = []

    def next_task(self) -> tuple[int, int]:
        """(task id, dataset row) of the next prompt; the task counts as in flight until fed."""
        with self.lock:
            exclude = self._in_flight.exclusion
            repick = self._in_flight.free == 0
            if repick:  # every task is in flight (a pool smaller than the rollout capacity)
                exclude = self._no_row
                pick = Pick.timed(self.selector, 1, exclude=exclude)
            elif self._streams:
                no_row = self._no_row_ids if self._no_row_ids.size else None
                pick = Pick.timed_take(self.selector, 1, draw_size=self.groups_per_update, exclude=no_row)
            else:
                pick = Pick.timed(self.selector, 1, exclude=exclude)
            task = int(pick.task_ids[0])
            self._in_flight.hand_out(task)
            self._m["select_ms"][0] += pick.select_ms
            self._m["select_ms"][1] += 1
            self._m["in_flight_repicks"][0] += float(repick)
            self._m["in_flight_repicks"][1] += 1
            if pick.posterior_means is not None:
                self._pick_means.extend(pick.posterior_means.tolist())
                self._predicted[task] = float(pick.posterior_means[0])
            return task, int(self.rows_of_task[task])

    def feed(self, task_ids: Any, rewards: Any) -> None:
        """One scored group: queue it for the next update (applied once ``groups_per_update``
        groups are queued)."""
        ids = np.asarray(task_ids, dtype=np.int64).reshape(-1)
        succ = self._successes(rewards)
        if ids.shape != succ.shape:
            raise InvalidArgumentError(f"rewards: {succ.size} rewards for {ids.size} task ids", "rewards")
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.rows_of_task)):
            raise InvalidArgumentError(f"task_ids: outside [0, {len(self.rows_of_task)})", "task_ids")
        ok = ~np.isnan(succ)  # a reward of None is not a trial
        with self.lock:
            if np.any(ok):
                tasks, inverse = np.unique(ids[ok], return_inverse=True)
                sums = np.bincount(inverse, weights=succ[ok])
                trials = np.bincount(inverse)
                self._m["etr"][0] += float(np.count_nonzero((sums > 0) & (sums < trials)))
                self._m["etr"][1] += float(tasks.size)
                self._m["reward"][0] += float(succ[ok].sum())
                self._m["reward"][1] += float(np.count_nonzero(ok))
                self._m["zero_variance"][0] += float(np.count_nonzero((sums == 0) | (sums == trials)))
                self._m["zero_variance"][1] += float(tasks.size)
                for task, k, n in zip(tasks.tolist(), sums.tolist(), trials.tolist()):
                    p = self._predicted.pop(task, None)
                    if p is not None:
                        self._m["brier"][0] += k * (1.0 - p) ** 2 + (n - k) * p**2
                        self._m["brier"][1] += n
            self._pending.append((ids, succ))
            if len(self._pending) >= self.groups_per_update:
                self._apply_locked()

    def flush(self) -> None:
        """Apply the queued groups now (before a checkpoint is written)."""
        with self.lock:
            self._apply_locked()

    def _apply_locked(self) -> None:
        if not self._pending:
            return
        ids = np.concatenate([i for i, _ in self._pending])
        succ = np.concatenate([s for _, s in self._pending])
        self._pending = []
        ok = ~np.isnan(succ)
        if np.any(ok):
            start = time.perf_counter()
            self.selector.update(ids[ok], succ[ok], 1.0)
            self._m["update_ms"][0] += (time.perf_counter() - start) * 1e3
            self._m["update_ms"][1] += 1
        self._in_flight.come_back(np.unique(ids).tolist())  # one group per pick: release one pick each

    def in_flight(self) -> IntArray:
        with self.lock:
            return self._in_flight.ids()

    def forget_in_flight(self) -> None:
        """A new run starts with nothing in flight (groups of an earlier run never come back)."""
        with self.lock:
            self._in_flight.clear()
            self._pending = []
            if self._streams:
                self.selector.release(self.selector.in_flight)

    def take_metrics(self) -> dict[str, float | tuple[float, float]]:
        """The ``bots/*`` metrics since the last call, shaped for the async trainer's metric sink:
        ``(numerator, denominator)`` pairs for rates and means (so windows add up exactly),
        floats for the capability and the quantiles of the picks' posterior means."""
        with self.lock:
            m, means = self._m, self._pick_means
            self._reset_metrics()
            capability = getattr(self.selector, "capability", None)
        out: dict[str, float | tuple[float, float]] = {}
        names = {"select_ms": "bots/select_ms", "update_ms": "bots/update_ms", "etr": "bots/etr"}
        names.update(reward="bots/mean_reward_of_picks", in_flight_repicks="bots/in_flight_repick_frac")
        names.update(brier="bots/calibration_brier", zero_variance="bots/zero_variance_share")
        for key, name in names.items():
            if m[key][1] > 0:
                out[name] = (m[key][0], m[key][1])
        out.update(pick_metrics(means))
        if capability is not None:
            out["bots/capability"] = float(capability)
        out.update(self._successes.metrics())  # a running count, not a window's
        return out


# ------------------------------------------------------------------------------------ transport
_REMOTE_METHODS = ("next_task", "feed")


class _Server:
    """Serves a :class:`_Selection` to other processes on this machine."""

    def __init__(self, selection: _Selection) -> None:
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener(authkey=self.authkey)  # a Unix socket (named pipe on Windows)
        self.address = self._listener.address
        self._selection = selection
        threading.Thread(target=self._accept, name="bots-selection-server", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn = self._listener.accept()
            except OSError:  # closed
                return
            except Exception:  # a client that failed authentication: keep serving the others
                continue
            threading.Thread(target=self._serve, args=(conn,), name="bots-selection-conn", daemon=True).start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            while True:
                try:
                    method, args = conn.recv()
                except (EOFError, OSError):
                    return
                try:
                    if method not in _REMOTE_METHODS:
                        raise ConfigError(f"bots selection server: unknown method {method!r}")
                    conn.send(("ok", getattr(self._selection, method)(*args)))
                except Exception as exc:  # sent back and raised in the caller
                    conn.send(("error", exc))

    def close(self) -> None:
        self._listener.close()


class _Client:
    """The selection as seen from another process: same methods, one round trip each."""

    def __init__(self, address: Any, authkey: bytes) -> None:
        self._address = address
        self._authkey = authkey
        self._conn: Connection | None = None
        self._lock = threading.Lock()  # the child calls from its event loop and reward threads

    def __getstate__(self) -> dict[str, Any]:
        return {"address": self._address, "authkey": self._authkey}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["address"], state["authkey"])  # type: ignore[misc]

    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            if self._conn is None:
                self._conn = Client(self._address, authkey=self._authkey)
            self._conn.send((method, args))
            status, value = self._conn.recv()
        if status == "error":
            raise value
        return value

    def next_task(self) -> tuple[int, int]:
        result: tuple[int, int] = self._call("next_task")
        return result

    def feed(self, task_ids: Any, rewards: Any) -> None:
        self._call("feed", np.asarray(task_ids, dtype=np.int64), np.asarray(rewards, dtype=np.float64))


# ------------------------------------------------------------------------------ what TRL sees
class BOTSPrompts:
    """The train dataset for ``AsyncGRPOTrainer``: iterating it yields the rows BOTS picks, one
    task at a time, never a task whose group is still in flight (unless every task is). Endless
    (TRL restarts an exhausted iterator anyway); ``len()`` is the number of tasks, so
    ``num_train_epochs`` counts groups as TRL does. Picklable: a copy in another process asks the
    selection server of the :class:`AsyncBOTS` that made it."""

    def __init__(self, owner: AsyncBOTS) -> None:
        self._owner: AsyncBOTS | None = owner
        self._backend: Any = owner.selection
        self.dataset = owner.dataset
        self._len = int(np.count_nonzero(owner.selection.rows_of_task >= 0))

    def __getstate__(self) -> dict[str, Any]:
        backend = self._owner.client() if self._owner is not None else self._backend
        return {"backend": backend, "dataset": self.dataset, "len": self._len}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._owner, self._backend = None, state["backend"]
        self.dataset, self._len = state["dataset"], state["len"]

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Any]:
        while True:
            _, row = self._backend.next_task()
            yield self.dataset[row]


class RecordingReward:
    """A reward function that, after computing its rewards for a group, feeds them to BOTS.
    A picklable callable (``AsyncGRPOTrainer`` ships reward functions to its rollout process);
    named like the function it wraps, so TRL logs it under the same name."""

    def __init__(self, owner: AsyncBOTS, func: Callable[..., Any]) -> None:
        self._owner: AsyncBOTS | None = owner
        self._backend: Any = owner.selection
        self.func = func
        self.task_id_column = owner.task_id_column
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_owner", "_backend")}
        state["_backend"] = self._owner.client() if self._owner is not None else self._backend
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner = None

    def _feed(self, kwargs: dict[str, Any], rewards: Any) -> None:
        ids, values = task_ids_and_rewards(kwargs, rewards, self.task_id_column)
        self._backend.feed(ids, values)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.func(*args, **kwargs)
        self._feed(kwargs, out)
        return out


class _AsyncRecordingReward(RecordingReward):
    async def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        out = await self.func(*args, **kwargs)
        self._feed(kwargs, out)
        return out


class AsyncBOTS:
    """BOTS for ``AsyncGRPOTrainer``: :attr:`prompts` (the train dataset), :meth:`recording`
    (wrap the success reward function), :meth:`attach` (metrics, checkpoints, resume).

    ``selector``: a :class:`bots_rft.BOTS` (or any selector with ``select``/``update``/
    ``state_dict``) over task ids ``0..num_tasks-1``. ``dataset``: the prompt pool (a Hugging
    Face ``Dataset`` or a list of row dicts) with a task-id column (dotted path allowed; every row
    its own id). ``success_threshold``: as in :func:`bots_rft.integrations.trl.attach_bots`.
    ``groups_per_update``: scored groups per posterior update (BOTS discounts once per update);
    ``None`` takes the groups the trainer consumes per optimiser step when :meth:`attach` runs
    (``per_device_train_batch_size × gradient_accumulation_steps × processes / num_generations``),
    1 until then.
    Build it on every process; only rank 0's rollout process asks it for prompts.
    """

    def __init__(
        self,
        selector: Any,
        dataset: Any,
        *,
        task_id_column: str = "task_id",
        success_threshold: float | None = None,
        groups_per_update: int | None = None,
    ) -> None:
        check_selector(selector)
        if groups_per_update is not None and (
            isinstance(groups_per_update, bool) or not isinstance(groups_per_update, int) or groups_per_update < 1
        ):
            raise InvalidArgumentError(
                f"groups_per_update: must be an int >= 1 or None, got {groups_per_update!r}", "groups_per_update"
            )
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise ConfigError(
                "dataset: BOTS needs a map-style pool (a datasets.Dataset or a list of rows) to pick rows from"
            )
        ids = column_values(dataset, task_id_column)
        rows = rows_of_tasks(ids, int(selector.num_tasks), task_id_column)
        if not np.any(rows >= 0):
            raise ConfigError("dataset: holds no task of the selector")
        check_references_by_id(selector, dataset, ids, task_id_column)
        bind_pool(selector, ids, task_id_column, dataset)
        self.dataset = dataset
        self.task_id_column = task_id_column
        self._groups_per_update = groups_per_update
        self.selection = _Selection(selector, rows, success_threshold, groups_per_update or 1)
        self._server: _Server | None = None
        self._server_lock = threading.Lock()
        self.prompts = BOTSPrompts(self)

    @property
    def selector(self) -> Any:
        return self.selection.selector

    def recording(self, func: Callable[..., Any]) -> RecordingReward:
        """``func`` (a reward function returning one reward per completion) feeding BOTS. Async
        functions stay async. ``func`` must be picklable (a module-level function), as TRL
        requires for every reward function of this trainer."""
        if not callable(func):
            raise InvalidArgumentError(f"func: must be a reward function, got {type(func).__name__}", "func")
        from trl.trainer.utils import is_async_callable

        return _AsyncRecordingReward(self, func) if is_async_callable(func) else RecordingReward(self, func)

    def client(self) -> _Client:
        """A picklable handle on :attr:`selection` for another process; starts the server."""
        with self._server_lock:
            if self._server is None:
                self._server = _Server(self.selection)
            return _Client(self._server.address, self._server.authkey)

    def close(self) -> None:
        """Stop the server (copies in other processes can no longer ask for prompts)."""
        with self._server_lock:
            if self._server is not None:
                self._server.close()
                self._server = None

    def in_flight(self) -> IntArray:
        """Task ids picked and not yet scored."""
        return self.selection.in_flight()

    def attach(self, trainer: Any, *, save_with_checkpoints: bool = True, resume_params: str = "error") -> None:
        """On a constructed ``AsyncGRPOTrainer`` built with :attr:`prompts` and a
        :meth:`recording` reward: push ``bots/*`` metrics into the trainer's logs at every
        optimiser step, and (``save_with_checkpoints``) save the selector into every checkpoint
        folder and restore it on ``train(resume_from_checkpoint=...)`` (``resume_params``: as in
        :func:`bots_rft.integrations.trl.attach_bots`). The selector's ``n_rollouts`` must equal
        the trainer's ``num_generations``."""
        check_trl_async()
        check_resume_params(resume_params, "resume_params")
        if getattr(trainer, "train_dataset", None) is not self.prompts:
            raise ConfigError(
                "trainer: its train_dataset is not this AsyncBOTS's prompts; pass train_dataset=stream.prompts"
            )
        check_rollouts(self.selector, int(trainer.args.num_generations), "num_generations")
        if self._groups_per_update is None:
            args = trainer.args
            samples = int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps)
            samples *= int(getattr(trainer.accelerator, "num_processes", 1))
            self.selection.groups_per_update = max(1, samples // int(args.num_generations))
        trainer.add_callback(_metrics_callback(trainer, self.selection))
        if save_with_checkpoints:
            add_checkpointing(
                trainer,
                self.selector,
                lock=self.selection.lock,
                before_save=self.selection.flush,
                on_restore=self.selection.forget_in_flight,
                params=resume_params,
            )


#: The trl releases :class:`AsyncBOTS` was tested with (both ends tested).
TESTED_TRL_ASYNC = Window("trl", "1.16.0", "1.16.0", "bots_rft.integrations.trl_async")


def trl_async_seams() -> list[Seam]:
    """What :class:`AsyncBOTS` relies on in TRL's experimental trainer: the metrics reach TRL's
    logs through the rollout worker's ``metrics_queue`` (made in ``AsyncRolloutWorker.__init__``),
    which ``AsyncGRPOTrainer.log`` drains; and the rollout loop takes one row of
    ``train_dataset`` per group and restarts an exhausted iterator (``_repeat_iterator``), which
    is how :attr:`AsyncBOTS.prompts` hands BOTS's picks over one task at a time."""
    from trl.experimental.async_grpo import AsyncGRPOTrainer
    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker, _AsyncRolloutLoop

    return [
        Seam(AsyncGRPOTrainer, "log", "(self, logs, start_time=)", "a4014eca8ee76e61"),
        Seam(
            AsyncRolloutWorker,
            "__init__",
            "(self, *, queue_maxsize=, child_ready_timeout=, **loop_kwargs)",
            "574ec70d0bd04f26",
        ),
        Seam(_AsyncRolloutLoop, "_repeat_iterator", "(self)", "c199044c82c73dce"),
    ]


def check_trl_async() -> list[str]:
    """:func:`trl_async_seams` against the installed trl (:func:`bots_rft.integrations.gates.check_framework`)."""
    return check_framework(TESTED_TRL_ASYNC, trl_async_seams())


def _metrics_callback(trainer: Any, selection: _Selection) -> Any:
    from transformers import TrainerCallback

    class BOTSAsyncMetricsCallback(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            selection.forget_in_flight()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            worker = getattr(trainer, "rollout_worker", None)  # rank 0 only
            metrics = selection.take_metrics()
            if worker is None or not metrics:
                return
            try:  # the worker's own channel into the trainer's logs, drained in log()
                worker.metrics_queue.put_nowait(metrics)
            except Exception:  # a full queue: drop this window rather than block training
                pass

    return BOTSAsyncMetricsCallback()
