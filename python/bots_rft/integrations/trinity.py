"""BOTS as a Trinity-RFT (0.6) task selector.

Trinity picks each taskset's tasks with a ``data_selector`` and imports a dotted
``selector_type`` itself, so a Trinity YAML switches to BOTS with one word::

    buffer:
      explorer_input:
        taskset:
          data_selector:
            selector_type: bots_rft.integrations.trinity.BOTSSelector   # was: difficulty_based
            feature_keys: [qwen2.5_7b_pass_rate, qwen3_30b_pass_rate]    # [weak, strong]
            kwargs: {m: 16, lamb: 0.1, rho: 0.1, target_reward: 0.5, tau: 0, do_sample: true}
    data_processor:
      experience_pipeline:
        operators:
          - name: pass_rate_calculator      # first: it must see every task, filtered or not
          - name: dapo_dynamic_sampling     # (optional) filters after it

The kwargs of Trinity's own ``difficulty_based`` selector keep their meaning and their defaults
(see :class:`BOTSSelector`), so its configs run unchanged; what BOTS adds is a posterior that
survives checkpoints, selection that skips tasks whose results have not come back yet, and the
Rust core for the paper's greedy/Thompson rule (``tau: 0``).

Trinity feeds a selector only through ``pass_rate_calculator``: after each explore step it hands
``feedback(indices, values)`` the mean reward of every task that reached that operator. Listed
after a filter (``dapo_dynamic_sampling``), it never sees the all-correct and all-wrong groups the
filter dropped, and those tasks drift back to the prior mean 0.5, the target, and are picked
again and again. List it first.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import contextvars
import inspect
import math
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Trinity's registry accepts any class; subclassing its base documents the contract and keeps
# Trinity's own isinstance checks (if a later release adds them) happy.
from trinity.buffer.selector.selector import BaseSelector

from .. import _core
from .._validation import FloatArray, IntArray, as_bool, as_floats, as_ids, as_int, as_real
from ..checkpoint import from_bytes, load_state, to_bytes
from ..data.embeddings import embeddings_for
from ..errors import BotsError, CheckpointError, ConfigError, DataError, InvalidArgumentError, InvalidTypeError
from ..estimators import EmbeddingRegression, Estimator, Interpolation, Similarity
from ..estimators import from_state as estimator_from_state
from ..metrics.step import calibration_step_metrics, capability_metrics, outcome_metrics, pick_metrics
from ..parameters import (
    ADAPTIVE_RHO,
    LAM,
    MIN_GAP,
    MOMENTUM,
    PRIOR_PRECISION,
    PSEUDO_ROLLOUTS,
    RHO,
    TARGET,
    TAU,
    THOMPSON,
    Parameter,
)
from ..selector.bots import BOTS, DEFAULT_PRIOR
from ..selector.bots.state import describe_evidence, evidence_identity
from .gates import Seam, Window, check_framework
from .tasks import column_values

__all__ = [
    "BOTSSelector",
    "AUTHOR_DEFAULTS",
    "STATE_FORMAT",
    "TESTED_TRINITY",
    "check_trinity",
    "trinity_seams",
    "check_config",
    "whole_config",
    "preflight",
]

#: The trinity-rft releases BOTSSelector was tested with (both ends tested).
TESTED_TRINITY = Window("trinity-rft", "0.6.0", "0.6.0", "bots_rft.integrations.trinity")


def trinity_seams() -> list[Seam]:
    """The selector contract BOTSSelector implements (``BaseSelector``'s methods, which Trinity's
    reader and scheduler call), and ``TasksetScheduler.__init__``, whose ``config`` argument (the
    whole Trinity config) the selector reads to run its config checks (:func:`check_config`)."""
    from trinity.buffer.task_scheduler import TasksetScheduler

    return [
        Seam(TasksetScheduler, "__init__", "(self, explorer_state, config)", "5f03b007b336ff3e"),
        Seam(BaseSelector, "__init__", "(self, data_source, config)", "72c40e7f241ec5ff"),
        Seam(BaseSelector, "get_indices", "(self, batch_size, return_extra_info=)", "65dbd5bafee263fd"),
        Seam(BaseSelector, "feedback", "(self, indices, values)", "f205581fe341d348"),
        Seam(BaseSelector, "state_dict", "(self)", "ab0d060370db23a7"),
        Seam(BaseSelector, "load_state_dict", "(self, state_dict)", "e3e1bd5cd3713c62"),
    ]


def check_trinity() -> list[str]:
    """:func:`trinity_seams` against the installed trinity-rft (:func:`bots_rft.integrations.gates.check_framework`)."""
    return check_framework(TESTED_TRINITY, trinity_seams())


STATE_FORMAT = "bots-rft/trinity-selector"
STATE_VERSION = 1

#: The defaults of Trinity's ``difficulty_based`` selector (``DifficultyBasedSelector`` and its
#: ``InterpolationBetaPREstimator``), which BOTSSelector keeps so that its configs behave the same.
AUTHOR_DEFAULTS: dict[str, Any] = {
    "m": 16,
    "lamb": 0.2,
    "rho": 0.2,
    "adaptive_rho": False,
    "do_sample": False,
    "target_reward": 1.0,
    "tau": 1.0,
}

# difficulty_based's name -> this package's name for the same parameter (rho is spelled alike).
_ALIASES = {"m": "n_rollouts", "lamb": "lam", "target_reward": "target", "do_sample": "thompson"}
_OWN_KEYS = (
    "lam",
    "rho",
    "target",
    "n_rollouts",
    "thompson",
    "tau",
    "momentum",
    "min_gap",
    "prior_alpha",
    "prior_beta",
    "reward_range",
    "threads",
    "state_dir",
    "exclude_in_flight",
    "embeddings",
    "estimator",
    "prior_precision",
    "task_id_column",
)
#: ``kwargs.estimator``: what learns from the task embeddings of ``kwargs.embeddings``.
ESTIMATORS = ("regression", "similarity")
#: ``kwargs.task_id_column`` by default: the pool's task ids ``bots embed`` keys its file by.
DEFAULT_TASK_ID_COLUMN = "extra_info.index"
_ACCEPTED = tuple(sorted(set(_ALIASES) | {"adaptive_rho"} | set(_OWN_KEYS)))

# Above this many tasks, a posterior kept inside Trinity's explorer_meta.json (which Trinity also
# prints when it resumes) gets large enough that a side file is the better place.
_INLINE_WARN_TASKS = 100_000


@dataclass(frozen=True)
class _Settings:
    """The selector's parameters after aliases, defaults and validation."""

    lam: float
    rho: float
    n_rollouts: float
    thompson: bool
    target: float
    tau: float
    momentum: float
    min_gap: float
    prior_alpha: float
    prior_beta: float
    reward_low: float
    reward_high: float
    seed: int
    threads: int | None
    state_dir: str | None
    adaptive_rho: bool = ADAPTIVE_RHO.default
    exclude_in_flight: bool = True
    #: Task embeddings (``kwargs.embeddings``): the file, the estimator (None: no embeddings), the
    #: regression's prior precision (None unless the regression) and the column whose ids key the file.
    embeddings: str | None = None
    estimator: str | None = None
    prior_precision: float | None = None
    task_id_column: str = DEFAULT_TASK_ID_COLUMN

    def fingerprint(self) -> dict[str, Any]:
        """What a checkpoint must agree with to resume (threads, state_dir and exclude_in_flight,
        which change no posterior, may change; the task embeddings' options are compared by what
        they give, the estimator's kind, the embeddings' hash and its prior precision, in
        :meth:`BOTSSelector._check_evidence`, naming the kwarg)."""
        out = asdict(self)
        embedding_keys = ("embeddings", "estimator", "prior_precision", "task_id_column")
        for key in ("threads", "state_dir", "exclude_in_flight", *embedding_keys):
            del out[key]
        return out


