"""How a step's batch is found, one strategy per rollout mode; each returns one :class:`StepBatch`.

A method declares its rollout mode (:class:`bots_rft.selector.registry.RolloutMode`, on its registry
entry); it says how the trainer gets the groups it trains on:

- ``plain``: the selector picks B tasks; each is rolled out n times; every group is trained on.
- ``dapo_fill``: DAPO's dynamic sampling (``method=dynamic``, or ``dynamic_sampling`` on top of a
  method): select, roll out and score generation batches until B groups whose rewards disagree
  are found (:class:`FillBatches`); the selector then learns from every group rolled out.
- ``planned``: ``bots-plan``: tasks and a rollout count for each (:meth:`bots_rft.BOTS.plan`), each
  task rolled out its own count of times (:class:`PlannedBatches`).
- ``callback``: a selector that rolls out inside its own ``select`` (GRESO, SPEED-RL, Knapsack-RL,
  Reinforce-Ada, BOTS-Screen) through the trainer's rollout callback; each trained task's group
  is taken from its kept completion rows (:class:`CallbackBatches`).

Every strategy charges the step what it generated (:attr:`StepBatch.charged`), so the step's
record (:func:`.step_record.step_record`) has no branch per mode. The strategies use the
trainer's collective stages (``select_batch``, ``roll_out``, ``roll_out_plan``, ``score``,
``gather_successes``), so every rank takes the same path through a step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import torch

from .. import PosteriorSelector
from ..errors import ConfigError, InvalidArgumentError
from ..selector.peers.dapo import fill_batch
from ..selector.protocol import RollsOut
from ..selector.registry import RolloutMode
from .rollout import PlannedRollouts, Rollouts, concat_rollouts

if TYPE_CHECKING:
    from ..data import TaskPool
    from ..selector.protocol import Selector
    from .config import TrainConfig
    from .distributed import Dist
    from .self_rolling import KeptRows

__all__ = [
    "RolloutMode",
    "StepBatch",
    "PlainBatches",
    "FillBatches",
    "PlannedBatches",
    "CallbackBatches",
    "batch_strategy",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class Stages(Protocol):
    """What a batch strategy uses of the trainer (:class:`~bots_rft.train.trainer.GRPOTrainer`
    is one): its config, world, pool and tokenizer, the step's times, the kept rows of a
    self-rolling selector, rank 0's selector, and the collective stages of a step."""

    @property
    def cfg(self) -> TrainConfig: ...
    @property
    def dist(self) -> Dist: ...
    @property
    def pool(self) -> TaskPool: ...
    @property
    def tok(self) -> Any: ...
    @property
    def kept(self) -> KeptRows: ...
    @property
    def times(self) -> Any: ...  # .step_record.StepTimes (which imports this module)
    @property
    def rank0_selector(self) -> Selector: ...
    def queued_ids(self) -> list[int]: ...
    def select_batch(self, count: int, exclude: npt.NDArray[np.bool_] | None = None) -> list[int]: ...
    def roll_out(self, ids: list[int]) -> Rollouts | None: ...
    def roll_out_plan(self, ids: list[int], counts: list[int]) -> PlannedRollouts: ...
    def score(self, ro: Rollouts | None) -> Rollouts | None: ...
    def gather_successes(self, ro: Rollouts | None) -> FloatArray: ...


@dataclass
class StepBatch:
    """A step's batch, whatever its mode: the B task ids trained on (the same on every rank),
    this rank's scored rollouts of its share, every group rolled out to find them, and what the
    step is charged."""

    task_ids: list[int]
    rollouts: Rollouts | PlannedRollouts | None  # None when this rank's share is empty
    rolled_ids: IntArray  # every group rolled out (the selector learns from each)
    rolled_successes: FloatArray
    rolled_trials: FloatArray | None  # each rolled group's rollouts; None: n each
    trained_counts: FloatArray | None  # each trained task's rollouts; None: n each
    charged: int  # rollouts generated for this step (screening and dropped groups included)
    extra: int  # of those, the ones beyond the rollouts trained on
    record: dict[str, Any] = field(default_factory=dict)  # the mode's own record fields


class PlainBatches:
    """``plain``: select B tasks, roll each out n times, score them; every group is trained on."""

    def __init__(self, trainer: Stages) -> None:
        self.t = trainer

    def __call__(self) -> StepBatch:
        cfg = self.t.cfg
        ids = self.t.select_batch(cfg.batch_size)
        ro = self.t.score(self.t.roll_out(ids))
        rolled = np.asarray(ids, dtype=np.int64)
        return StepBatch(ids, ro, rolled, self.t.gather_successes(ro), None, None, cfg.batch_size * cfg.rollouts, 0)


