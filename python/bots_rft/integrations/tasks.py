"""Task ids <-> dataset rows, and rewards -> successes: what every trainer integration needs.

A trainer's dataset is indexed by row; the selector by task id. A dataset carries each row's task
id in a column (``task_id``, or a nested path such as GURU/verl's ``extra_info.index``), and the
integrations translate both ways with a dense ``rows_of_task`` array (-1 where a task has no row).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import DataError, InvalidArgumentError, InvalidTypeError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = ["column_values", "split_column", "task_id_of", "rows_of_tasks", "successes_from_rewards", "RewardClip"]

logger = logging.getLogger("bots_rft.integrations")


def _dig(value: Any, path: Sequence[str], column: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            raise DataError(f"{column}: a row has no field {key!r} (got {value!r:.80})")
        value = value[key]
    return value


def split_column(column: str, names: Iterable[str]) -> tuple[str, list[str]]:
    """(top-level column, path inside it). A name that is itself a column wins, since real
    column names contain dots (GURU's ``qwen2.5_7b_pass_rate``)."""
    names = set(names)
    if column in names:
        return column, []
    head, *rest = column.split(".")
    return head, rest


def task_id_of(row: Mapping[str, Any], column: str) -> int:
    """The task id of one dataset row; ``column`` may be a dotted path (``extra_info.index``)."""
    head, rest = split_column(column, row)
    if head not in row:
        raise DataError(f"{column}: the row has no column {head!r} (columns: {sorted(row)})")
    return _as_id(_dig(row[head], rest, column), column)


def column_values(dataset: Any, column: str) -> list[Any]:
    """All values of ``column`` (dotted path allowed) from a Hugging Face ``datasets.Dataset``,
    a pandas DataFrame or a list of row dicts, without materialising other columns."""
    names = getattr(dataset, "column_names", None)
    if names is None and hasattr(dataset, "columns"):
        names = list(dataset.columns)
    if names is None and isinstance(dataset, Sequence) and dataset and isinstance(dataset[0], Mapping):
        head, rest = split_column(column, dataset[0])
    else:
        head, rest = split_column(column, names or ())
    if names is not None:
        if head not in names:
            raise DataError(f"{column}: the dataset has no column {head!r} (columns: {list(names)})")
        top: Iterable[Any] = dataset[head]
    elif isinstance(dataset, Sequence):
        top = [_dig(r, [head], column) for r in dataset]
    else:
        raise InvalidTypeError(f"dataset: cannot read column {column!r} from {type(dataset).__name__}", "dataset")
    return [_dig(v, rest, column) for v in top]


def _as_id(value: Any, column: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        # Parquet round trips sometimes turn ints into floats; accept exact ones.
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
        raise DataError(f"{column}: task ids must be integers, got {value!r}")
    return int(value)


def rows_of_tasks(task_ids: Sequence[Any], num_tasks: int, column: str = "task_id") -> IntArray:
    """``rows_of_task[k]`` = the dataset row holding task ``k``, or -1. Refuses ids outside
    ``[0, num_tasks)`` and ids that occur on two rows (rollouts could not be told apart)."""
    ids = np.fromiter((_as_id(v, column) for v in task_ids), dtype=np.int64, count=len(task_ids))
    if ids.size and (ids.min() < 0 or ids.max() >= num_tasks):
        bad = int(ids[(ids < 0) | (ids >= num_tasks)][0])
        raise DataError(f"{column}: task id {bad} is outside [0, {num_tasks}) (the selector's num_tasks)")
    rows = np.full(num_tasks, -1, dtype=np.int64)
    rows[ids] = np.arange(ids.size, dtype=np.int64)
    if np.count_nonzero(rows >= 0) != ids.size:
        uniq, counts = np.unique(ids, return_counts=True)
        dup = int(uniq[counts > 1][0])
        raise DataError(
            f"{column}: task id {dup} occurs on {int(counts[counts > 1][0])} rows; every row needs its own "
            "task id (GURU's extra_info.index restarts in every domain file: re-index the merged pool)"
        )
    return rows


def successes_from_rewards(rewards: Any, threshold: float | None = None) -> FloatArray:
    """Per-rollout success in [0, 1] from raw rewards; NaN (a reward function's None) stays NaN,
    meaning "not a trial". ``threshold=None`` clips rewards into [0, 1] (fractional successes);
    a number makes a rollout a success when its reward is above it."""
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    if threshold is None:
        return np.clip(r, 0.0, 1.0)  # NaN passes through clip
    if not np.isfinite(threshold):
        raise InvalidArgumentError(f"threshold: must be finite, got {threshold!r}", "threshold")
    out = (r > threshold).astype(np.float64)
    out[np.isnan(r)] = np.nan
    return out


class RewardClip:
    """Rewards -> successes for one integration, never silently: :func:`successes_from_rewards`
    plus a count of the rewards it clipped.

    BOTS reads a reward as a success rate in [0, 1]. A reward outside it (1.5 from a reward function
    that adds a format bonus, -0.1 from a format penalty, 3 from a sum of three checks) is clipped
    into [0, 1], not refused: one odd reward must not stop a long training run. The first clipped
    reward is logged as a warning that names ``where``, the value and the two remedies;
    :attr:`clipped` counts every clipped reward since construction and :meth:`metrics` reports it
    as ``bots/clipped_rewards`` from the first one on. With ``threshold`` set nothing is clipped:
    every reward is compared with it. Safe to call from several threads."""

    def __init__(self, threshold: float | None, where: str) -> None:
        self.threshold = None if threshold is None else float(threshold)
        successes_from_rewards([0.0], self.threshold)  # validates the threshold now
        self.where = where
        self.clipped = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # The lock is this process's; a sampler pickled with its clip (verl's checkpoints, Ray's
        # object store) gets a fresh one.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __call__(self, rewards: Any) -> FloatArray:
        r = np.asarray(rewards, dtype=np.float64).reshape(-1)
        succ = successes_from_rewards(r, self.threshold)
        if self.threshold is None:
            outside = (r < 0.0) | (r > 1.0)  # NaN (not a trial) compares false
            count = int(np.count_nonzero(outside))
            if count:
                with self._lock:
                    first = self.clipped == 0
                    self.clipped += count
                if first:
                    # A framework's logging set-up (logging.config.dictConfig, whose default
                    # disable_existing_loggers=True) disables loggers made before it, ours
                    # included; this warning is the point of clipping loudly, so undo that.
                    logger.disabled = False
                    logger.warning(
                        f"{self.where}: reward {float(r[outside][0])!r} is outside [0, 1]; BOTS reads rewards as "
                        "success rates, so it was clipped into [0, 1] (bots/clipped_rewards counts this and every "
                        "later one). Feed BOTS a reward on [0, 1], or set success_threshold"
                    )
        return succ

    def metrics(self) -> dict[str, float]:
        """``{"bots/clipped_rewards": count}`` once a reward was clipped, else nothing."""
        return {"bots/clipped_rewards": float(self.clipped)} if self.clipped else {}