def _config_error(key: str, exc: BotsError) -> ConfigError:
    return ConfigError(f"kwargs.{key}: {str(exc).split(': ', 1)[-1]}")


def _resolve(kwargs: Mapping[str, Any], seed: Any) -> _Settings:
    """Map ``data_selector.kwargs`` (difficulty_based's names or ours) to validated settings."""
    if not isinstance(kwargs, Mapping):
        raise ConfigError(f"kwargs: must be a mapping, got {type(kwargs).__name__}")
    unknown = sorted(str(k) for k in kwargs if k not in _ACCEPTED)
    if unknown:
        hint = " (set data_selector.seed, the field Trinity's selectors read)" if unknown == ["seed"] else ""
        raise ConfigError(f"kwargs.{unknown[0]}: unknown option{hint}; accepted: {', '.join(_ACCEPTED)}")
    for theirs, ours in _ALIASES.items():
        if theirs in kwargs and ours in kwargs:
            raise ConfigError(f"kwargs.{theirs} and kwargs.{ours} name the same parameter; give one of them")

    def given(ours: str) -> tuple[str, Any]:
        """(the key the user wrote, its value), falling back to difficulty_based's default."""
        theirs = next((t for t, o in _ALIASES.items() if o == ours), ours)
        for key in (ours, theirs):
            if key in kwargs:
                return key, kwargs[key]
        return theirs, AUTHOR_DEFAULTS[theirs]

    def real(key: str, value: Any, low: float, high: float, open_low: bool = False) -> float:
        """A setting of Trinity's alone (not one of the selector's parameters)."""
        try:
            v = as_real(value, key)
        except BotsError as exc:
            raise _config_error(key, exc) from None
        if not (math.isfinite(v) and (v > low if open_low else v >= low) and v <= high):
            bound = f"({low}, {high}]" if open_low else f"[{low}, {high}]"
            raise ConfigError(f"kwargs.{key}: must be in {bound}, got {v}")
        return v

    def checked(parameter: Parameter, key: str, value: Any) -> Any:
        """A parameter of the selector, under the key the user wrote: the catalogue's check (the
        same range and message BOTS gives), as a ConfigError naming ``kwargs.<key>``."""
        try:
            return parameter.check(value, f"kwargs.{key}")
        except (InvalidArgumentError, InvalidTypeError) as exc:
            raise ConfigError(str(exc)) from None

    # difficulty_based's names mapped to ours (with its defaults where a key is absent), then
    # checked as BOTS checks them.
    adaptive_rho = checked(ADAPTIVE_RHO, *given("adaptive_rho"))
    lam = checked(LAM, *given("lam"))
    rho = checked(RHO, *given("rho"))
    n_rollouts = checked(PSEUDO_ROLLOUTS, *given("n_rollouts"))
    thompson = checked(THOMPSON, *given("thompson"))
    target = checked(TARGET, *given("target"))
    tau = checked(TAU, *given("tau"))
    momentum = checked(MOMENTUM, "momentum", kwargs.get("momentum", MOMENTUM.default))
    min_gap = checked(MIN_GAP, "min_gap", kwargs.get("min_gap", MIN_GAP.default))
    try:
        exclude_in_flight = as_bool(kwargs.get("exclude_in_flight", True), "exclude_in_flight")
    except BotsError as exc:
        raise _config_error("exclude_in_flight", exc) from None
    prior_alpha = real("prior_alpha", kwargs.get("prior_alpha", DEFAULT_PRIOR), 0.0, math.inf, open_low=True)
    prior_beta = real("prior_beta", kwargs.get("prior_beta", DEFAULT_PRIOR), 0.0, math.inf, open_low=True)
    reward_range = kwargs.get("reward_range", (0.0, 1.0))
    if isinstance(reward_range, str) or not isinstance(reward_range, Sequence) or len(reward_range) != 2:
        raise ConfigError(f"kwargs.reward_range: must be [low, high], got {reward_range!r}")
    low = real("reward_range", reward_range[0], -math.inf, math.inf, open_low=True)
    high = real("reward_range", reward_range[1], -math.inf, math.inf, open_low=True)
    if not low < high:
        raise ConfigError(f"kwargs.reward_range: low must be below high, got {list(reward_range)!r}")
    threads = kwargs.get("threads")
    if threads is not None:
        try:
            threads = as_int(threads, "threads", minimum=1, maximum=1024)
        except BotsError as exc:
            raise _config_error("threads", exc) from None
    state_dir = kwargs.get("state_dir")
    if state_dir is not None:
        if not isinstance(state_dir, (str, os.PathLike)) or not str(state_dir):
            raise ConfigError(f"kwargs.state_dir: must be a directory path, got {state_dir!r}")
        state_dir = os.path.abspath(os.fspath(state_dir))
        if os.path.exists(state_dir) and not os.path.isdir(state_dir):
            raise ConfigError(f"kwargs.state_dir: {state_dir!r} exists and is not a directory")
    try:
        seed_value = as_int(seed, "seed", minimum=0, maximum=2**63 - 1)
    except BotsError as exc:
        raise ConfigError(f"data_selector.seed: {str(exc).split(': ', 1)[-1]}") from None
    embeddings, estimator, prior_precision, task_id_column = _embedding_options(kwargs)
    return _Settings(
        lam,
        rho,
        n_rollouts,
        thompson,
        target,
        tau,
        momentum,
        min_gap,
        prior_alpha,
        prior_beta,
        low,
        high,
        seed_value,
        threads,
        state_dir,
        adaptive_rho,
        exclude_in_flight,
        embeddings=embeddings,
        estimator=estimator,
        prior_precision=prior_precision,
        task_id_column=task_id_column,
    )


