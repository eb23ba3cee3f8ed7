"""Task ids <-> dataset rows, and rewards -> successes: what every trainer integration needs.

A trainer's dataset is indexed by row; the selector by task id. A dataset carries each row's task
id in a column (``task_id``, or a nested path such as GURU/verl's ``extra_info.index``), and the
integrations translate both ways with a dense ``rows_of_task`` array (-1 where a task has no row).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, DataError, InvalidArgumentError, InvalidTypeError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

__all__ = [
    "column_values",
    "split_column",
    "task_id_of",
    "rows_of_tasks",
    "references_by_id",
    "bind_pool",
    "row_contents",
    "CONTENT_COLUMNS",
    "check_references_by_id",
    "check_rollouts",
    "load_selector_state",
    "successes_from_rewards",
    "RewardClip",
]

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


def _open_pool(pool: Any) -> Any:
    """A parquet file (a path) as a pandas DataFrame; anything else as it is."""
    if isinstance(pool, (str, os.PathLike)):
        path = os.fspath(pool)
        if not os.path.isfile(path):
            raise InvalidArgumentError(f"pool: {path!r} is not a file (a parquet file was expected)", "pool")
        import pandas as pd  # type: ignore[import-untyped]  # comes with datasets, verl and Trinity

        return pd.read_parquet(path)
    return pool


def references_by_id(
    pool: Any,
    columns: Sequence[str],
    *,
    task_id_column: str = "task_id",
    num_tasks: int | None = None,
) -> tuple[FloatArray, ...]:
    """Reference pass-rate columns of a pool, indexed by **task id**, as every estimator and
    selector reads them: ``out[i][k]`` is column ``columns[i]`` on the row whose task id is ``k``
    (NaN where no row has that id, and where the value is missing).

    ``pool``: a parquet file (path), a Hugging Face ``datasets.Dataset``, a pandas DataFrame or a
    list of row dicts. ``task_id_column`` and ``columns`` may be dotted paths into struct columns
    (``extra_info.index``); a name that is itself a column wins (GURU's ``qwen2.5_7b_pass_rate``).
    ``num_tasks``: the selector's pool size (default: the largest id + 1). Ids are checked as
    :func:`rows_of_tasks` checks them (integers in range, one row each)::

        weak, strong = references_by_id(ds, ["qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"],
                                        task_id_column="extra_info.index")
        sel = BOTS(len(weak), evidence=Interpolation(weak, strong))

    Reading the columns by row instead (``Interpolation(ds["weak"], ds["strong"])``) gives task
    ``k`` the references of row ``k``: right only while the ids are the row numbers."""
    frame = _open_pool(pool)
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns:
        raise InvalidArgumentError(f"columns: a list of column names, got {columns!r}", "columns")
    ids = [_as_id(v, task_id_column) for v in column_values(frame, task_id_column)]
    if num_tasks is None:
        num_tasks = max(ids) + 1 if ids else 0
    if num_tasks < 1:
        raise DataError(f"{task_id_column}: the pool has no rows")
    rows = rows_of_tasks(ids, int(num_tasks), task_id_column)
    has = rows >= 0
    out = []
    for column in columns:
        values = column_values(frame, column)
        try:
            per_row = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
        except (TypeError, ValueError):
            bad = next(v for v in values if not isinstance(v, (int, float, np.number, type(None))))
            raise DataError(f"{column}: reference pass rates must be numbers, got {bad!r:.60}") from None
        by_id = np.full(int(num_tasks), np.nan)
        by_id[has] = per_row[rows[has]]
        out.append(by_id)
    return tuple(out)


#: Columns whose value says what a task is (its prompt), in the order they are looked for.
CONTENT_COLUMNS = ("prompt", "messages", "question", "problem")


def _canonical(value: Any) -> Any:
    """A JSON-able form of a cell whatever the reader made of it (numpy arrays from parquet via
    pandas, lists from ``datasets``), so one pool hashes alike through either."""
    if isinstance(value, np.ndarray):
        return [_canonical(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return value


def row_contents(pool: Any) -> tuple[str, list[str]] | None:
    """(column, one hash per row) of the first of :data:`CONTENT_COLUMNS` the pool has: what each
    row's task is, for the pool's fingerprint; None when it has none of them."""
    import hashlib
    import json

    names = getattr(pool, "column_names", None)
    if names is None and hasattr(pool, "columns"):
        names = list(pool.columns)
    if names is None and isinstance(pool, Sequence) and pool and isinstance(pool[0], Mapping):
        names = list(pool[0])
    column = next((c for c in CONTENT_COLUMNS if c in set(names or ())), None)
    if column is None:
        return None
    out = []
    for value in column_values(pool, column):
        text = json.dumps(_canonical(value), sort_keys=True, default=str, ensure_ascii=False)
        out.append(hashlib.sha256(text.encode()).hexdigest()[:16])
    return column, out


def bind_pool(selector: Any, task_ids: Sequence[Any], column: str, pool: Any = None) -> None:
    """Bind ``selector`` to the pool whose rows carry ``task_ids`` (:meth:`bots_rft.BOTS.set_pool`:
    its checkpoints record the pool, and a state recorded on another pool is refused), with each
    row's prompt (:func:`row_contents`) when ``pool`` has one, so another pool of the same size
    and ids is told apart. A selector without ``set_pool`` is left alone."""
    set_pool = getattr(selector, "set_pool", None)
    if not callable(set_pool):
        return
    ids = [_as_id(v, column) for v in task_ids]
    contents = row_contents(pool) if pool is not None else None
    if contents is not None and len(contents[1]) != len(ids):
        contents = None  # a reader that filters rows (too long prompts): ids alone
    set_pool(ids, content=None if contents is None else contents[1], source=column)


def _reference_arrays(evidence: Any) -> list[tuple[str, FloatArray]]:
    """(name, per-task array) of the reference columns of a built-in estimator."""
    from ..estimators import Interpolation, MultiReference

    if isinstance(evidence, Interpolation):
        return [("weak", evidence.weak), ("strong", evidence.strong)]
    if isinstance(evidence, MultiReference):
        refs = np.asarray(evidence.state_dict()["references"], dtype=np.float64)
        return [(f"references[:, {i}]", refs[:, i]) for i in range(refs.shape[1])]
    return []


def _numeric_columns(pool: Any) -> list[str]:
    """Top-level float columns of a pool (candidates for reference pass rates), read from its
    schema where it has one (``datasets`` features, pandas dtypes), else from its first row."""
    features = getattr(pool, "features", None)
    if isinstance(features, Mapping):
        return [
            str(name)
            for name, feature in features.items()
            if str(getattr(feature, "dtype", "")).startswith(("float", "double", "half"))
        ]
    dtypes = getattr(pool, "dtypes", None)
    if dtypes is not None and hasattr(dtypes, "items"):
        return [str(name) for name, dtype in dtypes.items() if getattr(dtype, "kind", "") == "f"]
    if isinstance(pool, Sequence) and pool and isinstance(pool[0], Mapping):
        return [str(k) for k, v in pool[0].items() if v is None or isinstance(v, (float, np.floating))]
    return []


def check_references_by_id(selector: Any, pool: Any, task_ids: Sequence[Any], column: str) -> None:
    """Refuse a selector whose reference arrays were read from ``pool`` by row while the rows'
    task ids are not the row numbers: task ``k`` would get row ``k``'s references, another task's.

    Compared only when the ids are out of row order (otherwise row and id order agree): each
    reference array of the selector's estimator (an ``Interpolation``'s weak and strong, a
    ``MultiReference``'s columns) against each numeric column of the pool, as float32 (the
    precision estimators store). An array equal to a column in row order and not in id order is
    refused with a :class:`DataError` naming both and :func:`references_by_id`."""
    evidence = getattr(selector, "evidence", None)
    arrays = _reference_arrays(evidence) if evidence is not None else []
    ids = np.asarray([_as_id(v, column) for v in task_ids], dtype=np.int64)
    if not arrays or ids.size == 0 or np.array_equal(ids, np.arange(ids.size)):
        return
    for name in _numeric_columns(pool):
        try:
            values = np.array([np.nan if v is None else float(v) for v in column_values(pool, name)], np.float64)
        except (TypeError, ValueError):
            continue
        col = values.astype(np.float32)
        for label, ref in arrays:
            ref32 = np.asarray(ref, dtype=np.float64).astype(np.float32)
            if ref32.size < col.size or ids.max() >= ref32.size:
                continue
            by_row = np.array_equal(ref32[: col.size], col, equal_nan=True)
            by_id = np.array_equal(ref32[ids], col, equal_nan=True)
            if by_row and not by_id:
                raise DataError(
                    f"evidence: the selector's {type(evidence).__name__} {label} references are the pool's {name!r} "
                    f"column in row order, but the rows' task ids ({column}) are not the row numbers, so task k "
                    f"would get row k's references; build them by task id: "
                    f"references_by_id(pool, [...], task_id_column={column!r})"
                )


def check_selector(selector: Any, argument: str = "selector") -> None:
    """Refuse something that is not a selector (a method's name, a class, None) with an
    :class:`~bots_rft.errors.InvalidTypeError` naming the argument, before an adapter reads
    its attributes (which would raise a bare ``AttributeError``)."""
    if (
        isinstance(selector, type)
        or not all(callable(getattr(selector, name, None)) for name in ("select", "update"))
        or not isinstance(getattr(selector, "num_tasks", None), (int, np.integer))
    ):
        shown = repr(selector)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise InvalidTypeError(
            f"{argument}: must be a selector (bots_rft.BOTS or any bots_rft.selector.protocol.Selector, "
            f"built with the pool's size), got {shown}",
            argument,
        )


def missing_extra(exc: ModuleNotFoundError, module: str, extra: str = "integrations") -> ModuleNotFoundError:
    """The error an adapter module raises when a package it imports is missing: still a
    ModuleNotFoundError for the same package, with a message naming the extra that brings it."""
    package = (exc.name or "").split(".")[0]
    return ModuleNotFoundError(
        f"{module} needs {package}, from the [{extra}] extra: pip install 'bots-rft[{extra}]'", name=package
    )


def check_rollouts(selector: Any, rollouts: Any, key: str) -> None:
    """Refuse a selector whose rollouts per task (``n_rollouts``, n: how many pseudo-trials
    implicit evidence weighs) differ from the trainer's own setting ``key`` (its value
    ``rollouts``), with a :class:`~bots_rft.errors.ConfigError` naming both. A selector without
    ``n_rollouts`` is not checked."""
    n = getattr(selector, "n_rollouts", None)
    if n is None or rollouts is None:
        return
    if float(n) != float(rollouts):
        raise ConfigError(
            f"{key}: the trainer rolls out {rollouts} completions per task but the selector has n_rollouts={n:g}; "
            f"build the selector with n_rollouts={rollouts} (or change {key})"
        )


_RESUME_CHOICES = ("error", "checkpoint", "current")
_LOAD_HINT = "pass params='checkpoint' to take the state's, params='current' to keep this selector's"


def check_resume_params(params: Any, knob: str) -> str:
    """``params`` as :func:`load_selector_state` takes it, or an error naming ``knob``."""
    if params not in _RESUME_CHOICES:
        raise InvalidArgumentError(f"{knob}: must be 'error', 'checkpoint' or 'current', got {params!r}", knob)
    return str(params)


def load_selector_state(selector: Any, state: Any, *, params: str, knob: str, source: str) -> None:
    """``selector.load_state_dict(state)`` on a resume, with the adapter's ``params`` choice
    (``"error"``: a state whose parameters, evidence or pool differ is refused; ``"checkpoint"``
    / ``"current"``: which wins). The refusal names ``source`` (the checkpoint) and the adapter's
    own ``knob`` for the choice instead of ``params=``. A selector whose ``load_state_dict`` takes
    no ``params`` is loaded as it loads."""
    check_resume_params(params, knob)
    from ..errors import CheckpointError

    try:
        if params == "error":
            selector.load_state_dict(state)
        else:
            selector.load_state_dict(state, params=params)
    except CheckpointError as exc:
        text = str(exc).replace(
            _LOAD_HINT, f"set {knob}='checkpoint' to take the checkpoint's, {knob}='current' to keep this run's"
        )
        raise CheckpointError(f"{source}: {text}") from None


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
