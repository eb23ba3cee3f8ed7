"""Selection methods by name over the training pool's rows, and their checkpoints.

bots / mopps / dots are :class:`bots_rft.BOTS` (its own versioned file format); random /
offline / dynamic are :mod:`bots_rft.baselines`, whose state dicts are saved in the same format
(JSON plus raw arrays, checksummed; never a pickle). Dynamic sampling rolls out inside ``select``
through a callback the trainer provides."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import BOTS, Interpolation
from ..baselines import DynamicSampling, OfflineSelector, RandomSelector, RolloutFn, Selector
from ..checkpoint import load_state, save_state
from ..errors import CheckpointError, ConfigError
from .config import TrainConfig

__all__ = ["make_selector", "save_selector", "load_selector", "selector_file"]


def make_selector(
    cfg: TrainConfig,
    num_tasks: int,
    weak: npt.NDArray[np.float64] | None,
    strong: npt.NDArray[np.float64] | None,
    rollout: RolloutFn | None = None,
) -> Selector:
    """The selector ``cfg.method`` names, over ``num_tasks`` rows; ``weak``/``strong`` are the
    reference pass rates (NaN unknown) or None when the pool has none."""
    evidence = (
        Interpolation(weak, strong, momentum=cfg.momentum, min_gap=cfg.min_gap)
        if weak is not None and strong is not None
        else None
    )
    if cfg.method == "dynamic" or not cfg.dynamic_sampling:
        return _method_selector(cfg, num_tasks, evidence, weak, strong, rollout)
    if rollout is None:
        raise ConfigError("dynamic_sampling: needs a rollout callback")
    proposer = _method_selector(cfg, num_tasks, evidence, weak, strong, None)
    return DynamicSampling(num_tasks, rollout, n_rollouts=cfg.rollouts, oversample=cfg.oversample,
                           max_rounds=cfg.max_rounds, seed=cfg.seed, proposer=proposer)  # fmt: skip


def _method_selector(
    cfg: TrainConfig,
    num_tasks: int,
    evidence: Interpolation | None,
    weak: npt.NDArray[np.float64] | None,
    strong: npt.NDArray[np.float64] | None,
    rollout: RolloutFn | None,
) -> Selector:
    common: dict[str, Any] = {"n_rollouts": cfg.rollouts, "target": cfg.target, "seed": cfg.seed}
    if cfg.method == "bots":
        return BOTS(num_tasks, lam=cfg.lam, rho=cfg.rho, thompson=cfg.thompson, evidence=evidence, **common)
    if cfg.method == "mopps":
        return BOTS.mopps(num_tasks, **common)
    if cfg.method == "dots":
        if evidence is None:
            raise ConfigError("method: 'dots' needs reference pass rates; set weak_column and strong_column")
        return BOTS.dots(num_tasks, evidence, **common)
    if cfg.method == "random":
        return RandomSelector(num_tasks, seed=cfg.seed)
    if cfg.method == "offline":
        assert weak is not None and strong is not None  # validated by TrainConfig
        return OfflineSelector(weak, strong)
    if cfg.method == "dynamic":
        if rollout is None:
            raise ConfigError("method: 'dynamic' needs a rollout callback")
        return DynamicSampling(num_tasks, rollout, n_rollouts=cfg.rollouts, oversample=cfg.oversample,
                               max_rounds=cfg.max_rounds, seed=cfg.seed)  # fmt: skip
    raise ConfigError(f"method: unknown selection method {cfg.method!r}")


def selector_file(directory: Path, sel: Selector) -> Path:
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
        return BOTS.load(path)
    state = load_state(path)
    if adapt is not None:
        state = adapt(state)
    if isinstance(fresh, BOTS):
        fresh.load_state_dict(state, params="checkpoint")
    else:
        fresh.load_state_dict(state)
    return fresh
