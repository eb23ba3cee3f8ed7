"""BOTS for AReaL's ``PPOTrainer`` (asynchronous RL): BOTS chooses the prompts, every group feeds it.

>>> from areal.trainer.rl_trainer import PPOTrainer
>>> trainer = with_bots(PPOTrainer)(config, train_dataset=ds, valid_dataset=None,
...                                 bots=BOTS(len(ds), n_rollouts=config.gconfig.n_samples))
>>> trainer.train(workflow=RLVRWorkflow(...), dynamic_filter_fn=lambda t: 0 < t["rewards"].mean() < 1)

:func:`with_bots` subclasses the trainer through three overridable methods and ``train``:

- ``_create_dataloader`` builds the train loader on a
  :class:`~bots_rft.integrations.batches.BOTSBatchSampler` with ``num_workers=0``. AReaL pulls
  prompts from it whenever its staleness window has room, so prompts are chosen ahead of
  training; a chosen task stays *in flight* (never chosen again) until its group has been folded
  into the posterior. With several data-parallel ranks, rank ``r`` selects among the tasks whose
  dataset row is ``r`` modulo the world size (each rank owns a fixed share of the pool).
- ``train`` wraps the workflow in :class:`TaskIdWorkflow` (it writes the dataset row's task id
  into each trajectory) and wraps ``dynamic_filter_fn`` (AReaL's ``should_accept_fn``, which
  sees every finished group before acceptance) in :class:`RecordingFilter`: it records the
  group's rewards, removes the task id again, then applies the user's filter. The groups the
  filter rejects are evidence like the others.
- ``_save_recover_checkpoint`` (called once per step, after the rollout and the update, before
  the checkpoint is written) first folds the step's recorded groups into the selector in one
  update, so the selector in AReaL's recover checkpoint (it rides in the data loader's state)
  holds every group that finished before it. ``_export_and_commit_stats`` logs the ``bots/*``
  metrics through AReaL's ``stats_tracker``.

Supported: AReaL's SPMD mode (``AREAL_SPMD_MODE=1``, set by ``python -m areal.launcher.local``,
``.ray`` and ``.slurm``), where the filter runs in the trainer process. In single-controller mode
AReaL runs the filter in remote rollout workers and accepts only an importable name for it, so
the rejected groups never reach the trainer: :func:`with_bots` refuses to train there
(``ConfigError``) rather than lose their evidence silently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from areal.api import RolloutWorkflow
from areal.utils import environ as areal_environ
from areal.utils import stats_tracker
from areal.utils.dynamic_import import import_from_string
from areal.utils.environ import is_single_controller
from torchdata.stateful_dataloader import StatefulDataLoader

from ..errors import ConfigError, DataError, InvalidTypeError
from .batches import BOTSBatchSampler, EvidenceBuffer
from .gates import Seam, Window, check_framework
from .tasks import (
    bind_pool,
    check_references_by_id,
    check_resume_params,
    check_rollouts,
    column_values,
    rows_of_tasks,
    task_id_of,
)

__all__ = [
    "with_bots",
    "TaskIdWorkflow",
    "RecordingFilter",
    "TASK_ID_KEY",
    "TESTED_AREAL",
    "check_areal",
    "areal_seams",
]

#: The areal releases :func:`with_bots` was tested with (both ends tested).
TESTED_AREAL = Window("areal", "1.0.4", "1.0.4", "bots_rft.integrations.areal")


def areal_seams() -> list[Seam]:
    """The ``PPOTrainer`` methods :func:`with_bots` overrides (three private ones and ``train``) and
    the ``RolloutWorkflow`` method :class:`TaskIdWorkflow` implements."""
    from areal.trainer.rl_trainer import PPOTrainer

    step = "(self, epoch, epoch_step, global_step)"
    train = (
        "(self, workflow=, eval_workflow=, workflow_kwargs=, eval_workflow_kwargs=, dynamic_filter_fn=, total_epochs=)"
    )
    return [
        Seam(PPOTrainer, "_create_dataloader", "(self, dataset, dataset_config, rank, world_size)", "b117df7b243e0567"),
        Seam(PPOTrainer, "_save_recover_checkpoint", step, "d14368020fdffd69"),
        Seam(PPOTrainer, "_export_and_commit_stats", step, "a684771063fd63a9"),
        Seam(PPOTrainer, "train", train, "676756838adb0cda"),
        # TaskIdWorkflow wraps the user's workflow through AReaL's public workflow contract.
        Seam(RolloutWorkflow, "arun_episode", "(self, engine, data)", "9777357deb3fa177"),
        # The single-controller refusal and the metrics' route into AReaL's logger.
        Seam(areal_environ, "is_single_controller", "()", "8deb544a13269002"),
        Seam(stats_tracker, "scalar", "(self, **kwargs)", "2f1dbbba49673bf9"),
    ]


def check_areal() -> list[str]:
    """:func:`areal_seams` against the installed areal (:func:`bots_rft.integrations.gates.check_framework`)."""
    return check_framework(TESTED_AREAL, areal_seams())


#: Trajectory key that carries the task id from :class:`TaskIdWorkflow` to
#: :class:`RecordingFilter` (which removes it, so training never sees it).
TASK_ID_KEY = "bots_task_id"


class TaskIdWorkflow(RolloutWorkflow):  # type: ignore[misc]
    """Runs ``workflow`` and writes the task id of the episode's dataset row (``column``, a
    dotted path allowed) into the trajectory under :data:`TASK_ID_KEY`. AReaL's grouping
    (``group_size``) concatenates the group's trajectories and keeps non-tensor values of the
    first, so the group carries its task id."""

    def __init__(self, workflow: Any, column: str = "task_id") -> None:
        if not isinstance(workflow, RolloutWorkflow):
            raise InvalidTypeError(
                f"workflow: BOTS needs a RolloutWorkflow (tensor trajectories with 'rewards'), got {type(workflow).__name__}",
                "workflow",
            )
        self.workflow = workflow
        self.column = column

    async def arun_episode(self, engine: Any, data: dict[str, Any]) -> dict[str, Any] | None:
        task_id = task_id_of(data, self.column)
        traj = await self.workflow.arun_episode(engine, data)
        if traj is None:
            return None
        if not isinstance(traj, dict):
            raise InvalidTypeError(f"workflow: returned {type(traj).__name__}, not a trajectory dict", "workflow")
        traj = dict(traj)
        traj[TASK_ID_KEY] = task_id
        return traj


class RecordingFilter:
    """AReaL's ``should_accept_fn``: records every finished group's rewards in ``evidence``
    (one per trajectory, ``traj["rewards"]``) and the task id :class:`TaskIdWorkflow` put in,
    then returns ``accept(traj)`` (True when no filter is given)."""

    def __init__(self, evidence: EvidenceBuffer, accept: Callable[[dict[str, Any]], bool] | str | None = None) -> None:
        if isinstance(accept, str):
            accept = import_from_string(accept)
        if accept is not None and not callable(accept):
            raise InvalidTypeError(
                f"dynamic_filter_fn: must be callable or an import path, got {accept!r}", "dynamic_filter_fn"
            )
        self.evidence = evidence
        self.accept = accept

    def __call__(self, traj: dict[str, Any]) -> bool:
        if TASK_ID_KEY not in traj:
            raise DataError(f"trajectory has no {TASK_ID_KEY!r}: the workflow was not wrapped in TaskIdWorkflow")
        task_id = traj.pop(TASK_ID_KEY)
        rewards = traj.get("rewards")
        if rewards is None:
            raise DataError(f"trajectory has no 'rewards' (keys: {sorted(traj)})")
        values = (
            rewards.detach().float().cpu().numpy() if hasattr(rewards, "detach") else np.asarray(rewards, np.float64)
        )
        self.evidence.record(int(task_id), np.asarray(values, dtype=np.float64).reshape(-1))
        return True if self.accept is None else bool(self.accept(traj))


def _as_list(batch: list[Any]) -> list[Any]:
    return batch  # AReaL's collate: the list of row dicts


def _resolve_workflow(workflow: Any, workflow_kwargs: dict[str, Any] | None) -> Any:
    """An instance, as AReaL's engine would build it from a class or an import path."""
    if isinstance(workflow, str):
        workflow = import_from_string(workflow)
    if isinstance(workflow, type):
        workflow = workflow(**(workflow_kwargs or {}))
    return workflow


