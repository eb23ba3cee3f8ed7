"""Resuming a training run from its latest checkpoint (``resume=true``, ``bots train --resume``).

A resumed run continues exactly where the checkpointed one stopped: the policy's trainable
weights, the optimizer and learning-rate schedule, the random streams, the selector's posterior
(with the guard's counters and a self-rolling selector's queued completions) and the step
counters. What must not change is checked first, each difference a
:class:`~bots_rft.errors.ConfigError` naming the key: the keys that shape the batches and the
weights (:data:`RESUME_KEYS`), the pool (by identity; ``extend_pool`` lets it gain tasks), and the
selection parameters (``resume_params`` says whether new values apply).

:func:`restore` is called by :class:`~bots_rft.train.trainer.GRPOTrainer` while it is built, once
its policy, optimizer and selector exist; :func:`restore_guard` once the guard around the restored
selector does."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import PosteriorSelector
from ..checkpoint import load_state
from ..errors import CheckpointError, ConfigError
from ..selector.protocol import Selector
from .config import PEER_PARAMS, SELECTION_PARAMS
from .pool_identity import compare_pools, grown_state, load_pool_ids
from .run_checkpoint import load_model_state, load_training_state, load_tree, set_rng_state
from .run_selector import load_selector, selector_file
from .step_batches import RolloutMode

if TYPE_CHECKING:
    import torch

    from ..data import TaskPool
    from ..selector.guard import GroupGuard
    from ..selector.registry import Method
    from .config import TrainConfig
    from .distributed import Dist
    from .self_rolling import KeptRows


class ResumableRun(Protocol):
    """What a checkpoint is written from, and resuming reads from and restores into, a run
    (:class:`~bots_rft.train.trainer.GRPOTrainer` is one): its config, world and policy state,
    its selector and guard, and its counters."""

    selector: Selector | None
    step: int
    cum_rollouts: int
    cum_gen_tokens: int
    ckpt_root: Path
    pool_identity: Any

    @property
    def cfg(self) -> TrainConfig: ...
    @property
    def dist(self) -> Dist: ...
    @property
    def model(self) -> torch.nn.Module: ...
    @property
    def optimizer(self) -> torch.optim.Optimizer: ...
    @property
    def scheduler(self) -> Any: ...
    @property
    def pool(self) -> TaskPool: ...
    @property
    def method(self) -> Method: ...
    @property
    def kept(self) -> KeptRows: ...
    @property
    def guard(self) -> GroupGuard | None: ...
    @property
    def rollout_mode(self) -> RolloutMode: ...
    @property
    def rank0_selector(self) -> Selector: ...
    def queued_ids(self) -> list[int]: ...


__all__ = ["RESUME_KEYS", "ROWS_FILE", "GUARD_FILE", "restore", "restore_guard", "save_run", "snapshot", "rewind"]

log = logging.getLogger("bots_rft.train")

#: Config keys that must match for a checkpoint to be resumed (the pool is checked by identity).
RESUME_KEYS = (
    "method",
    "batch_size",
    "rollouts",
    "seed",
    "mini_batch_size",
    "ppo_epochs",
    "lora_r",
    "lora_target_modules",
    "train_top_layers",
)
# ... and for bots-plan, the plan's bounds.
_PLAN_KEYS = ("n_min", "n_max")
# ... and for the methods that roll out inside their selection, their rollout parameters.
_PEER_KEYS = tuple(p.name for p in PEER_PARAMS)
#: The completion rows of the prompts a self-rolling selector still queues, in a checkpoint (save_tree).
ROWS_FILE = "queued_rows"
#: The guard's counters (bots_rft.GroupGuard) in a checkpoint, beside the selector's file.
GUARD_FILE = "guard_state.bots"


def restore(trainer: ResumableRun, path: Path) -> None:
    """``trainer`` as it was when checkpoint ``path`` was written (collective: every rank loads
    the weights and optimizer state; rank 0 the selector)."""
    cfg = trainer.cfg
    state = load_training_state(path, trainer.dist)
    adapt = _check_pool(trainer, path, state["trainer"].get("pool")) if trainer.dist.is_main else None
    saved = state["trainer"].get("config", {})
    takes = {p.name for p in trainer.method.params}
    for key in (
        RESUME_KEYS
        + (_PLAN_KEYS if trainer.rollout_mode is RolloutMode.PLANNED else ())
        + tuple(k for k in _PEER_KEYS if k in takes)
    ):
        if key in saved and saved[key] != getattr(cfg, key):
            raise ConfigError(
                f"{key}: the checkpoint in {str(path)!r} was trained with {saved[key]!r}, now {getattr(cfg, key)!r}"
            )
    try:
        if trainer.dist.is_fsdp(trainer.model):
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            load_model_state(trainer.model, state["model"], trainer.dist)
            osd = FSDP.optim_state_dict_to_load(
                trainer.model, trainer.optimizer, trainer.dist.broadcast(state["optimizer"])
            )
            trainer.optimizer.load_state_dict(osd)
        else:
            load_model_state(trainer.model, state["model"], trainer.dist)
            trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.scheduler.load_state_dict(state["scheduler"])
    except (RuntimeError, KeyError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit this model/optimizer ({exc})") from None
    set_rng_state(state["rng"])
    changed = _changed_selection_params(trainer, path, saved)
    if trainer.dist.is_main:
        trainer.selector = _load_selector(trainer, path, adapt)
        if changed and isinstance(trainer.selector, PosteriorSelector):
            trainer.selector.set_params(**changed)
            log.warning(
                "resume: selection parameters changed from step %d on: %s",
                int(state["trainer"]["step"]) + 1,
                ", ".join(f"{k}={v!r}" for k, v in changed.items()),
            )
    if trainer.rollout_mode is RolloutMode.CALLBACK and trainer.dist.is_main:
        _load_kept_rows(trainer, path)
    t = state["trainer"]
    trainer.step = int(t["step"])
    trainer.cum_rollouts = int(t.get("cum_rollouts", 0))
    trainer.cum_gen_tokens = int(t.get("cum_gen_tokens", 0))
    if trainer.dist.is_main:
        log.info("resumed from %s at step %d", path, trainer.step)


def restore_guard(trainer: ResumableRun, path: Path) -> None:
    """The guard's counters from checkpoint ``path``; a checkpoint of a run without the guard
    has none, and the guard starts from zero. Its share and streak stay the config's."""
    guard = trainer.guard
    assert guard is not None
    file = path / GUARD_FILE
    if not file.exists():
        log.warning("guard: checkpoint %s has no guard state; the guard starts from zero", path)
        return
    state = load_state(file)
    state["selector"] = trainer.rank0_selector.state_dict()  # restored already, from its own file
    guard.load_state_dict(state)
    guard.min_share, guard.zero_streak = trainer.cfg.guard_min_share, trainer.cfg.guard_zero_streak


