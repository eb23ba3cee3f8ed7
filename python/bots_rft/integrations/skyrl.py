"""BOTS for SkyRL-train's ``RayPPOTrainer``: BOTS chooses each batch and learns from every group.

>>> from skyrl_train.trainer import RayPPOTrainer
>>> BOTSTrainer = with_bots(RayPPOTrainer)
>>> trainer = BOTSTrainer(cfg=cfg, tracker=..., tokenizer=..., train_dataset=..., ...,
...                       bots=BOTS(num_tasks, n_rollouts=cfg.generator.n_samples_per_prompt))

:func:`with_bots` subclasses the trainer through three of its overridable methods:

- ``_build_train_dataloader_and_compute_training_steps`` (SkyRL's documented hook) builds the
  train loader on a :class:`~bots_rft.integrations.batches.BOTSBatchSampler` with
  ``num_workers=0``: every batch of ``trainer.train_batch_size`` prompts is chosen by BOTS when
  the step fetches it, from the posterior that holds every earlier step. The dataset's rows carry
  task ids in a column (``task_id_column``); SkyRL's ``PromptDataset`` names each prompt's
  rollouts by ``uid = str(row)``, which is how rewards find their task.
- ``handle_dynamic_sampling`` records the rewards of **every** generated group *before* SkyRL's
  filter (``filter``: DAPO's zero-variance filter; ``replace``) drops or overwrites any, and
  folds them into the selector in one update when the step's batch is complete. Refill batches
  drawn within a step never repeat a task already drawn in that step.
- ``postprocess_generator_output`` does the same when dynamic sampling is off.

The selector rides in the data loader's state, so SkyRL's own checkpoints (``data.pt``, written
after the step's update) save it and ``trainer.resume_mode`` restores it. ``bots/*`` metrics go to
``trainer.all_metrics``, which SkyRL's tracker logs every step.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from torchdata.stateful_dataloader import StatefulDataLoader

from ..errors import ConfigError, DataError
from .batches import BOTSBatchSampler, EvidenceBuffer
from .gates import Seam, Window, check_framework
from .tasks import (
    bind_pool,
    check_references_by_id,
    check_resume_params,
    check_rollouts,
    column_values,
    rows_of_tasks,
)

__all__ = ["with_bots", "sequence_rewards", "TESTED_SKYRL", "check_skyrl", "skyrl_seams"]


def _reexport_placement_group_strategy() -> None:
    """skyrl-train 0.3.1 (built against ray 2.51) imports ``PlacementGroupSchedulingStrategy`` from
    ``ray.util.placement_group``; ray 2.52 and later define it only in
    ``ray.util.scheduling_strategies``, so ``import skyrl_train.trainer`` fails there. Put the same
    class back under its old name (nothing else changes), so SkyRL imports once this module has
    been imported; a ray that still has the name, or no ray at all, is left alone."""
    try:
        import ray.util.placement_group  # noqa: F401
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError:
        return
    # The module, not ray.util.placement_group the attribute: ray.util's function of that name shadows it.
    placement_group = sys.modules["ray.util.placement_group"]
    if not hasattr(placement_group, "PlacementGroupSchedulingStrategy"):
        placement_group.PlacementGroupSchedulingStrategy = PlacementGroupSchedulingStrategy  # type: ignore[attr-defined]


_reexport_placement_group_strategy()

#: The skyrl-train releases :func:`with_bots` was tested with (both ends tested).
TESTED_SKYRL = Window("skyrl-train", "0.3.1", "0.3.1", "bots_rft.integrations.skyrl")


def skyrl_seams() -> list[Seam]:
    """The three ``RayPPOTrainer`` methods :func:`with_bots` overrides, and the two
    ``PromptDataset`` methods it relies on: ``__getitem__`` names each prompt's rollouts
    ``uid = str(row)`` (how rewards find their task) and ``collate_fn`` carries that uid into the
    batch."""
    from skyrl_train.dataset.dataset import PromptDataset
    from skyrl_train.trainer import RayPPOTrainer

    return [
        Seam(RayPPOTrainer, "_build_train_dataloader_and_compute_training_steps", "(self)", "21d264f1ba267159"),
        Seam(RayPPOTrainer, "handle_dynamic_sampling", "(self, generator_output, uids)", "03cb50a98d2cf3ee"),
        Seam(RayPPOTrainer, "postprocess_generator_output", "(self, generator_output, uids)", "0ed9410a06c45e43"),
        Seam(PromptDataset, "__getitem__", "(self, item)", "9655ee11380a96d0"),
        Seam(PromptDataset, "collate_fn", "(self, item_list)", "662152e34fa14a44"),
    ]


def check_skyrl() -> list[str]:
    """:func:`skyrl_seams` against the installed skyrl-train (:func:`bots_rft.integrations.gates.check_framework`)."""
    return check_framework(TESTED_SKYRL, skyrl_seams())


def sequence_rewards(generator_output: Any, step_wise: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """One reward per trajectory (token-level rewards summed, as SkyRL's filters do; ``None`` →
    NaN) and, for step-wise trajectories, the mask of last steps (whose reward counts)."""
    rewards = generator_output["rewards"]
    values = np.array(
        [np.nan if r is None else float(sum(r)) if isinstance(r, (list, tuple)) else float(r) for r in rewards],
        dtype=np.float64,
    )
    last = generator_output.get("is_last_step") if step_wise else None
    mask = None if last is None else np.asarray(last, dtype=bool)
    return values, mask


def with_bots(trainer_cls: type) -> type:
    """A subclass of SkyRL-train's ``RayPPOTrainer`` (or of a subclass of it) whose constructor
    takes, besides the trainer's own arguments, ``bots`` (the selector: one task per task id),
    ``task_id_column`` (default ``"task_id"``; dotted paths such as ``extra_info.index`` work) and
    ``success_threshold`` (None: rewards clipped into [0, 1] are the successes) and
    ``resume_params`` (a ``data.pt`` whose selector was built with other parameters, references or
    pool: ``"error"`` refuses it, ``"checkpoint"`` / ``"current"`` say which wins)."""
    if not isinstance(trainer_cls, type) or not hasattr(trainer_cls, "handle_dynamic_sampling"):
        raise ConfigError(f"with_bots: expects SkyRL-train's RayPPOTrainer class, got {trainer_cls!r}")
    check_skyrl()
    try:  # the fully asynchronous trainer draws single prompts from its own loop: not covered
        from skyrl_train.fully_async_trainer import FullyAsyncRayPPOTrainer

        if issubclass(trainer_cls, FullyAsyncRayPPOTrainer):
            raise ConfigError("with_bots: FullyAsyncRayPPOTrainer is not supported (use RayPPOTrainer)")
    except ImportError:
        pass

    class BOTSRayPPOTrainer(trainer_cls):  # type: ignore[misc,valid-type]
        def __init__(
            self,
            *args: Any,
            bots: Any,
            task_id_column: str = "task_id",
            success_threshold: float | None = None,
            resume_params: str = "error",
            **kwargs: Any,
        ) -> None:
            # Set before the base constructor: it builds the data loader.
            self.bots_resume_params = check_resume_params(resume_params, "resume_params")
            self.bots_selector = bots
            self.bots_task_id_column = str(task_id_column)
            self.bots_sampler: BOTSBatchSampler | None = None
            self.bots_evidence = EvidenceBuffer(
                bots,
                success_threshold=success_threshold,
                where="bots_rft.integrations.skyrl (rewards summed per trajectory)",
            )
            self._bots_task_of_row = np.zeros(0, dtype=np.int64)
            super().__init__(*args, **kwargs)

        def _build_train_dataloader_and_compute_training_steps(self) -> None:
            dataset = self.train_dataset
            frame = getattr(dataset, "dataframe", dataset)
            column = self.bots_task_id_column
            ids = column_values(frame, column)
            rows = rows_of_tasks(ids, int(self.bots_selector.num_tasks), column)
            check_rollouts(
                self.bots_selector, self.cfg.generator.get("n_samples_per_prompt"), "generator.n_samples_per_prompt"
            )
            check_references_by_id(self.bots_selector, frame, ids, column)
            bind_pool(self.bots_selector, ids, column, frame)
            task_of_row = np.empty(len(dataset), dtype=np.int64)  # the inverse: row -> task id
            task_of_row[rows[rows >= 0]] = np.flatnonzero(rows >= 0)
            batch_size = int(self.cfg.trainer.train_batch_size)
            sampler = BOTSBatchSampler(self.bots_selector, rows, batch_size)
            # num_workers=0: a worker would fetch batches ahead, chosen from a stale posterior.
            self.train_dataloader = StatefulDataLoader(
                dataset,
                batch_size=batch_size,
                sampler=sampler,
                collate_fn=dataset.collate_fn,
                num_workers=0,
                drop_last=True,
            )
            self.total_training_steps = len(self.train_dataloader) * self.cfg.trainer.epochs
            sampler.resume_params = self.bots_resume_params
            self.bots_sampler = sampler
            self.bots_evidence.sampler = sampler
            self._bots_task_of_row = task_of_row

        def handle_dynamic_sampling(self, generator_output: Any, uids: list[str]) -> Any:
            # Before the filter: the groups it drops (all pass / all fail) are evidence too.
            self._bots_record(generator_output, uids)
            out = super().handle_dynamic_sampling(generator_output, uids)
            if not out[2]:  # keep_sampling is False: the step's batch is complete
                self._bots_flush()
            return out

        def postprocess_generator_output(self, generator_output: Any, uids: list[str]) -> Any:
            if self.cfg.trainer.algorithm.dynamic_sampling.type is None:
                self._bots_record(generator_output, uids)
                self._bots_flush()
            return super().postprocess_generator_output(generator_output, uids)

        def _bots_record(self, generator_output: Any, uids: list[str]) -> None:
            rewards, last = sequence_rewards(generator_output, bool(self.cfg.generator.step_wise_trajectories))
            if len(uids) != rewards.size:
                raise DataError(f"rewards: {rewards.size} rewards for {len(uids)} uids")
            try:
                rows = np.array([int(u) for u in uids], dtype=np.int64)
            except ValueError:
                raise DataError(
                    f"uids: expected PromptDataset's row numbers (str(row)), got {uids[:3]!r}; a custom dataset must "
                    "name each prompt by its row"
                ) from None
            if rows.size and (rows.min() < 0 or rows.max() >= self._bots_task_of_row.size):
                raise DataError(f"uids: row {int(rows.max())} is not a row of the training dataset")
            if last is not None:
                rows, rewards = rows[last], rewards[last]
            self.bots_evidence.record(self._bots_task_of_row[rows], rewards)

        def _bots_flush(self) -> None:
            # Everything drawn this step was rolled out (or cut by _remove_tail_data): settle all.
            self.all_metrics.update(self.bots_evidence.flush(settle_all=True))

    BOTSRayPPOTrainer.__name__ = BOTSRayPPOTrainer.__qualname__ = f"BOTS{trainer_cls.__name__}"
    return BOTSRayPPOTrainer