def _embedding_options(kwargs: Mapping[str, Any]) -> tuple[str | None, str | None, float | None, str]:
    """``kwargs.embeddings`` / ``estimator`` / ``prior_precision`` / ``task_id_column``, checked:
    (file, estimator, prior precision, id column); the last three only go with a file."""
    path = kwargs.get("embeddings")
    if path is None:
        for key in ("estimator", "prior_precision", "task_id_column"):
            if kwargs.get(key) is not None:
                raise ConfigError(
                    f"kwargs.{key}: set without kwargs.embeddings (the task embeddings file it applies to)"
                )
        return None, None, None, DEFAULT_TASK_ID_COLUMN
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise ConfigError(f"kwargs.embeddings: must be the path of an embeddings file (bots embed), got {path!r}")
    estimator = kwargs.get("estimator", "regression")
    if estimator not in ESTIMATORS:
        raise ConfigError(f"kwargs.estimator: must be regression or similarity, got {estimator!r}")
    prior_precision = None
    if estimator == "regression":
        try:
            prior_precision = float(
                PRIOR_PRECISION.check(kwargs.get("prior_precision", PRIOR_PRECISION.default), "kwargs.prior_precision")
            )
        except (InvalidArgumentError, InvalidTypeError) as exc:
            raise ConfigError(str(exc)) from None
    elif kwargs.get("prior_precision") is not None:
        raise ConfigError(
            f"kwargs.prior_precision: only estimator: regression reads it (kwargs.estimator is {estimator})"
        )
    column = kwargs.get("task_id_column", DEFAULT_TASK_ID_COLUMN)
    if not isinstance(column, str) or not column:
        raise ConfigError(f"kwargs.task_id_column: must be a column name, got {column!r}")
    return os.fspath(path), str(estimator), prior_precision, column


def _reference(dataset: Any, key: Any, position: int) -> FloatArray:
    """One reference pass-rate column (None or NaN: unknown), as difficulty_based reads it: raw."""
    if not isinstance(key, str):
        raise ConfigError(f"feature_keys[{position}]: must be a column name, got {key!r}")
    values = column_values(dataset, key)
    try:
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(v for v in values if not isinstance(v, (int, float, np.number, type(None))))
        raise DataError(f"feature_keys[{position}] {key!r}: pass rates must be numbers, got {bad!r:.60}") from None


