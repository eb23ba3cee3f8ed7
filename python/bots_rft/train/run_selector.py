"""The selector a training run uses, built from its config by the method table, and its
checkpoints.

The method and its parameters come from :data:`bots_rft.selector.registry.METHODS`. Every selector's state
is saved in bots-rft's checkpoint format (a checksummed safetensors file; never a pickle), in the
file the method table names.

For a ``planned`` method (``bots-plan``) the selector is the posterior the trainer's plans draw from
(:meth:`bots_rft.BOTS.plan`; the trainer rolls the plan out itself).

The trainer builds the method's selector alone (``dynamic_sampling`` off) and, with dynamic
sampling, runs DAPO's fill loop itself (:class:`bots_rft.train.step_batches.FillBatches`);
a ``dapo_fill`` method's generation batches (``method=dynamic``'s: :class:`bots_rft.selector.peers.dapo.EpochOrder`)
then come from its proposer (:meth:`bots_rft.selector.registry.Method.build_unrolled`).
Given ``dynamic_sampling`` and a ``rollout`` callback, :func:`make_selector` instead wraps the
method in :class:`~bots_rft.selector.peers.dapo.DynamicSampling`, which rolls out inside ``select``
through that callback, as the simulator's selectors do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import BOTS
from ..checkpoint import load_state, save_state
from ..data import TaskPool
from ..errors import BotsError, CheckpointError, ConfigError
from ..selector.protocol import CountedRolloutFn, RolloutFn, Selector
from ..selector.registry import Method, RolloutMode, dynamic_sampling, method
from .config import TrainConfig

__all__ = ["make_selector", "save_selector", "load_selector", "selector_file"]


def make_selector(
    cfg: TrainConfig,
    num_tasks: int,
    weak: npt.NDArray[np.float64] | None,
    strong: npt.NDArray[np.float64] | None,
    rollout: RolloutFn | CountedRolloutFn | None = None,
    embeddings: npt.NDArray[np.float32] | None = None,
) -> Selector:
    """The selector ``cfg.method`` names, over ``num_tasks`` rows; ``weak``/``strong`` are the
    reference pass rates (NaN unknown) or None when the pool has none; ``embeddings`` the task
    embeddings ([num_tasks, d], the pool's row order) a method that reads them gets."""
    m = method(cfg.method)
    params = cfg.method_values()
    if m.reads_embeddings:
        params["signals"] = {"embeddings": embeddings}
    try:
        if m.rollout_mode is RolloutMode.PLANNED:
            # The trainer plans each step itself (BOTS.plan on this posterior: tasks and counts,
            # then its own generation of them), so the method's selector is the posterior the plan
            # draws from, with the method's parameters and without the simulator's callback.
            params.pop("signals", None)  # no planned method reads embeddings
            return m.build_unrolled(num_tasks, weak=weak, strong=strong, **params)
        if m.rolls_out or not cfg.dynamic_sampling:
            return m.build(num_tasks, weak=weak, strong=strong, rollout=rollout, **params)
        if rollout is None:
            raise ConfigError("dynamic_sampling: needs a rollout callback")
        proposer = m.build(num_tasks, weak=weak, strong=strong, **params)
        # DAPO's filter calls rollout(task_ids) (n each), with the config's rollouts, oversample,
        # max_rounds and seed.
        values = {"n_rollouts": cfg.rollouts, "seed": cfg.seed}
        values |= {k: cfg.param(k) for k in ("oversample", "max_rounds")}
        return dynamic_sampling(num_tasks, rollout, proposer, values)  # type: ignore[arg-type]
    except ConfigError:
        raise
    except BotsError as exc:  # a value the config cannot hold (e.g. no reference columns), as a config error
        raise ConfigError(f"method: {cfg.method!r}: {exc}") from None


def selector_file(directory: Path, sel: Selector) -> Path:
    """Where a run checkpoints ``sel``: the file of its method (BOTS and its presets in their own,
    the baselines in another, as since the first release)."""
    return directory / ("selector.bots" if isinstance(sel, BOTS) else "selector_state.bots")


def save_selector(sel: Selector, directory: Path) -> Path:
    path = selector_file(directory, sel)
    if isinstance(sel, BOTS):
        sel.save(path)
    else:
        save_state(path, sel.state_dict())
    return path


def load_selector(
    fresh: Selector, directory: Path, adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> Selector:
    """``fresh`` (built by :func:`make_selector` with the same config) restored from
    ``directory``; a BOTS selector is re-read from its own file (with its saved parameters).
    ``adapt`` maps the saved state to the one to load (e.g. grown to a pool with more tasks)."""
    path = selector_file(directory, fresh)
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(directory)!r} has no selector file {path.name!r}")
    if isinstance(fresh, BOTS) and adapt is None:
        loaded = BOTS.load(path)
        _check_same_evidence(fresh, loaded, directory)
        return loaded
    state = load_state(path)
    if adapt is not None:
        state = adapt(state)
    if isinstance(fresh, BOTS):
        fresh.load_state_dict(state, params="checkpoint")
    else:
        fresh.load_state_dict(state)
    return fresh


def _check_same_evidence(fresh: BOTS, loaded: BOTS, directory: Path) -> None:
    """A checkpoint's posterior was learnt with its implicit evidence: resuming it with other task
    embeddings (or another estimator) than the config now gives is refused, naming both."""
    from ..selector.bots.state import describe_evidence

    mine, theirs = fresh.identity["evidence"], loaded.identity["evidence"]
    if mine == theirs:
        return
    kinds = {(e or {}).get("kind") for e in (mine, theirs)}
    key = "embeddings" if kinds & {"similarity", "embedding-regression"} else "method"
    raise ConfigError(
        f"{key}: the checkpoint in {str(directory)!r} was learnt with the evidence {describe_evidence(theirs)}, this "
        f"config gives {describe_evidence(mine)}; resume with the {key} it started with"
    )


def run_selector(
    cfg: TrainConfig,
    pool: TaskPool,
    weak: npt.NDArray[np.float64] | None,
    strong: npt.NDArray[np.float64] | None,
    entry: Method,
    batches: Any,
    embeddings: npt.NDArray[np.float32] | None = None,
) -> Any:
    """The trainer's selector for ``cfg.method``, given its batch strategy ``batches``
    (:mod:`.step_batches`): a selector that rolls out itself gets the strategy's rollout callback;
    ``method=dynamic`` proposes each generation batch in DAPO's epoch order (the strategy's fill
    loop filters them); every other method is built with dynamic sampling off (the trainer's
    fill loop does it), wrapped in :class:`.filler.FilledSelector` with ``filler_tasks``."""

    from .filler import FilledSelector
    from .step_batches import CallbackBatches, FillBatches

    if isinstance(batches, CallbackBatches):
        return make_selector(cfg, len(pool), weak, strong, rollout=batches.rollout, embeddings=embeddings)
    if entry.rollout_mode is RolloutMode.DAPO_FILL and isinstance(batches, FillBatches):
        # A method that is DAPO's filling itself: the trainer's fill loop filters the generation
        # batches its proposer (DAPO-DS: the epoch walk) proposes.
        try:
            return entry.build_unrolled(len(pool), weak=weak, strong=strong, **cfg.method_values())
        except BotsError as exc:
            raise ConfigError(f"method: {cfg.method!r}: {exc}") from None
    selector = make_selector(cfg.replace(dynamic_sampling=False), len(pool), weak, strong, embeddings=embeddings)
    if cfg.filler_tasks and cfg.filler_column:
        rates = pool.pass_rate(cfg.filler_column)
        fillers = np.flatnonzero(rates >= cfg.filler_min_rate)
        if fillers.size < 2 * cfg.filler_tasks:  # the method's picks may take some of them
            raise ConfigError(
                f"filler_column: {cfg.filler_column!r} has {fillers.size} tasks at pass rate >= "
                f"{cfg.filler_min_rate:g}, fewer than 2 x filler_tasks={cfg.filler_tasks}"
            )
        return FilledSelector(selector, fillers, cfg.filler_tasks, seed=cfg.seed)
    return selector


def make_guard(cfg: TrainConfig, pool: TaskPool, selector: Any) -> Any:
    """``guard=true``'s :class:`~bots_rft.GroupGuard` around ``selector``, its groups the pool's
    ``guard_groups`` column; a share the groups cannot all hold is the config's error."""
    from ..errors import InvalidArgumentError
    from ..selector.guard import GroupGuard

    if cfg.guard_groups == "ability":
        labels = [str(a) if a is not None else "(none)" for a in pool.abilities()]
    else:
        labels = [str(s) for s in pool.data_sources()]
    try:
        return GroupGuard(selector, labels, min_share=cfg.guard_min_share, zero_streak=cfg.guard_zero_streak)
    except InvalidArgumentError as exc:
        key = {"min_share": "guard_min_share", "zero_streak": "guard_zero_streak"}.get(
            exc.argument or "", "guard_groups"
        )
        raise ConfigError(f"{key}: {exc}") from None