_SINGLE_CONTROLLER = (
    "AREAL_SPMD_MODE: with_bots needs AReaL's SPMD mode; in single-controller mode (AREAL_SPMD_MODE unset or 0) "
    "AReaL runs dynamic_filter_fn in remote rollout workers, so the groups it rejects would never reach BOTS; "
    "launch with python -m areal.launcher.local|ray|slurm"
)


def with_bots(trainer_cls: type) -> type:
    """A subclass of AReaL's ``PPOTrainer`` whose constructor takes, besides the trainer's own
    arguments, ``bots`` (the selector: one task per task id), ``task_id_column`` (default
    ``"task_id"``), ``success_threshold`` (None: rewards clipped into [0, 1] are the successes)
    ``release_after`` (steps after which a chosen task whose group never reported, e.g. its
    workflow returned None, may be chosen again; default 4) and ``resume_params`` (a recover
    checkpoint whose selector was built with other parameters, references or pool: ``"error"``
    refuses it, ``"checkpoint"`` / ``"current"`` say which wins)."""
    if not isinstance(trainer_cls, type) or not hasattr(trainer_cls, "_create_dataloader"):
        raise ConfigError(f"with_bots: expects AReaL's PPOTrainer class, got {trainer_cls!r}")
    check_areal()

    class BOTSPPOTrainer(trainer_cls):  # type: ignore[misc,valid-type]
        def __init__(
            self,
            *args: Any,
            bots: Any,
            task_id_column: str = "task_id",
            success_threshold: float | None = None,
            release_after: int = 4,
            resume_params: str = "error",
            **kwargs: Any,
        ) -> None:
            if is_single_controller():  # refused before AReaL builds engines, servers and loaders
                raise ConfigError(_SINGLE_CONTROLLER)
            # Set before the base constructor: it builds the data loader and restores checkpoints.
            self.bots_resume_params = check_resume_params(resume_params, "resume_params")
            self.bots_selector = bots
            self.bots_task_id_column = str(task_id_column)
            self.bots_release_after = release_after
            self.bots_sampler: BOTSBatchSampler | None = None
            self.bots_evidence = EvidenceBuffer(
                bots, success_threshold=success_threshold, where="bots_rft.integrations.areal (traj['rewards'])"
            )
            self._bots_metrics: dict[str, float] = {}
            super().__init__(*args, **kwargs)

        def _create_dataloader(self, dataset: Any, dataset_config: Any, rank: int, world_size: int) -> Any:
            if dataset_config is not self.config.train_dataset or self.bots_sampler is not None:
                return super()._create_dataloader(dataset, dataset_config, rank, world_size)
            if not hasattr(dataset, "__getitem__") or type(dataset).__name__ == "RDataset":
                raise ConfigError(
                    "with_bots: the train dataset must be a map-style dataset (AReaL's data service is not supported)"
                )
            column = self.bots_task_id_column
            ids = column_values(dataset, column)
            rows = rows_of_tasks(ids, int(self.bots_selector.num_tasks), column)
            gconfig = getattr(self.config, "gconfig", None)
            check_rollouts(self.bots_selector, getattr(gconfig, "n_samples", None), "gconfig.n_samples")
            check_references_by_id(self.bots_selector, dataset, ids, column)
            if dataset_config.batch_size % world_size != 0:
                raise ConfigError(
                    f"train_dataset.batch_size ({dataset_config.batch_size}) must be divisible by world_size ({world_size})"
                )
            per_rank = dataset_config.batch_size // world_size
            allowed = None if world_size == 1 else (rows >= 0) & (rows % world_size == rank)
            sampler = BOTSBatchSampler(
                self.bots_selector, rows, per_rank, allowed=allowed, release_after=self.bots_release_after
            )
            bind_pool(self.bots_selector, ids, column, dataset)
            sampler.resume_params = self.bots_resume_params
            self.bots_sampler = sampler
            self.bots_evidence.sampler = sampler
            # num_workers=0: a worker would fetch batches ahead, chosen from a stale posterior.
            return StatefulDataLoader(
                dataset, batch_size=per_rank, sampler=sampler, drop_last=True, num_workers=0, collate_fn=_as_list
            )

        def train(
            self,
            workflow: Any = None,
            eval_workflow: Any = None,
            workflow_kwargs: dict[str, Any] | None = None,
            eval_workflow_kwargs: dict[str, Any] | None = None,
            dynamic_filter_fn: Callable[[dict[str, Any]], bool] | str | None = None,
            total_epochs: int | None = None,
        ) -> Any:
            if is_single_controller():
                raise ConfigError(_SINGLE_CONTROLLER)
            if workflow is None:
                raise ConfigError("with_bots: train() needs a RolloutWorkflow (online agent mode is not supported)")
            wrapped = TaskIdWorkflow(_resolve_workflow(workflow, workflow_kwargs), self.bots_task_id_column)
            accept = RecordingFilter(self.bots_evidence, dynamic_filter_fn)
            return super().train(
                workflow=wrapped,
                eval_workflow=eval_workflow,
                workflow_kwargs=None,
                eval_workflow_kwargs=eval_workflow_kwargs,
                dynamic_filter_fn=accept,
                total_epochs=total_epochs,
            )

        def _save_recover_checkpoint(self, epoch: int, epoch_step: int, global_step: int) -> Any:
            # The step's one update, before AReaL writes the data loader (and selector) state.
            self._bots_metrics = self.bots_evidence.flush()
            return super()._save_recover_checkpoint(epoch=epoch, epoch_step=epoch_step, global_step=global_step)

        def _export_and_commit_stats(self, epoch: int, epoch_step: int, global_step: int) -> Any:
            if self._bots_metrics:
                stats_tracker.scalar(**self._bots_metrics)
                self._bots_metrics = {}
            return super()._export_and_commit_stats(epoch=epoch, epoch_step=epoch_step, global_step=global_step)

    BOTSPPOTrainer.__name__ = BOTSPPOTrainer.__qualname__ = f"BOTS{trainer_cls.__name__}"
    return BOTSPPOTrainer