def _plain_id(value: Any) -> Any:
    """A task id as the embeddings file keys it (int or str): numpy scalars as Python values,
    and integral floats (a parquet round trip can turn integer ids into floats) as ints."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _embedding_evidence(dataset: Any, settings: _Settings, num_tasks: int) -> Estimator:
    """The estimator on ``kwargs.embeddings``: row ``r`` of the matrix is the embedding of the
    task on dataset row ``r`` (Trinity's index), found in the file by that row's
    ``kwargs.task_id_column`` value (the pool's task ids, which ``bots embed`` keys the file by)."""
    assert settings.embeddings is not None
    column = settings.task_id_column
    try:
        values = column_values(dataset, column)
    except BotsError as exc:
        raise DataError(f"kwargs.task_id_column {column!r}: {str(exc).split(': ', 1)[-1]}") from None
    if len(values) != num_tasks:
        raise DataError(f"kwargs.task_id_column {column!r}: {len(values)} task ids for {num_tasks} dataset rows")
    ids = [_plain_id(v) for v in values]
    try:
        matrix = embeddings_for(settings.embeddings, ids, argument="kwargs.embeddings")
    except (InvalidArgumentError, InvalidTypeError) as exc:
        raise DataError(f"kwargs.task_id_column {column!r}: {str(exc).split(': ', 1)[-1]}") from None
    if settings.estimator == "similarity":
        return Similarity(matrix)
    assert settings.prior_precision is not None
    # The regression forgets at the selector's own λ, so its evidence fades as the posteriors' does.
    return EmbeddingRegression(matrix, forgetting=settings.lam, prior_precision=settings.prior_precision)


def _interpolation(dataset: Any, feature_keys: Any, settings: _Settings) -> Interpolation | None:
    """difficulty_based's feature_keys are [weak, strong]: its prediction is
    clip(weak + mu·(strong − weak), 0, 1), so mu = 0 is the first column and mu = 1 the second."""
    keys = list(feature_keys or [])
    if not keys:
        return None
    if len(keys) != 2:
        raise ConfigError(
            f"feature_keys: needs exactly 2 columns [weak, strong] (reference pass rates) or none, got {keys!r}"
        )
    weak, strong = (_reference(dataset, k, i) for i, k in enumerate(keys))
    try:
        return Interpolation(weak, strong, settings.momentum, min_gap=settings.min_gap)
    except InvalidArgumentError as exc:
        which = 0 if exc.argument == "weak" else 1
        detail = str(exc).split(": ", 1)[-1]
        raise DataError(f"feature_keys[{which}] {keys[which]!r}: {detail}") from None


class BOTSSelector(BaseSelector):
    """Bayesian Online Task Selection for one Trinity taskset.

    ``data_source`` is Trinity's batch reader (its ``dataset`` and ``dataset_size``); ``config``
    is the taskset's ``data_selector``: ``seed`` (default 42), ``feature_keys`` ([weak, strong]
    reference pass-rate columns for implicit evidence, or none) and ``kwargs``.

    kwargs of ``difficulty_based``, same meaning and defaults:

    - ``m`` (16): rollouts per task (set it to ``algorithm.repeat_times``, which selectors cannot
      see). A mean reward v counts as v·m successes in m trials, and implicit evidence weighs
      ρ·m pseudo-trials. Alias ``n_rollouts``.
    - ``lamb`` (0.2): λ, each update's discount toward the Beta(1, 1) prior. Alias ``lam``.
    - ``rho`` (0.2): ρ, the weight of implicit evidence.
    - ``do_sample`` (false): Thompson sampling from the posterior, else its mean. Alias ``thompson``.
    - ``target_reward`` (1.0): the success rate to aim at. Alias ``target``.
    - ``tau`` (1.0): 0 picks the ``batch_size`` tasks nearest the target (the paper's rule, run by
      the Rust core); > 0 samples without replacement from softmax(−|target − p̂| / tau) over the
      pool, seeded as difficulty_based seeds it (the same picks for the same posterior).
    - ``adaptive_rho`` (false): halve rho whenever the interpolation's predictions for a fed
      batch miss its mean rewards by 0.25 or more on average (:attr:`bots_rft.BOTS.rho_in_use`).

    The paper's BOTS is ``m: <repeat_times>, lamb: 0.1, rho: 0.1, target_reward: 0.5, tau: 0,
    do_sample: true``. Further kwargs: ``momentum`` (0.9) and ``min_gap`` of the interpolation
    estimator, ``prior_alpha``/``prior_beta`` (1.0), ``reward_range`` ([0, 1], see
    :meth:`feedback`), ``threads`` and ``state_dir`` (see :meth:`state_dict`).

    Task embeddings instead of reference columns (no reference model needed; ``feature_keys``
    empty): ``embeddings`` (a ``bots embed`` file), ``estimator`` (``regression``, the default:
    :class:`~bots_rft.estimators.EmbeddingRegression`, forgetting at ``lamb``, with
    ``prior_precision``, default 0.25; or ``similarity``: :class:`~bots_rft.estimators.Similarity`)
    and ``task_id_column`` (default ``extra_info.index``): row r's task is looked up in the file by
    that column's value on row r. A task missing from the file is refused naming
    ``kwargs.embeddings``; so is a resume whose embeddings differ from the checkpoint's.

    ``exclude_in_flight`` (true): tasks handed out whose feedback has not arrived (Trinity
    reports at sync boundaries, after ``sync_interval`` further reads) are not picked again until
    it does; when fewer than ``batch_size`` other tasks remain, the batch is completed from them.
    False picks as ``difficulty_based`` does, pending tasks included (with ``tau > 0``, the same
    picks for the same seed and feedback).

    Built by Trinity's ``TasksetScheduler``, the selector also checks the whole config
    (:func:`check_config`): ``m`` against ``algorithm.repeat_times``, and the experience
    operators' order.
    """

    def __init__(self, data_source: Any, config: Any) -> None:
        check_trinity()
        super().__init__(data_source, config)
        from trinity.utils.log import get_logger  # not at import time: Trinity's advice for Ray actors

        self._logger = get_logger("bots_selector")
        self._settings = _resolve(getattr(config, "kwargs", None) or {}, getattr(config, "seed", 42))
        whole = _whole_config()
        if whole is not None:
            for line in check_config(whole):
                self._logger.warning(line)
        else:
            self._logger.warning(
                "BOTSSelector: built with whole_config(None): the checks of algorithm.repeat_times and the "
                "experience operators were left to the caller"
            )
        self._num_tasks = as_int(data_source.dataset_size, "dataset_size", minimum=1)
        self._name = re.sub(r"[^A-Za-z0-9._-]+", "_", str(getattr(data_source, "name", "") or "taskset"))
        self._evidence = self._implicit_evidence(data_source.dataset, getattr(config, "feature_keys", None))
        self._bots = self._new_bots()
        self._current_index = 0  # tasks handed out so far, as difficulty_based counts (and seeds) them
        self._reads = 0
        self._pending: dict[int, int] = {}  # task index -> the read (1, 2, ...) that handed it out
        self._last_file: str | None = None
        # Side files carry the run's id, so a new run pointed at an old state_dir never prunes
        # the old run's files; a resumed run keeps the id it saved.
        self._run_id = secrets.token_hex(4)
        self._metrics: dict[str, float] = {}
        # Each pending task's posterior mean when picked (for bots/calibration_*); metrics only.
        self._predicted: dict[int, float] = {}
        self._clipped = 0
        self._lock = threading.RLock()
        if self._settings.state_dir is None and self._num_tasks > _INLINE_WARN_TASKS:
            self._logger.warning(
                f"BOTSSelector: {self._num_tasks} tasks and no kwargs.state_dir: the posterior "
                f"(about {32 * self._num_tasks // 2**20} MiB) will be stored inside Trinity's explorer state file"
            )

    def _implicit_evidence(self, dataset: Any, feature_keys: Any) -> Estimator | None:
        """Interpolation on ``feature_keys``, an estimator on ``kwargs.embeddings``, or None."""
        if self._settings.embeddings is None:
            return _interpolation(dataset, feature_keys, self._settings)
        if list(feature_keys or []):
            raise ConfigError(
                "feature_keys and kwargs.embeddings: implicit evidence comes either from reference pass-rate "
                "columns or from task embeddings; set one of them (feature_keys: [] with embeddings)"
            )
        return _embedding_evidence(dataset, self._settings, self._num_tasks)

    def _new_bots(self) -> BOTS:
        s = self._settings
        # A fresh copy each time: an estimator learns (the regression's weights), the template must not.
        evidence: Estimator | None = None
        if isinstance(self._evidence, Interpolation):
            evidence = Interpolation.from_state_dict(self._evidence.state_dict())
        elif self._evidence is not None:
            evidence = estimator_from_state(self._evidence.state_dict())
        return BOTS(
            self._num_tasks,
            lam=s.lam,
            rho=s.rho,
            target=s.target,
            n_rollouts=s.n_rollouts,
            thompson=s.thompson,
            prior_alpha=s.prior_alpha,
            prior_beta=s.prior_beta,
            evidence=evidence,
            seed=s.seed,
            threads=s.threads,
            adaptive_rho=s.adaptive_rho,
        )

    # ------------------------------------------------------------------------------- views
    @property
    def bots(self) -> BOTS:
        """The underlying :class:`bots_rft.BOTS` (posterior, capability, parameters)."""
        return self._bots

    @property
    def pending(self) -> list[int]:
        """Task indices handed out whose feedback has not arrived, ascending."""
        with self._lock:
            return sorted(self._pending)

    def metrics(self) -> dict[str, float]:
        """The latest selection and update figures (Trinity 0.6 gives selectors no channel to its
        monitor; they are also logged after each feedback)."""
        with self._lock:
            return dict(self._metrics)

    # ------------------------------------------------------------------------------- selection
    def get_indices(self, batch_size: int, return_extra_info: bool = False) -> Any:
        """``batch_size`` distinct task indices. With ``return_extra_info``, ``(indices, info)``
        where ``info`` has difficulty_based's keys: ``indices``, ``scores`` (−|target − p̂|, p̂ the
        sampled or mean rate the choice used), ``alphas``, ``betas`` and ``point`` (α/(α+β))."""
        k = as_int(batch_size, "batch_size", minimum=0)
        if k > self._num_tasks:
            raise InvalidArgumentError(f"batch_size: {k} exceeds the pool of {self._num_tasks} tasks", "batch_size")
        with self._lock:
            start = time.perf_counter()
            pending = np.fromiter(self._pending, dtype=np.int64, count=len(self._pending))
            if not self._settings.exclude_in_flight:
                pending = pending[:0]  # difficulty_based's behaviour: pending tasks may be picked again
            if self._settings.tau == 0.0:
                picks, p_hat = self._select_nearest(k, pending, return_extra_info)
            else:
                picks, p_hat = self._select_softmax(k, pending)
            elapsed = time.perf_counter() - start
            self._current_index += k
            self._reads += 1
            for i in picks.tolist():
                self._pending[i] = self._reads
            self._metrics.update({"bots/select_ms": 1e3 * elapsed, "bots/inflight_tasks": float(len(self._pending))})
            alphas, betas = self._bots.posterior(picks)
            self._metrics.update(pick_metrics(alphas / (alphas + betas)))
            self._predicted.update(zip(picks.tolist(), (alphas / (alphas + betas)).tolist()))
            if not return_extra_info:
                return picks.tolist()
            assert p_hat is not None
            info = {
                "indices": picks.tolist(),
                "scores": (-np.abs(self._settings.target - p_hat)).tolist(),
                "alphas": alphas.tolist(),
                "betas": betas.tolist(),
                "point": (alphas / (alphas + betas)).tolist(),
            }
            return picks.tolist(), info

    def _select_nearest(self, k: int, pending: IntArray, want_scores: bool) -> tuple[IntArray, FloatArray | None]:
        """The paper's rule on the Rust core, pending tasks excluded while enough others remain."""
        parts: list[tuple[IntArray, int]] = []
        free = min(k, self._num_tasks - pending.size)
        if free:
            counter = self._bots.num_selections
            parts.append((self._bots.select(free, exclude=pending if pending.size else None), counter))
        if free < k:  # every other task is in parts[0]: the rest come from the pending ones
            taken = parts[0][0] if parts else None
            counter = self._bots.num_selections
            parts.append((self._bots.select(k - free, exclude=taken), counter))
        picks = np.concatenate([p for p, _ in parts]) if parts else np.empty(0, dtype=np.int64)
        if not want_scores:
            return picks, None
        if not self._settings.thompson:
            a, b = self._bots.posterior(picks)
            return picks, a / (a + b)
        alpha, beta = self._bots.alpha, self._bots.beta
        # The core keeps its draws; thompson_draws replays them from the same (seed, counter).
        seed, threads = self._bots.params["seed"], self._bots.threads
        draws = [_core.thompson_draws(alpha, beta, seed, c, threads=threads)[p].astype(np.float64) for p, c in parts]
        return picks, np.concatenate(draws) if draws else np.empty(0)

    def _select_softmax(self, k: int, pending: IntArray) -> tuple[IntArray, FloatArray]:
        """difficulty_based's rule for tau > 0, with its seeding, so that the same posterior gives
        the same picks: p̂ (a Beta draw or the mean), then k draws without replacement from
        softmax(−|target − p̂| / tau), pending tasks left out while enough others remain."""
        import torch  # a dependency of Trinity itself

        s = self._settings
        alpha, beta = self._bots.alpha, self._bots.beta
        rng = np.random.default_rng(s.seed + self._current_index)
        p_hat = rng.beta(alpha, beta) if s.thompson else alpha / (alpha + beta)
        logits = torch.from_numpy(-np.abs(s.target - p_hat)) / s.tau
        logits -= logits.max()
        probs = torch.softmax(logits, dim=0)
        gen = torch.Generator()
        gen.manual_seed(s.seed + self._current_index)
        free = min(k, self._num_tasks - pending.size)
        if not pending.size:
            picks = torch.multinomial(probs, k, replacement=False, generator=gen).numpy()
        else:
            parts = []
            if free:
                weights = probs.clone()
                weights[torch.from_numpy(pending)] = 0.0
                parts.append(torch.multinomial(weights, free, replacement=False, generator=gen).numpy())
            if free < k:
                weights = torch.zeros_like(probs)
                weights[torch.from_numpy(pending)] = probs[torch.from_numpy(pending)]
                parts.append(torch.multinomial(weights, k - free, replacement=False, generator=gen).numpy())
            picks = np.concatenate(parts)
        picks = picks.astype(np.int64)
        return picks, np.asarray(p_hat, dtype=np.float64)[picks]

    # ------------------------------------------------------------------------------- feedback
    def feedback(self, indices: Any, values: Any) -> None:
        """Fold one explore step's results in: ``values[i]`` is the mean reward of task
        ``indices[i]`` over its rollouts, as ``pass_rate_calculator`` reports it.

        A mean reward v becomes the success rate r = (v − low) / (high − low) for
        ``kwargs.reward_range`` [low, high] (default [0, 1]), clipped into [0, 1]: means below
        ``low`` count as all failures, above ``high`` as all successes (Trinity's math reward adds
        −0.1 for a bad format, for instance). The first clip is logged as a warning. BOTS then
        gets r·m successes in m trials per task. Unknown indices, a length mismatch, NaN or
        non-numeric values raise a typed error and change nothing. Feedback clears the pending
        marks of its tasks and of every task handed out by the same or an earlier read (those
        results will not come: their rollouts failed or were cut by over-rollout).
        """
        ids = as_ids(indices, "indices")
        vals = as_floats(values, "values", length=ids.size)
        if ids.size and (ids.min() < 0 or ids.max() >= self._num_tasks):
            bad = int(ids[(ids < 0) | (ids >= self._num_tasks)][0])
            raise InvalidArgumentError(f"indices: {bad} is outside the pool [0, {self._num_tasks})", "indices")
        finite = np.isfinite(vals)
        if not finite.all():
            i = int(np.flatnonzero(~finite)[0])
            raise InvalidArgumentError(f"values: must be finite mean rewards, got {vals[i]} at position {i}", "values")
        if not ids.size:
            return  # a step with no results: no update (an update would discount the whole pool)
        s = self._settings
        rates = (vals - s.reward_low) / (s.reward_high - s.reward_low)
        outside = (rates < 0.0) | (rates > 1.0)
        rates = np.clip(rates, 0.0, 1.0)
        with self._lock:
            start = time.perf_counter()
            self._bots.update(ids, rates * s.n_rollouts, s.n_rollouts)  # validates before changing anything
            elapsed = time.perf_counter() - start
            newest = max((self._pending.get(int(i), 0) for i in ids), default=0)
            for i in ids.tolist():
                self._pending.pop(i, None)
            if newest:
                self._pending = {i: r for i, r in self._pending.items() if r > newest}
            if outside.any():
                if not self._clipped:
                    i = int(np.flatnonzero(outside)[0])
                    self._logger.warning(
                        f"BOTSSelector: mean reward {vals[i]} of task {int(ids[i])} is outside kwargs.reward_range "
                        f"[{s.reward_low}, {s.reward_high}]; clipped (set reward_range to your reward's range)"
                    )
                self._clipped += int(outside.sum())
            self._metrics.update(outcome_metrics(ids, rates * s.n_rollouts, s.n_rollouts))
            self._metrics.update(calibration_step_metrics(ids, rates * s.n_rollouts, s.n_rollouts, self._predicted))
            for task in ids.tolist():
                self._predicted.pop(int(task), None)
            self._metrics.update(
                {
                    "bots/update_ms": 1e3 * elapsed,
                    "bots/inflight_tasks": float(len(self._pending)),
                    "bots/clipped_rewards": float(self._clipped),
                    "bots/updates": float(self._bots.num_updates),
                }
            )
            self._metrics.update(capability_metrics(self._bots))
            self._logger.info("BOTSSelector " + " ".join(f"{k}={v:.4g}" for k, v in sorted(self._metrics.items())))

    # ------------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable state (Trinity ``json.dump``s it into ``<explorer>_meta.json`` at
        every sync). The posterior goes to ``kwargs.state_dir`` as
        ``bots-<taskset>-<run id>-r<reads>-u<updates>.bots``, written atomically, named in
        ``bots_file`` (the run's previous file is kept, older ones are removed); without ``state_dir`` it is stored
        inline, base64-encoded, as ``bots_state`` (about 32 bytes per task)."""
        with self._lock:
            state: dict[str, Any] = {
                "current_index": self._current_index,  # the key every Trinity selector state has
                "format": STATE_FORMAT,
                "version": STATE_VERSION,
                "reads": self._reads,
                "pending": [[i, r] for i, r in sorted(self._pending.items())],
                "selections": self._bots.num_selections,
                "updates": self._bots.num_updates,
                "settings": self._settings.fingerprint(),
                "run_id": self._run_id,
            }
            if self._settings.state_dir is None:
                state["bots_state"] = base64.b64encode(to_bytes(self._bots.state_dict())).decode("ascii")
                return state
            path = os.path.join(
                self._settings.state_dir,
                f"bots-{self._name}-{self._run_id}-r{self._reads}-u{self._bots.num_updates}.bots",
            )
            self._bots.save(path)
            self._prune(keep={path, self._last_file})
            self._last_file = path
            state["bots_file"] = path
            return state

    def _prune(self, keep: set[str | None]) -> None:
        """Remove this taskset's older side files; the newest two stay, since Trinity writes its
        state file after ours and a crash in between leaves it naming the previous one."""
        assert self._settings.state_dir is not None
        pattern = re.compile(rf"bots-{re.escape(self._name)}-{self._run_id}-r\d+-u\d+\.bots")
        for entry in Path(self._settings.state_dir).iterdir():
            if pattern.fullmatch(entry.name) and str(entry) not in keep:
                try:
                    entry.unlink()
                except OSError as exc:
                    self._logger.warning(f"BOTSSelector: could not remove old state file {entry}: {exc}")

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output; the next :meth:`get_indices` returns what the
        uninterrupted run would have. A state without a posterior (Trinity's
        ``{"current_index": 0}`` for a fresh run, or one saved by another selector such as
        difficulty_based, whose posterior is not saved) keeps the fresh posterior and continues
        at its ``current_index``. Parameters must match the checkpoint's; everything is checked
        before anything changes."""
        if not isinstance(state_dict, Mapping):
            raise CheckpointError(f"state: must be a mapping, got {type(state_dict).__name__}")
        if "format" not in state_dict:
            index = _state_int(state_dict, "current_index", default=0)
            with self._lock:
                self._current_index = index
            if index:
                self._logger.warning(
                    f"BOTSSelector: resuming from a state without a BOTS posterior at current_index {index}; "
                    "the posterior starts from the prior"
                )
            return
        if state_dict.get("format") != STATE_FORMAT:
            raise CheckpointError(f"state: not a BOTSSelector state (format {state_dict.get('format')!r})")
        version = state_dict.get("version")
        if not isinstance(version, int) or version > STATE_VERSION:
            raise CheckpointError(f"state: version {version!r} is newer than this bots-rft reads ({STATE_VERSION})")
        saved = state_dict.get("settings")
        mine = self._settings.fingerprint()
        if not isinstance(saved, Mapping):
            raise CheckpointError("state: has no settings")
        changed = [f"{k} {saved.get(k)!r} -> {v!r}" for k, v in mine.items() if saved.get(k) != v]
        if changed:
            raise ConfigError(
                "data_selector: the checkpoint was written with other parameters (" + "; ".join(changed) + "); "
                "BOTS's parameters cannot change on resume: restore them, or start a fresh run"
            )
        index = _state_int(state_dict, "current_index")
        reads = _state_int(state_dict, "reads")
        pending = _pending_marks(state_dict.get("pending"), self._num_tasks, reads)
        run_id = state_dict.get("run_id")
        if not (isinstance(run_id, str) and re.fullmatch(r"[0-9a-f]{8}", run_id)):
            raise CheckpointError(f"state.run_id: must be 8 hex digits, got {run_id!r:.60}")
        bots, source = self._load_posterior(state_dict)
        if bots.num_selections != _state_int(state_dict, "selections") or bots.num_updates != _state_int(
            state_dict, "updates"
        ):
            raise CheckpointError(
                f"{source}: holds the posterior after {bots.num_updates} updates and {bots.num_selections} "
                f"selections, the state expects {state_dict.get('updates')} and {state_dict.get('selections')}"
            )
        self._check_evidence(bots, source)
        with self._lock:
            self._bots = bots
            self._current_index = index
            self._reads = reads
            self._pending = pending
            self._run_id = run_id
            self._last_file = state_dict.get("bots_file") if isinstance(state_dict.get("bots_file"), str) else None

    def _load_posterior(self, state: Mapping[str, Any]) -> tuple[BOTS, str]:
        if "bots_state" in state:
            source = "state.bots_state"
            try:
                raw = base64.b64decode(str(state["bots_state"]), validate=True)
            except (binascii.Error, ValueError):
                raise CheckpointError(f"{source}: not base64") from None
            posterior = from_bytes(raw, source=source)
        elif isinstance(state.get("bots_file"), str):
            path = str(state["bots_file"])
            if not os.path.exists(path) and self._settings.state_dir is not None:
                moved = os.path.join(self._settings.state_dir, os.path.basename(path))
                path = moved if os.path.exists(moved) else path  # the run's folder was moved
            source = path
            try:
                posterior = load_state(path)
            except OSError as exc:
                raise CheckpointError(f"state.bots_file: cannot read {path!r} ({exc.strerror or exc})") from None
        else:
            raise CheckpointError("state: names neither bots_file nor bots_state")
        bots = self._new_bots()
        try:
            # The parameters were compared with the state's settings above, and the evidence is
            # compared with the config's feature_keys next (_check_evidence, naming the key).
            bots.load_state_dict(posterior, params="checkpoint")
        except CheckpointError as exc:
            raise CheckpointError(f"{source}: {exc}") from None
        return bots, source

    def _check_evidence(self, bots: BOTS, source: str) -> None:
        """The checkpoint's reference columns, or task embeddings, must be this dataset's."""
        mine, theirs = self._evidence, bots.evidence
        embedded = (EmbeddingRegression, Similarity)
        if isinstance(mine, embedded) or isinstance(theirs, embedded):
            self._check_embeddings(bots, source)
            return
        if (mine is None) != (theirs is None):
            raise CheckpointError(
                f"{source}: the checkpoint was written {'with' if theirs is not None else 'without'} feature_keys, "
                f"the config has {'none' if mine is None else 'two'}"
            )
        if isinstance(mine, Interpolation) and isinstance(theirs, Interpolation):
            for a, b, key in zip(mine.references32(), theirs.references32(), ("feature_keys[0]", "feature_keys[1]")):
                if not np.array_equal(a, b, equal_nan=True):
                    raise CheckpointError(f"{source}: the dataset's {key} column differs from the checkpoint's")

    def _check_embeddings(self, bots: BOTS, source: str) -> None:
        """Task embeddings on either side: the estimator, its embeddings (by hash) and the
        regression's prior precision must be the checkpoint's, refused naming the kwarg."""
        here = None if self._evidence is None else evidence_identity(self._evidence.state_dict())
        there = bots.identity["evidence"]
        if here is None or there is None or here["kind"] != there["kind"]:
            raise CheckpointError(
                f"{source}: kwargs.embeddings / kwargs.estimator: the checkpoint's implicit evidence is "
                f"{describe_evidence(there)}, this config's {describe_evidence(here)}; resume with the evidence the "
                "run was started with"
            )
        if here != there:
            raise CheckpointError(
                f"{source}: kwargs.embeddings: the task embeddings differ from the checkpoint's "
                f"({describe_evidence(here)} here, {describe_evidence(there)} in the checkpoint); use the "
                "embeddings file (and kwargs.task_id_column) the run was started with"
            )
        mine, theirs = self._evidence, bots.evidence
        if (
            isinstance(mine, EmbeddingRegression)
            and isinstance(theirs, EmbeddingRegression)
            and mine.prior_precision != theirs.prior_precision
        ):
            raise CheckpointError(
                f"{source}: kwargs.prior_precision: {mine.prior_precision:g} here, {theirs.prior_precision:g} "
                "in the checkpoint; restore it, or start a fresh run"
            )


#: Trinity's experience operators that drop groups (all of them, or some experiences).
_FILTERS = frozenset(
    {"dapo_dynamic_sampling", "reward_filter", "reward_std_filter", "invalid_reward_filter", "data_juicer"}
)
#: Operators that neither drop groups nor change rewards' meaning for the selector.
_HARMLESS = frozenset({"pass_rate_calculator", "mask_response_truncated", "reward_shaping_mapper"})


def check_config(config: Any) -> list[str]:
    """Refuse (:class:`ConfigError`, naming the keys) a Trinity ``Config`` whose tasksets on
    BOTSSelector would be fed wrongly: ``kwargs.m`` (or ``n_rollouts``) other than
    ``algorithm.repeat_times``; no ``pass_rate_calculator`` among
    ``data_processor.experience_pipeline.operators`` (BOTS would get no feedback); a filter
    (``dapo_dynamic_sampling``, ``reward_filter``, ...) listed before it (the groups it drops never
    reach BOTS). Returns one-line warnings for what cannot be judged: an operator this module does
    not know, listed before ``pass_rate_calculator``."""
    tasksets = list(getattr(config.buffer.explorer_input, "tasksets", None) or [])
    single = getattr(config.buffer.explorer_input, "taskset", None)
    if single is not None and single not in tasksets:
        tasksets.append(single)
    ours = [
        (i, t)
        for i, t in enumerate(tasksets)
        if getattr(getattr(t, "data_selector", None), "selector_type", None)
        in ("bots_rft.integrations.trinity.BOTSSelector", f"{__name__}.BOTSSelector")
    ]
    if not ours:
        return []
    repeat = getattr(config.algorithm, "repeat_times", None)
    for i, t in ours:
        key = "buffer.explorer_input.taskset" if t is single else f"buffer.explorer_input.tasksets[{i}]"
        kwargs = dict(t.data_selector.kwargs or {})
        name, m = next(((k, kwargs[k]) for k in ("m", "n_rollouts") if k in kwargs), ("m", AUTHOR_DEFAULTS["m"]))
        if repeat is not None and float(m) != float(repeat):
            raise ConfigError(
                f"{key}.data_selector.kwargs.{name}: {m} rollouts per task, but algorithm.repeat_times is {repeat}; "
                f"set kwargs.{name}: {repeat} (Trinity reports mean rewards, which BOTS turns into successes out of m)"
            )
    names = [str(getattr(o, "name", o)) for o in config.data_processor.experience_pipeline.operators]
    key = "data_processor.experience_pipeline.operators"
    if "pass_rate_calculator" not in names:
        raise ConfigError(
            f"{key}: has no pass_rate_calculator ({names}); it is BOTSSelector's only source of feedback: list it first"
        )
    first = names.index("pass_rate_calculator")
    for i, name in enumerate(names[:first]):
        if name in _FILTERS:
            raise ConfigError(
                f"{key}[{i}] ({name}) comes before {key}[{first}] (pass_rate_calculator): the groups it drops "
                "(all-pass, all-fail) would never reach BOTSSelector; list pass_rate_calculator first"
            )
    return [
        f"BOTSSelector: {key}[{i}] ({name}) runs before pass_rate_calculator; if it drops experiences, "
        "BOTS never sees them: list pass_rate_calculator first"
        for i, name in enumerate(names[:first])
        if name not in _HARMLESS
    ]


_UNSET: Any = object()
_GIVEN: contextvars.ContextVar[Any] = contextvars.ContextVar("bots_trinity_config", default=_UNSET)


@contextlib.contextmanager
def whole_config(config: Any) -> Iterator[None]:
    """Build BOTSSelectors outside Trinity's ``TasksetScheduler`` (a reader of your own, a test)
    with ``config``, the whole Trinity ``Config`` their checks read (:func:`check_config`):
    ``with whole_config(cfg): reader = FileReader(...)``. ``None`` says that you checked
    ``algorithm.repeat_times`` and the operators yourself: the selector then logs that it did not.
    Without this, a selector built outside ``TasksetScheduler`` is refused."""
    from trinity.common.config import Config

    if config is not None and not isinstance(config, Config):
        raise InvalidTypeError(f"config: a trinity Config or None, got {type(config).__name__}", "config")
    token = _GIVEN.set(config)
    try:
        yield
    finally:
        _GIVEN.reset(token)


def _whole_config() -> Any:
    """The whole Trinity ``Config`` the checks read: the one :func:`whole_config` gives, else the
    ``config`` argument of the ``TasksetScheduler.__init__`` building this selector (a declared,
    version-gated seam: :func:`trinity_seams`). Fails closed: a scheduler whose ``config`` is not
    a Config, or a selector built outside any scheduler, raises :class:`ConfigError` rather than
    skipping the checks."""
    given = _GIVEN.get()
    if given is not _UNSET:
        return given
    from trinity.buffer.task_scheduler import TasksetScheduler
    from trinity.common.config import Config

    frame = inspect.currentframe()
    try:
        while frame is not None:
            if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), TasksetScheduler):
                candidate = frame.f_locals.get("config")
                if not isinstance(candidate, Config):
                    raise ConfigError(
                        "BOTSSelector: TasksetScheduler.__init__ has no Trinity Config in its config argument (got "
                        f"{type(candidate).__name__}), so the checks of algorithm.repeat_times and the experience "
                        "operators cannot run; use a trinity-rft release this adapter supports"
                    )
                return candidate
            frame = frame.f_back
    finally:
        del frame
    raise ConfigError(
        "BOTSSelector: built outside Trinity's TasksetScheduler, so the whole config (algorithm.repeat_times, "
        "data_processor.experience_pipeline.operators) cannot be checked; build it through TasksetScheduler, or "
        "within bots_rft.integrations.trinity.whole_config(cfg) (None: you checked them yourself)"
    )