class FillBatches:
    """``dapo_fill``: DAPO's dynamic sampling (Yu et al., 2025): select ``oversample * B`` tasks
    not yet rolled out this step, roll them out and score them; keep the groups whose rewards
    disagree (0 < successes < n: a group with all-equal rewards has zero advantage and teaches
    nothing); repeat until B are kept or ``max_rounds`` rounds were spent, then top the batch up
    with dropped groups. Every rolled-out group, kept or dropped, reaches the selector (dropped
    groups are the clearest evidence of solved or hopeless tasks), and every rollout beyond
    B * n is charged as extra."""

    def __init__(self, trainer: Stages) -> None:
        self.t = trainer

    def __call__(self) -> StepBatch:
        t, cfg = self.t, self.t.cfg
        b, n = cfg.batch_size, cfg.rollouts
        mine: dict[int, Rollouts] = {}  # this rank's rollouts, by task

        def propose(count: int, rolled: npt.NDArray[np.bool_]) -> list[int]:
            return t.select_batch(count, exclude=rolled)

        def roll_out(ids: list[int]) -> FloatArray:
            ro = t.score(t.roll_out(ids))
            if ro is not None:
                cpu = ro.to(torch.device("cpu"))
                mine.update({tid: cpu.take([pos]) for pos, tid in enumerate(t.dist.shard(ids))})
            return t.gather_successes(ro)

        per_round = max(b, int(np.ceil(cfg.param("oversample") * b)))
        found = fill_batch(propose, roll_out, len(t.pool), b, n, per_round, cfg.param("max_rounds"))
        task_ids = found.batch
        extra = (len(found.ids) - len(task_ids)) * n
        return StepBatch(
            task_ids,
            self._share_of(task_ids, mine),
            np.asarray(found.ids, dtype=np.int64),
            np.asarray(found.successes, dtype=np.float64),
            None,
            None,
            b * n + extra,
            extra,
        )

    def _share_of(self, task_ids: list[int], mine: dict[int, Rollouts]) -> Rollouts | None:
        """This rank's share of ``task_ids``' rollouts, wherever they were rolled out (a task is
        rolled out on the rank that had it in its round's share)."""
        dist = self.t.dist
        have = {tid: mine[tid] for tid in task_ids if tid in mine}
        merged: dict[int, Rollouts] = {}
        for part in dist.gather(have) if dist.enabled else [have]:
            merged.update(part)
        share = dist.shard(task_ids)
        return concat_rollouts([merged[tid] for tid in share], int(self.t.tok.pad_token_id)) if share else None


class PlannedBatches:
    """``planned`` (bots-plan): the plan with the most expected informative groups under a
    budget of ``batch_size * rollouts`` rollouts, ``n_min <= counts <= n_max``
    (:meth:`bots_rft.BOTS.plan`); each task rolled out its count of times, one generation batch
    per distinct count; every group is trained on and fed to the selector with its own count as
    trials, and the step is charged what the plan spent."""

    def __init__(self, trainer: Stages) -> None:
        self.t = trainer

    def __call__(self) -> StepBatch:
        ids, counts = self.select_plan()
        ro = self.t.roll_out_plan(ids, counts)
        for part in ro.parts:
            self.t.score(part)
        successes = np.asarray([sum(r) for r in ro.task_rewards()], dtype=np.float64)
        trials = np.asarray(counts, dtype=np.float64)
        spent = int(trials.sum())
        return StepBatch(ids, ro, np.asarray(ids, dtype=np.int64), successes, trials, trials, spent, 0)

    def select_plan(self) -> tuple[list[int], list[int]]:
        """Rank 0's BOTS plans (one selection of its random stream); every rank receives it."""
        t, cfg = self.t, self.t.cfg
        plan: tuple[list[int], list[int]] | None = None
        if t.dist.is_main:
            began = time.perf_counter()
            sel = t.rank0_selector
            if not isinstance(sel, PosteriorSelector):  # the config's method check makes this BOTS
                raise InvalidArgumentError(f"method: {cfg.method!r} has no posterior to plan from", "method")
            chosen = sel.plan(cfg.batch_size * cfg.rollouts, cfg.param("n_min"), cfg.param("n_max"))
            plan = ([int(i) for i in chosen.ids], [int(c) for c in chosen.counts])
            t.times.select_s += time.perf_counter() - began
            t.times.picks.append(sel.explain(plan[0]))
        return t.dist.broadcast(plan)  # type: ignore[no-any-return]