def _check_pool(
    trainer: ResumableRun, path: Path, saved: dict[str, Any] | None
) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """None when the pool is the checkpoint's; else the function that grows the saved selector
    state to this pool (``extend_pool``), or a ConfigError saying what changed."""
    if saved is None:
        raise CheckpointError(f"checkpoint {str(path)!r} does not record its pool's identity")
    change = compare_pools(saved, load_pool_ids(path), trainer.pool)
    if change is None:
        return None
    if not trainer.cfg.extend_pool:
        raise ConfigError(
            f"pool: {trainer.cfg.pool!r} is not the pool the checkpoint in {str(path)!r} was trained on "
            f"({change.describe()}); resume on that pool, or pass --extend-pool (extend_pool=true) to add tasks"
        )
    if change.removed_ids.size:
        grown_state({}, change, trainer.selector)  # raises: names the removed ids, even when extending
    if not change.added.size and not change.reordered:
        log.warning("pool: resuming on changed task content (%s)", change.describe())
        return None
    fresh = trainer.selector
    log.warning("pool: extending the checkpoint's pool (%s); new tasks start at the prior", change.describe())
    return lambda state: grown_state(state, change, fresh)


def _changed_selection_params(trainer: ResumableRun, path: Path, saved: dict[str, Any]) -> dict[str, Any]:
    """The selection parameters to change on resume ({} when none differ or the run keeps
    the checkpoint's); refuses a difference unless ``resume_params`` says what to do."""
    cfg = trainer.cfg
    # Only the ones the method takes: the presets fix lam, rho and the sampling rule (and do not
    # take them), the baselines take none.
    takes = {p.name for p in trainer.method.params}
    keys = [k for k in SELECTION_PARAMS if k in takes]
    diff = {k: getattr(cfg, k) for k in keys if k in saved and saved[k] != getattr(cfg, k)}
    if not diff:
        return {}
    if cfg.resume_params == "error":
        first = next(iter(diff))
        raise ConfigError(
            f"{first}: the checkpoint in {str(path)!r} was trained with {saved[first]!r}, now {diff[first]!r}; "
            "pass resume_params=config to continue with the new value(s), or resume_params=checkpoint to keep the saved ones"
        )
    if cfg.resume_params == "checkpoint":
        log.warning(
            "resume: keeping the checkpoint's selection parameters (%s)",
            ", ".join(f"{k}={saved[k]!r}" for k in diff),
        )
        return {}
    return diff