def _state_int(state: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = state.get(key, default)
    try:
        return as_int(value, key, minimum=0)
    except BotsError:
        raise CheckpointError(f"state.{key}: must be an integer >= 0, got {value!r:.60}") from None


def _pending_marks(value: Any, num_tasks: int, reads: int) -> dict[int, int]:
    if not isinstance(value, list):
        raise CheckpointError(f"state.pending: must be a list of [index, read] pairs, got {value!r:.60}")
    marks: dict[int, int] = {}
    for pair in value:
        ok = (
            isinstance(pair, list)
            and len(pair) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in pair)
        )
        if not ok or not (0 <= pair[0] < num_tasks and 1 <= pair[1] <= reads):
            raise CheckpointError(f"state.pending: bad entry {pair!r:.60} (pool of {num_tasks}, {reads} reads)")
        marks[pair[0]] = pair[1]
    return marks


def _ours(config: Any) -> list[tuple[str, Any]]:
    """(config key, taskset) of every taskset on BOTSSelector."""
    explorer_input = config.buffer.explorer_input
    tasksets = list(getattr(explorer_input, "tasksets", None) or [])
    single = getattr(explorer_input, "taskset", None)
    out = [(f"buffer.explorer_input.tasksets[{i}]", t) for i, t in enumerate(tasksets)]
    if single is not None and single not in tasksets:
        out.append(("buffer.explorer_input.taskset", single))
    names = ("bots_rft.integrations.trinity.BOTSSelector", f"{__name__}.BOTSSelector")
    return [(k, t) for k, t in out if getattr(getattr(t, "data_selector", None), "selector_type", None) in names]