class CallbackBatches:
    """``callback`` (one process): the selector's ``select`` calls :meth:`rollout` once per
    generation round; each trained task's group is taken from that task's kept rows with the
    trials the selector reports (:meth:`.self_rolling.KeptRows.group`), tasks sharing a count in
    one part of a :class:`PlannedRollouts`; the rows of tasks the selector does not queue are
    then dropped. The selector learns from its own batch, and the step is charged every rollout
    it generated (screening included; 0 when it trains on groups queued by earlier steps)."""

    def __init__(self, trainer: Stages) -> None:
        self.t = trainer
        self.rounds = 0  # generation rounds of the current step
        self.callback_s = 0.0  # seconds spent in the callback (not the selector's own)

    def __call__(self) -> StepBatch:
        t, cfg = self.t, self.t.cfg
        self.rounds = 0
        self.callback_s = 0.0
        began = time.perf_counter()
        sel = t.rank0_selector
        ids = [int(i) for i in sel.select(cfg.batch_size)]
        rolled = sel.take_batch() if isinstance(sel, RollsOut) else None
        t.times.select_s += time.perf_counter() - began - self.callback_s
        if rolled is None or [int(i) for i in rolled.task_ids] != ids:
            raise InvalidArgumentError(f"method: {cfg.method!r} handed over no batch for its selection", "method")
        counts = [int(round(float(c))) for c in rolled.trials]
        groups = [t.kept.group(tid, s, c) for tid, s, c in zip(ids, rolled.successes.tolist(), counts)]
        pad = int(t.tok.pad_token_id)
        parts: list[Rollouts] = []
        order: list[tuple[int, int]] = [(0, 0)] * len(ids)
        for count in sorted(set(counts)):
            members = [i for i, c in enumerate(counts) if c == count]
            for position, i in enumerate(members):
                order[i] = (len(parts), position)
            parts.append(concat_rollouts([groups[i] for i in members], pad))
        t.kept.keep_only(t.queued_ids())
        trained = np.asarray(counts, dtype=np.float64)
        charged = int(rolled.rollouts)
        return StepBatch(
            ids,
            PlannedRollouts(parts, order),
            np.asarray(rolled.task_ids, dtype=np.int64),
            np.asarray(rolled.successes, dtype=np.float64),
            np.asarray(rolled.trials, dtype=np.float64),
            trained,
            charged,
            max(charged - int(trained.sum()), 0),
            {"generation_rounds": self.rounds, "trained_rollouts": int(trained.sum())},
        )

    def rollout(self, task_ids: IntArray, counts: IntArray) -> FloatArray:
        """The rollout callback: one generation round, task ``task_ids[i]`` sampled ``counts[i]``
        times (either engine), scored by the pool's verifiers, its rows kept; returns each
        task's successes (its rewards summed)."""
        began = time.perf_counter()
        ids = [int(i) for i in np.asarray(task_ids).tolist()]
        cnts = [int(c) for c in np.asarray(counts).tolist()]
        ro = self.t.roll_out_plan(ids, cnts)
        for part in ro.parts:
            self.t.score(part)
        self.t.kept.add(ro)
        self.rounds += 1
        self.callback_s += time.perf_counter() - began
        return np.asarray([sum(r) for r in ro.task_rewards()], dtype=np.float64)


#: The strategy of each rollout mode.
_STRATEGIES = {
    RolloutMode.PLAIN: PlainBatches,
    RolloutMode.DAPO_FILL: FillBatches,
    RolloutMode.PLANNED: PlannedBatches,
    RolloutMode.CALLBACK: CallbackBatches,
}


def batch_strategy(mode: RolloutMode, trainer: Stages) -> Any:
    """The batch strategy of ``mode`` for ``trainer`` (a callable returning a :class:`StepBatch`).
    ``planned`` and ``callback`` train on one process: their tasks have their own rollout counts,
    which the trainer does not split over data-parallel ranks."""
    if mode in (RolloutMode.PLANNED, RolloutMode.CALLBACK) and trainer.dist.enabled:
        raise ConfigError(
            f"method: {trainer.cfg.method!r} trains on one process (its tasks have their own rollout counts, "
            f"which this trainer does not split over data-parallel ranks), got {trainer.dist.world} processes"
        )
    return _STRATEGIES[mode](trainer)