def _load_selector(trainer: ResumableRun, path: Path, adapt: Any) -> Selector:
    """The selector restored from checkpoint ``path``. A dynamic-sampling run checkpointed
    before the trainer filled its batches itself saved a wrapper whose state holds the
    method's (``proposer``); that state is restored into the method's selector."""
    selector = trainer.rank0_selector
    wrapped = path / "selector_state.bots"
    if (
        trainer.rollout_mode is RolloutMode.DAPO_FILL
        and not selector_file(path, selector).exists()
        and wrapped.exists()
    ):
        state = load_state(wrapped)
        if state.get("kind") == "dynamic_sampling" and isinstance(state.get("proposer"), dict):
            inner = adapt(state["proposer"]) if adapt is not None else state["proposer"]
            if isinstance(selector, PosteriorSelector):
                selector.load_state_dict(inner, params="checkpoint")
            else:
                selector.load_state_dict(inner)
            return selector
    return load_selector(selector, path, adapt)


def _load_kept_rows(trainer: ResumableRun, path: Path) -> None:
    """The completion rows of the prompts the restored selector queues (SPEED-RL's and
    bots-screen's qualified and ready prompts): every queued prompt must have its rows."""
    if (path / f"{ROWS_FILE}.json").exists():
        trainer.kept.load_state(load_tree(path, ROWS_FILE), str(path))
    queued = trainer.queued_ids()
    missing = sorted(set(queued) - set(trainer.kept.rows))
    if missing:
        raise CheckpointError(
            f"checkpoint {str(path)!r} queues task {missing[0]} for training but holds no completions of it "
            f"({ROWS_FILE}.json)"
        )
    trainer.kept.keep_only(queued)


def save_run(run: ResumableRun) -> Path:
    """A checkpoint of ``run`` at its step under ``run.ckpt_root`` (collective): the policy,
    optimizer and schedule, the selector's file (and the guard's counters beside it, without the
    selector), the run's counters and config, the pool's ids, and a self-rolling selector's
    queued completion rows. Returns its directory."""
    from ..checkpoint import save_state
    from .pool_identity import save_pool_ids
    from .run_checkpoint import save_checkpoint, save_tree
    from .run_selector import save_selector

    def save_selection(directory: Path) -> None:
        save_selector(run.rank0_selector, directory)
        if run.guard is not None:
            state = run.guard.state_dict()
            del state["selector"]
            save_state(directory / GUARD_FILE, state)

    def save_extra(directory: Path) -> None:
        save_pool_ids(directory, run.pool)
        if run.rollout_mode is RolloutMode.CALLBACK:
            save_tree(directory, ROWS_FILE, run.kept.state())

    return save_checkpoint(
        run.ckpt_root,
        run.step,
        model=run.model,
        optimizer=run.optimizer,
        scheduler=run.scheduler,
        save_selector=save_selection,
        trainer_state={
            "config": run.cfg.to_dict(),
            "cum_rollouts": run.cum_rollouts,
            "cum_gen_tokens": run.cum_gen_tokens,
            "pool": run.pool_identity,
        },
        dist_=run.dist,
        keep=run.cfg.keep_checkpoints,
        save_extra=save_extra,
    )


def snapshot(run: ResumableRun) -> dict[str, Any]:
    """The run's state after its last finished step, in memory: a step abandoned half-way (by a
    signal, or for verifier errors) is :func:`rewind` to it and checkpointed as if it never
    began (its selection moved the selector's random stream and its sampling the RNGs, its
    update the posterior)."""
    import copy

    from .run_checkpoint import rng_state

    learner = run.selector if run.guard is None else run.guard  # the guard's state holds the selector's
    return {
        "step": run.step,
        "cum_rollouts": run.cum_rollouts,
        "cum_gen_tokens": run.cum_gen_tokens,
        "rng": rng_state(),
        "selector": copy.deepcopy(learner.state_dict()) if run.dist.is_main and learner is not None else None,
        "kept": dict(run.kept.rows),  # entries are replaced, never changed in place
    }


def rewind(run: ResumableRun, snap: dict[str, Any]) -> None:
    """``run`` back to :func:`snapshot`'s state."""
    run.step, run.cum_rollouts, run.cum_gen_tokens = snap["step"], snap["cum_rollouts"], snap["cum_gen_tokens"]
    set_rng_state(snap["rng"])
    learner = run.selector if run.guard is None else run.guard
    if run.dist.is_main and learner is not None:
        learner.load_state_dict(snap["selector"])
    run.kept.rows = dict(snap["kept"])