def preflight(path: str) -> list[str]:
    """Every check a Trinity run makes of BOTS, on a YAML file, without Ray, a model or a GPU:
    the version gate, Trinity's own ``load_config``, :func:`check_config` (``kwargs.m`` against
    ``algorithm.repeat_times``, the experience operators' order) and, for each taskset on
    BOTSSelector, the selector built over its data as Trinity's reader builds it (kwargs,
    ``feature_keys`` columns and their values). Returns what the run would use, one line each;
    raises a :class:`BotsError` naming the key at the first problem."""
    from trinity.buffer.buffer import get_buffer_reader
    from trinity.common.config import load_config

    from .gates import installed_version

    bypassed = check_trinity()
    version = installed_version(TESTED_TRINITY.framework)
    where = "inside" if TESTED_TRINITY.contains(version) else "OUTSIDE"
    seams = len(trinity_seams())
    lines = [f"trinity-rft {version}: {where} the tested window ({TESTED_TRINITY}); {seams} methods checked"]
    if bypassed:
        lines[-1] += f"; BOTS_ALLOW_UNTESTED=1 bypassed {len(bypassed)}"
    if not os.path.isfile(path):
        raise ConfigError(f"--config: {path!r} is not a file")
    try:
        config = load_config(path)
    except Exception as exc:  # Trinity's loader raises whatever OmegaConf and its dataclasses raise
        raise ConfigError(
            f"--config: Trinity's load_config refused {path}: {' '.join(str(exc).split())[:300]}"
        ) from None
    ours = _ours(config)
    if not ours:
        raise ConfigError(
            "buffer.explorer_input: no taskset has data_selector.selector_type "
            "bots_rft.integrations.trinity.BOTSSelector; nothing of BOTS to check"
        )
    warnings = check_config(config)
    repeat = getattr(config.algorithm, "repeat_times", None)
    names = [str(getattr(o, "name", o)) for o in config.data_processor.experience_pipeline.operators]
    lines.append(f"algorithm.repeat_times: {repeat}; experience operators: {', '.join(names)}")
    for key, taskset in ours:
        if not os.path.exists(str(taskset.path)):
            raise ConfigError(f"{key}.path: {taskset.path!r} does not exist (the taskset BOTS reads)")
        # What Trinity's config validator fills before a reader is built (it needs a model to run).
        if getattr(taskset, "batch_size", None) is None:
            taskset.batch_size = config.buffer.batch_size
        if getattr(taskset, "total_epochs", None) is None:
            taskset.total_epochs = config.buffer.total_epochs
        taskset.enable_progress_bar = False
        try:
            with whole_config(config):
                reader = get_buffer_reader(taskset)
        except BotsError as exc:
            raise type(exc)(f"{key}.data_selector: {exc}") from None
        sel = getattr(reader, "reader", reader).selector  # FileReader wraps the dataset's reader
        bots = sel.bots
        p = bots.params
        params = ", ".join(
            f"{k}={p[k]:g}" if isinstance(p[k], float) else f"{k}={p[k]}"
            for k in ("lam", "rho", "target", "n_rollouts", "thompson", "seed", "tau", "adaptive_rho")
        )
        evidence = bots.identity["evidence"]
        s = sel._settings
        if evidence is None:
            refs = "no implicit evidence (no feature_keys, no kwargs.embeddings)"
        elif s.embeddings is not None:
            refs = (
                f"{evidence['kind']} evidence from kwargs.embeddings {s.embeddings} by {s.task_id_column} "
                f"(embeddings {evidence['sha256']}"
                + (f", prior_precision {s.prior_precision:g})" if s.prior_precision is not None else ")")
            )
        else:
            refs = (
                f"interpolation evidence from {list(taskset.data_selector.feature_keys)} "
                f"(references {evidence['sha256']})"
            )
        lines.append(f"{key}: BOTSSelector over {bots.num_tasks} tasks of {taskset.path}; BOTS({params}); {refs}")
    lines.extend(warnings)
    return lines
