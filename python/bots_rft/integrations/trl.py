"""BOTS for Hugging Face TRL's ``GRPOTrainer``: BOTS chooses the prompts, the rewards feed it back.

>>> trainer = GRPOTrainer(model=..., reward_funcs=[accuracy], args=GRPOConfig(...), train_dataset=ds)
>>> hook = attach_bots(trainer, BOTS(num_tasks, evidence=...), task_id_column="task_id")
>>> trainer.train()                      # trainer.train(resume_from_checkpoint=True) restores BOTS too

What :func:`attach_bots` installs, public seams first:

- **Prompt order**: :class:`BOTSRepeatSampler` through ``_get_train_sampler``, the method TRL
  documents for prompt order. It keeps TRL's ``RepeatSampler`` layout (each prompt
  ``num_generations`` times in a row; each chunk of ``generation_batch_size / num_generations``
  prompts repeated ``num_iterations * steps_per_generation`` times), identically on every rank.
- **Evidence**: the success reward function is wrapped (:class:`RewardRecorder`). Right after TRL
  calls it, the wrapper gathers ``(task id, reward)`` from every process (accelerate's ``gather``)
  and updates the selector once per generation: every group's rewards, before TRL computes
  advantages. GRPOTrainer drops no group; its masks (``mask_truncated_completions``,
  ``top_entropy_quantile``, ``off_policy_mask_threshold``) act on the loss, after the rewards.
- **Metrics**: the same wrapper logs ``bots/*`` through the ``log_metric`` callable TRL hands every
  reward function, so they reach TRL's progress line, its reporters (wandb, tensorboard, ...)
  and ``trainer.state.log_history``, averaged over the logging window like TRL's own.
- **Checkpoints**: a ``TrainerCallback`` writes the selector into every ``checkpoint-<step>/``
  (:data:`SELECTOR_FILE`); ``trainer.train`` is wrapped so that ``resume_from_checkpoint`` (a
  folder or ``True``) loads it back into the same selector object before training continues.
- **One private method**, only with ``select_at="generation"`` (the default):
  ``_generate_and_score_completions(inputs)`` is wrapped to replace the sampler's placeholder
  rows with a chunk chosen at that moment. Nothing else is patched.

Why the private method: TRL's data loader runs ahead of training. transformers fetches all
``gradient_accumulation_steps`` batches of an optimiser step at once and accelerate's
``DataLoaderShard`` always holds one batch more, so with TRL's defaults the next chunk is drawn
before the current one has been scored: a sampler alone selects one generation late, and no
dataloader setting removes accelerate's look-ahead (``tests/integrations/test_integrations_trl.py`` measures the
lag with ``select_at="fetch"``). TRL offers no public hook between "batch fetched" and "batch
generated" (reward functions run after generation; callbacks do not see the batch). So by default
the sampler yields placeholder rows and the chunk is chosen inside the generation step, on every
rank, in lockstep, from the same posterior. The method's signature is checked at attach time; a
TRL release that changes it gets a :class:`~bots_rft.errors.ConfigError` naming
``select_at="fetch"``, which uses public seams only and accepts the lag.

Tested against trl 1.16.0 (``tests/integrations/test_integrations_trl.py``). What it touches
(``_get_train_sampler``, ``_generate_and_score_completions``, ``reward_funcs``,
``args.generation_batch_size`` / ``steps_per_generation``) exists since trl 0.18; older releases
are refused with a ``ConfigError`` rather than silently mis-batched. A release whose reward
functions get no ``log_metric`` still trains; the metrics are then only on
:attr:`BOTSTrainerHook.last_metrics`.
:mod:`bots_rft.integrations.trl_async` covers ``AsyncGRPOTrainer``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from .tasks import missing_extra

try:
    from torch.utils.data import Sampler
except ModuleNotFoundError as _exc:  # the core install: say which extra brings torch
    raise missing_extra(_exc, __name__) from None

from ..errors import CheckpointError, ConfigError, InvalidArgumentError
from ..metrics.step import Pick, calibration_step_metrics, capability_metrics, outcome_metrics
from .gates import Seam, Window, check_framework
from .tasks import (
    RewardClip,
    bind_pool,
    check_references_by_id,
    check_resume_params,
    check_rollouts,
    check_selector,
    column_values,
    load_selector_state,
    rows_of_tasks,
    split_column,
)

__all__ = [
    "BOTSRepeatSampler",
    "RewardRecorder",
    "BOTSTrainerHook",
    "attach_bots",
    "SELECTOR_FILE",
    "load_selector",
    "save_selector",
    "restore_selector",
    "add_checkpointing",
    "task_ids_and_rewards",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
#: File name of the selector checkpoint written into each TRL ``checkpoint-<step>`` folder.
SELECTOR_FILE = "bots_selector.bots"


class BOTSRepeatSampler(Sampler[int]):
    """TRL's ``RepeatSampler`` layout with the selector choosing each chunk.

    ``rows_of_task[k]`` is the dataset row of task ``k`` (-1: not in the dataset, never selected);
    see :func:`bots_rft.integrations.tasks.rows_of_tasks`. ``batch_size`` is the number of distinct
    prompts per generation (``generation_batch_size // num_generations``), ``mini_repeat_count``
    is ``num_generations`` and ``repeat_count`` is ``num_iterations * steps_per_generation``.
    One pass yields ``num_chunks`` chunks (default: ``dataset rows // batch_size``, an epoch as
    TRL counts it). With ``defer=True`` the sampler yields placeholder rows in the same layout and
    never selects: whoever consumes the batch calls :meth:`select_chunk` (``attach_bots`` does).
    """

    def __init__(
        self,
        selector: Any,
        rows_of_task: Any,
        *,
        mini_repeat_count: int,
        batch_size: int,
        repeat_count: int = 1,
        num_chunks: int | None = None,
        defer: bool = False,
    ) -> None:
        rows = np.ascontiguousarray(rows_of_task, dtype=np.int64)
        if rows.ndim != 1 or len(rows) != int(selector.num_tasks):
            raise InvalidArgumentError(
                f"rows_of_task: needs one entry per task ({selector.num_tasks}), got shape {rows.shape}", "rows_of_task"
            )
        for name, value in (
            ("mini_repeat_count", mini_repeat_count),
            ("batch_size", batch_size),
            ("repeat_count", repeat_count),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"{name}: must be an int >= 1, got {value!r}", name)
        available = int(np.count_nonzero(rows >= 0))
        if batch_size > available:
            raise InvalidArgumentError(
                f"batch_size: {batch_size} prompts per generation, but the dataset holds only {available} tasks",
                "batch_size",
            )
        self.selector = selector
        self.rows_of_task = rows
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.num_chunks = available // batch_size if num_chunks is None else int(num_chunks)
        self.defer = bool(defer)
        # Tasks without a row must never be chosen; None keeps the selector's fast path.
        self.exclude: npt.NDArray[np.bool_] | None = None if available == len(rows) else rows < 0
        #: Task ids of the most recent chunk and how many chunks were chosen so far.
        self.last_task_ids: IntArray | None = None
        self.num_selected = 0
        #: Chunks chosen but not yet fed back, oldest first (more than one only when the data
        #: loader runs ahead, i.e. without ``defer``); :meth:`take_pick` removes them.
        self.picks: deque[Pick] = deque(maxlen=64)
        self._placeholder = np.sort(rows[rows >= 0])[:batch_size]

    def select_chunk(self) -> IntArray:
        """Ask the selector for the next chunk of ``batch_size`` distinct task ids."""
        pick = Pick.timed(self.selector, self.batch_size, exclude=self.exclude)
        self.picks.append(pick)
        self.last_task_ids = pick.task_ids
        self.num_selected += 1
        return pick.task_ids

    def take_pick(self, fed_task_ids: Any) -> Pick | None:
        """The pending chunk whose tasks are ``fed_task_ids`` (and drop older ones), or None."""
        fed = np.unique(np.asarray(fed_task_ids, dtype=np.int64))
        for i, pick in enumerate(self.picks):
            if np.array_equal(np.unique(pick.task_ids), fed):
                for _ in range(i + 1):
                    self.picks.popleft()
                return pick
        return None

    def chunk_rows(self, task_ids: Any) -> IntArray:
        """Dataset rows of one chunk in TRL's layout: each task's row ``mini_repeat_count`` times."""
        return np.repeat(self.rows_of_task[np.asarray(task_ids, dtype=np.int64)], self.mini_repeat_count)

    def __iter__(self) -> Iterator[int]:
        # A generator: each chunk is chosen only when the data loader reaches it.
        for _ in range(self.num_chunks):
            rows = self._placeholder if self.defer else self.rows_of_task[self.select_chunk()]
            for _ in range(self.repeat_count):
                for row in rows.tolist():
                    for _ in range(self.mini_repeat_count):
                        yield row

    def __len__(self) -> int:
        return self.num_chunks * self.batch_size * self.mini_repeat_count * self.repeat_count


class RewardRecorder:
    """Wraps a TRL reward function and records ``(task id, reward)`` for each completion.

    TRL calls reward functions with ``prompts``, ``completions`` and every dataset column as
    keyword lists, one entry per completion; the task id comes from ``task_id_column`` (dotted
    paths such as ``extra_info.index`` reach into struct columns). A reward of ``None`` is
    recorded as NaN and later skipped (not a trial).
    """

    def __init__(self, task_id_column: str = "task_id") -> None:
        self.task_id_column = task_id_column
        self._ids: list[IntArray] = []
        self._rewards: list[FloatArray] = []
        self._lock = threading.Lock()  # async reward functions run on TRL's event-loop thread

    def wrap(
        self, func: Callable[..., Any], after: Callable[[dict[str, Any]], None] | None = None
    ) -> Callable[..., Any]:
        """A reward function with ``func``'s name and behaviour that also records; ``after(kwargs)``
        runs once the rewards are recorded. Async functions stay async (TRL runs those concurrently)."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                out = await func(*args, **kwargs)
                self.record(kwargs, out)
                if after is not None:
                    after(kwargs)
                return out

            return async_wrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = func(*args, **kwargs)
            self.record(kwargs, out)
            if after is not None:
                after(kwargs)
            return out

        return wrapper

    def record(self, kwargs: dict[str, Any], rewards: Any) -> None:
        ids, values = task_ids_and_rewards(kwargs, rewards, self.task_id_column)
        with self._lock:
            self._ids.append(ids)
            self._rewards.append(values)

    def take(self) -> tuple[IntArray, FloatArray]:
        """Everything recorded since the last call (task ids, raw rewards), and forget it."""
        with self._lock:
            ids, rewards = self._ids, self._rewards
            self._ids, self._rewards = [], []
        if not ids:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        return np.concatenate(ids), np.concatenate(rewards)


def task_ids_and_rewards(kwargs: dict[str, Any], rewards: Any, task_id_column: str) -> tuple[IntArray, FloatArray]:
    """(task id, reward) per completion from one reward-function call: TRL passes every dataset
    column as a keyword list; ``None`` rewards become NaN."""
    head, _ = split_column(task_id_column, kwargs)
    if head not in kwargs:
        raise ConfigError(
            f"task_id_column: the reward function got no {head!r} column (got {sorted(kwargs)}); the train "
            "dataset needs a task-id column and GRPOConfig(remove_unused_columns=False)"
        )
    ids = np.asarray(column_values([{head: v} for v in kwargs[head]], task_id_column), dtype=np.int64)
    values = np.array([np.nan if r is None else float(r) for r in rewards], dtype=np.float64)
    if values.shape != ids.shape:
        raise ConfigError(f"reward function returned {values.size} rewards for {ids.size} completions")
    return ids, values


class BOTSTrainerHook:
    """What :func:`attach_bots` installed on a trainer. :meth:`feed` is the once-per-generation
    update (run by the reward wrapper); ``num_feeds`` counts updates, ``last_task_ids`` is the
    latest chunk and ``last_metrics`` the ``bots/*`` metrics of the latest generation."""

    def __init__(
        self,
        trainer: Any,
        selector: Any,
        sampler: BOTSRepeatSampler,
        recorder: RewardRecorder,
        *,
        select_at: str,
        success_threshold: float | None,
    ) -> None:
        self.trainer = trainer
        self.selector = selector
        self.sampler = sampler
        self.recorder = recorder
        self.select_at = select_at
        self.success_threshold = success_threshold
        self._successes = RewardClip(success_threshold, "bots_rft.integrations.trl (the success reward function)")
        self.num_feeds = 0
        self.last_metrics: dict[str, float] = {}

    @property
    def last_task_ids(self) -> IntArray | None:
        return self.sampler.last_task_ids

    def fresh_inputs(self, inputs: list[Any]) -> list[Any]:
        """This process's rows of a chunk chosen now, replacing the placeholder rows."""
        acc = self.trainer.accelerator
        layout = self.sampler.chunk_rows(self.sampler.select_chunk())
        n_local = len(inputs)
        if n_local * acc.num_processes != layout.size:
            raise ConfigError(
                f"a local generation batch has {n_local} rows on {acc.num_processes} processes, but a chunk has "
                f"{layout.size} (generation_batch_size); is the data loader using the BOTS sampler?"
            )
        # Process r holds the r-th contiguous slice of the global generation batch (accelerate
        # shards the sampler's batches round-robin; TRL slices advantages the same way).
        mine = layout[acc.process_index * n_local : (acc.process_index + 1) * n_local]
        dataset = self.trainer.train_dataset
        return [dataset[int(row)] for row in mine]

    def after_reward(self, kwargs: dict[str, Any]) -> None:
        """Run by the wrapped reward function once TRL has called it: feed training rewards,
        drop evaluation rewards (they never reach the selector)."""
        if bool(self.trainer.model.training):
            self.feed(kwargs.get("log_metric"))
        else:
            self.recorder.take()

    def feed(self, log_metric: Callable[[str, float], None] | None = None) -> None:
        """Gather this generation's recorded rewards from every process, update the selector
        (every rank applies the same update, so every rank's selector stays identical) and log
        the ``bots/*`` metrics through ``log_metric`` (TRL's, when called from a reward function)."""
        ids, rewards = self.recorder.take()
        ids, succ = self._gather(ids, self._successes(rewards))
        ok = ~np.isnan(succ)  # a reward of None is not a trial
        metrics: dict[str, float] = {}
        pick = self.sampler.take_pick(ids)
        if pick is not None:
            metrics.update(pick.metrics())
        if np.any(ok):
            start = time.perf_counter()
            self.selector.update(ids[ok], succ[ok], 1.0)
            metrics["bots/update_ms"] = (time.perf_counter() - start) * 1e3
            metrics.update(outcome_metrics(ids[ok], succ[ok]))
            metrics.update(calibration_step_metrics(ids[ok], succ[ok], 1.0, pick.predictions() if pick else None))
            self.num_feeds += 1
        metrics.update(capability_metrics(self.selector))
        metrics.update(self._successes.metrics())
        self.last_metrics = metrics
        if log_metric is not None:
            for name, value in metrics.items():
                log_metric(name, value)

    def _gather(self, ids: IntArray, succ: FloatArray) -> tuple[IntArray, FloatArray]:
        acc = self.trainer.accelerator
        if acc.num_processes == 1:
            return ids, succ
        import torch

        # Equal row counts on every rank (TRL's even batches); ids < 2**53 are exact in float64.
        # Every rank calls the reward function at the same point, so this collective is matched.
        local = torch.as_tensor(np.stack([ids.astype(np.float64), succ], axis=1), device=acc.device)
        both = acc.gather(local).cpu().numpy()
        return both[:, 0].astype(np.int64), both[:, 1]

    def _generate_and_score(self, original: Callable[[list[Any]], Any], inputs: list[Any]) -> Any:
        if bool(self.trainer.model.training):
            inputs = self.fresh_inputs(inputs)
        return original(inputs)


def attach_bots(
    trainer: Any,
    selector: Any,
    *,
    task_id_column: str = "task_id",
    reward_func: int | str = 0,
    select_at: str = "generation",
    success_threshold: float | None = None,
    save_with_checkpoints: bool = True,
    resume_params: str = "error",
) -> BOTSTrainerHook:
    """Make a constructed ``trl.GRPOTrainer`` train on the prompts ``selector`` chooses.

    ``selector``: a :class:`bots_rft.BOTS` (or any :class:`bots_rft.selector.protocol.Selector`) over
    task ids ``0..num_tasks-1``; build it identically on every process (same seed and data).
    ``task_id_column``: the train dataset's task-id column (dotted path allowed); every row needs
    a distinct id in ``[0, num_tasks)``. ``reward_func``: index or name of the reward function
    whose value is the success signal (rewards are clipped into [0, 1], or thresholded with
    ``success_threshold``); it must be a Python function, not a reward model. ``select_at``:
    ``"generation"`` (default, no lag; wraps TRL's private generation step) or ``"fetch"``
    (public seams only, one generation of lag; see the module docstring).
    ``save_with_checkpoints`` writes the selector into each TRL checkpoint folder as
    :data:`SELECTOR_FILE` and loads it back when ``trainer.train(resume_from_checkpoint=...)``
    resumes from one (a checkpoint without the file is refused with a ``CheckpointError``).
    ``resume_params``: a saved selector whose parameters, references or pool differ from
    ``selector``'s is refused (``"error"``, the default), or the checkpoint's (``"checkpoint"``) or
    the selector's (``"current"``) win. ``selector.n_rollouts`` must equal ``num_generations``, and
    reference arrays are indexed by task id (:func:`~bots_rft.integrations.tasks.references_by_id`).
    """
    check_selector(selector)
    if select_at not in ("generation", "fetch"):
        raise InvalidArgumentError(f"select_at: must be 'generation' or 'fetch', got {select_at!r}", "select_at")
    check_resume_params(resume_params, "resume_params")
    check_trl(select_at)
    for attr in ("_get_train_sampler", "reward_funcs", "num_generations", "num_iterations", "accelerator"):
        if not hasattr(trainer, attr):
            raise ConfigError(
                f"trainer: {type(trainer).__name__} has no {attr!r}; attach_bots needs a trl GRPOTrainer (trl >= 0.18)"
            )
    if select_at == "generation":
        _check_generation_seam(trainer)
    args = trainer.args
    if getattr(args, "generation_batch_size", None) is None or getattr(args, "steps_per_generation", None) is None:
        raise ConfigError("trainer.args: no generation_batch_size/steps_per_generation; attach_bots needs trl >= 0.18")
    if getattr(args, "remove_unused_columns", False):
        raise ConfigError(
            "remove_unused_columns: must be False (GRPOConfig's default) so reward functions see the task-id column"
        )
    dataset = trainer.train_dataset
    if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise ConfigError("train_dataset: BOTS needs a map-style dataset (an IterableDataset cannot be indexed)")
    num_workers = int(getattr(args, "dataloader_num_workers", None) or 0)
    if select_at == "fetch" and num_workers > 0:
        raise ConfigError("dataloader_num_workers: must be 0 with select_at='fetch' (workers would prefetch chunks)")

    ids = column_values(dataset, task_id_column)
    rows = rows_of_tasks(ids, int(selector.num_tasks), task_id_column)
    gen_batch = int(args.generation_batch_size)
    num_generations = int(trainer.num_generations)
    check_rollouts(selector, num_generations, "num_generations")
    check_references_by_id(selector, dataset, ids, task_id_column)
    sampler = BOTSRepeatSampler(
        selector,
        rows,
        mini_repeat_count=num_generations,
        batch_size=gen_batch // num_generations,
        repeat_count=int(trainer.num_iterations) * int(args.steps_per_generation),
        defer=select_at == "generation",
    )
    recorder = RewardRecorder(task_id_column)
    index = _reward_index(trainer, reward_func)
    func = trainer.reward_funcs[index]
    if not callable(func) or _is_module(func):
        raise ConfigError(
            f"reward_func: {trainer.reward_func_names[index]!r} is a reward model; pick a Python reward function"
        )

    bind_pool(selector, ids, task_id_column, dataset)  # the last check: a resumed selector on another pool
    hook = BOTSTrainerHook(
        trainer, selector, sampler, recorder, select_at=select_at, success_threshold=success_threshold
    )
    trainer.reward_funcs[index] = recorder.wrap(func, after=hook.after_reward)
    # Instance attributes shadow the class's methods; the trainer calls them as usual.
    trainer._get_train_sampler = lambda dataset=None: sampler
    if select_at == "generation":
        original = trainer._generate_and_score_completions
        trainer._generate_and_score_completions = lambda inputs: hook._generate_and_score(original, inputs)
    if save_with_checkpoints:
        add_checkpointing(trainer, selector, params=resume_params)
    return hook


#: The trl releases :func:`attach_bots` was tested with (both ends tested).
TESTED_TRL = Window("trl", "1.16.0", "1.16.0", "bots_rft.integrations.trl")


def trl_seams(select_at: str = "generation") -> list[Seam]:
    """The ``GRPOTrainer`` methods :func:`attach_bots` replaces: the sampler hook (private but
    the one TRL documents for prompt order) and, with ``select_at="generation"``, the private
    generation step."""
    from trl import GRPOTrainer

    seams = [Seam(GRPOTrainer, "_get_train_sampler", "(self, dataset=)", "c0ce48638e78ccc9")]
    if select_at == "generation":
        seams.append(Seam(GRPOTrainer, "_generate_and_score_completions", "(self, inputs)", "3d5cec813b83b396"))
    return seams


def check_trl(select_at: str = "generation") -> list[str]:
    """:func:`bots_rft.integrations.gates.check_framework` for the installed trl."""
    return check_framework(TESTED_TRL, trl_seams(select_at))


def _check_generation_seam(trainer: Any) -> None:
    """Refuse a TRL whose private generation step no longer has the shape this adapter wraps."""
    method = getattr(type(trainer), "_generate_and_score_completions", None)
    try:
        params = list(inspect.signature(method).parameters) if callable(method) else None
    except (TypeError, ValueError):
        params = None
    if params != ["self", "inputs"]:
        raise ConfigError(
            f"select_at: 'generation' wraps {type(trainer).__name__}._generate_and_score_completions(self, inputs), "
            f"TRL's private generation step (trl 1.16), but this trainer has {params!r}; use select_at='fetch' "
            "(public seams only, selections one generation late) or a trl release this adapter supports"
        )


def load_selector(checkpoint_dir: str | os.PathLike[str], **kwargs: Any) -> Any:
    """The BOTS selector saved in a TRL checkpoint folder by :func:`attach_bots`."""
    from ..selector.bots import BOTS

    return BOTS.load(os.path.join(os.fspath(checkpoint_dir), SELECTOR_FILE), **kwargs)


def save_selector(selector: Any, checkpoint_dir: str | os.PathLike[str]) -> str:
    """Write ``selector`` into a checkpoint folder as :data:`SELECTOR_FILE`: a BOTS with its own
    ``save``, any other selector's state dict in the same checksummed format (never a pickle: a
    checkpoint must not be able to run code when loaded). Returns the path."""
    from ..checkpoint import save_state

    path = os.path.join(os.fspath(checkpoint_dir), SELECTOR_FILE)
    if hasattr(selector, "save"):
        os.makedirs(os.fspath(checkpoint_dir), exist_ok=True)
        selector.save(path)
    else:
        save_state(path, selector.state_dict())
    return path


def restore_selector(selector: Any, checkpoint_dir: str | os.PathLike[str], *, params: str = "error") -> None:
    """Load the selector state saved in a checkpoint folder into ``selector``, in place. A BOTS
    refuses a state whose parameters, evidence or pool differ unless ``params`` is
    ``"checkpoint"`` or ``"current"`` (see :meth:`bots_rft.BOTS.load_state_dict`); the refusal
    names the file and ``resume_params``."""
    from ..checkpoint import load_state

    check_resume_params(params, "resume_params")
    folder = os.fspath(checkpoint_dir)
    path = os.path.join(folder, SELECTOR_FILE)
    if os.path.isfile(path):
        load_selector_state(selector, load_state(path), params=params, knob="resume_params", source=path)
    else:
        raise CheckpointError(
            f"resume_from_checkpoint: {folder!r} holds no {SELECTOR_FILE} (written by a run without BOTS, or with "
            "save_with_checkpoints=False); attach with save_with_checkpoints=False to resume without restoring the selector"
        )


def add_checkpointing(
    trainer: Any,
    selector: Any,
    *,
    lock: Any = None,
    before_save: Callable[[], None] | None = None,
    on_restore: Callable[[], None] | None = None,
    params: str = "error",
) -> None:
    """Save ``selector`` with every checkpoint of a transformers ``Trainer`` (a callback) and
    restore it on ``trainer.train(resume_from_checkpoint=...)`` (the instance's ``train`` is
    wrapped; a folder or ``True`` for the newest checkpoint in ``output_dir``). ``lock``: held
    while saving or restoring, for a selector that other threads update; ``before_save`` runs
    before each save, ``on_restore`` after a restore; ``params``: as in :func:`restore_selector`."""
    guard = lock if lock is not None else contextlib.nullcontext()
    trainer.add_callback(_checkpoint_callback(selector, guard, before_save))
    original = trainer.train

    @functools.wraps(original)
    def train(resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
        folder = _checkpoint_to_resume(trainer.args.output_dir, resume_from_checkpoint)
        if folder is not None:
            with guard:
                restore_selector(selector, folder, params=params)
            if on_restore is not None:
                on_restore()
        return original(resume_from_checkpoint, *args, **kwargs)

    trainer.train = train


def _checkpoint_to_resume(output_dir: str, resume_from_checkpoint: Any) -> str | None:
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    if resume_from_checkpoint is True:
        from transformers.trainer_utils import get_last_checkpoint

        # None: transformers itself then refuses with "no valid checkpoint found".
        found: str | None = get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None
        return found
    return os.fspath(resume_from_checkpoint)


def _reward_index(trainer: Any, reward_func: int | str) -> int:
    names = list(getattr(trainer, "reward_func_names", []))
    if isinstance(reward_func, str):
        if reward_func not in names:
            raise InvalidArgumentError(
                f"reward_func: no reward function named {reward_func!r} (have {names})", "reward_func"
            )
        return names.index(reward_func)
    if (
        isinstance(reward_func, bool)
        or not isinstance(reward_func, int)
        or not 0 <= reward_func < len(trainer.reward_funcs)
    ):
        raise InvalidArgumentError(
            f"reward_func: must be a name or an index below {len(trainer.reward_funcs)}, got {reward_func!r}",
            "reward_func",
        )
    return reward_func


def _is_module(obj: Any) -> bool:
    try:
        import torch.nn as nn
    except ImportError:  # pragma: no cover - torch comes with trl
        return False
    return isinstance(obj, nn.Module)


def _checkpoint_callback(selector: Any, guard: Any, before_save: Callable[[], None] | None) -> Any:
    """A transformers ``TrainerCallback`` that saves the selector beside each checkpoint."""
    from transformers import TrainerCallback

    class BOTSCheckpointCallback(TrainerCallback):  # type: ignore[misc]
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                if before_save is not None:
                    before_save()
                with guard:
                    save_selector(selector, os.path.join(args.output_dir, f"checkpoint-{state.global_step}"))

    return BOTSCheckpointCallback()
