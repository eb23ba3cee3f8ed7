"""The GRPO training loop fed by a task selector (the paper's GRPO setting).

:class:`GRPOTrainer` reads top to bottom: its constructor builds the run (process group, pool,
policy, optimizer, selector, counters; restored from the latest checkpoint with ``resume``, see
:mod:`.resume`) and trains nothing; :meth:`GRPOTrainer.run` does the work: the supervised warm-up
(``sft_steps``, :meth:`GRPOTrainer.warm_up`), then the steps, evaluations and checkpoints.

Each step runs six stages, each a method of :class:`GRPOTrainer`, top to bottom in
:meth:`GRPOTrainer.train_step`:

1. ``select_batch``: rank 0's selector picks B tasks; every rank receives their ids;
2. ``roll_out``: each rank samples its share n times (temperature 1.0);
3. ``score``: the pool's verifiers reward every completion;
4. ``feed_selector``: rank 0's selector learns every rolled-out group's successes;
5. ``optimise``: each rank trains on its share: group-normalised advantages, clipped surrogate
   over mini-batches against the generation policy's log-probs, AdamW, grad-norm clip, constant
   lr after a linear warm-up (:mod:`.optimise`);
6. ``step_record``: the step's metrics, which :meth:`GRPOTrainer.run` logs.

How stages 1-3 find the batch depends on the method's rollout mode
(:mod:`.step_batches`: ``plain``, DAPO's ``dapo_fill``, bots-plan's ``planned``, and ``callback``
for selectors that roll out inside their own selection); each mode's strategy returns one
:class:`~.step_batches.StepBatch` that says what was trained on and what it cost, so stages 4-6
are the same for every method (:mod:`.step_record` builds the record).
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from .. import PosteriorSelector
from ..data import TaskPool
from ..errors import ConfigError
from ..llm.models import resolve_device
from ..rewards import RewardScorer
from ..selector.guard import GroupGuard
from ..selector.peers.dapo import EpochOrder
from ..selector.protocol import Selector
from ..selector.registry import method
from .config import TrainConfig
from .distributed import Dist
from .evaluate import evaluate_policy, held_out, resolve_eval_pool
from .logger import MetricsLogger, verifier_error_totals
from .machine import machine_differences, machine_record
from .optimise import grpo_update
from .policy import build_policy, frozen_copy, unwrap
from .resume import restore, restore_guard, rewind, save_run, snapshot
from .rollout import PlannedRollouts, Rollouts, generate_planned_rollouts, generate_rollouts
from .run_checkpoint import latest_checkpoint, prepare_out_dir
from .run_embeddings import EmbeddingsInfo
from .run_embeddings import from_file as embeddings_from_file
from .run_embeddings import from_policy as embeddings_from_policy
from .run_embeddings import from_run as embeddings_from_run
from .run_selector import make_guard, run_selector
from .sampling_copy import int8_twin
from .scoring import VerifierErrors, check_verifiers, register_config_verifiers, score_texts
from .self_rolling import KeptRows
from .sft import sft_warmup
from .step_batches import StepBatch, batch_strategy
from .step_record import StepResults, StepTimes, gather_results, step_record
from .stops import RunInterrupted, VerifierErrorStop, handle_signals, signal_name

__all__ = ["GRPOTrainer", "TrainResult", "train", "resolve_eval_pool"]

log = logging.getLogger("bots_rft.train")


@dataclass
class TrainResult:
    out_dir: Path
    steps_done: int
    interrupted: bool
    final_eval: dict[str, Any] | None
    metrics_path: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    signal: int | None = None  # the signal that stopped the run early
    checkpoint: Path | None = None  # the checkpoint written last
    verifier_errors: int = 0  # over the whole run (all records of metrics.jsonl)
    verifier_error_kinds: dict[str, int] = field(default_factory=dict)


class GRPOTrainer:
    """GRPO on ``cfg.pool`` with ``cfg.method`` choosing each step's tasks.

    Building one trains nothing: it joins the process group, loads the pool and the policy (LoRA
    or frozen layers as configured), builds the optimizer, the selector and the run's state, and
    with ``resume`` restores them from the latest checkpoint (:mod:`.resume`). :meth:`run` does
    the work: the supervised warm-up (``sft_steps``) on a fresh run, then ``steps`` steps with
    evaluation, checkpoints and signal handling; :meth:`train_step` is one step, stage by stage."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg  # valid by construction (a TrainConfig checks itself)
        self._join_processes()
        self.out_dir = Path(cfg.out_dir)
        self.ckpt_root = self.out_dir / "checkpoints"
        self._load_data()  # before prepare_out_dir: a pool refused leaves a run --overwrite names in place
        prepare_out_dir(self.out_dir, cfg, self.dist)
        self.resume_from = latest_checkpoint(self.ckpt_root) if cfg.resume else None
        torch.manual_seed(cfg.seed)
        self.model, self.tok, self.ref_model, self.optimizer, self.scheduler = build_policy(cfg, self.device, self.dist)
        self.sft_losses: list[float] = []  # the warm-up's loss curve (run() fills it; a resumed run has none)
        self._build_run_state()
        if self.resume_from is not None:
            restore(self, self.resume_from)
        # guard=true: selection and updates go through the guard around the (restored) selector.
        self.guard: GroupGuard | None = (
            make_guard(cfg, self.pool, self.selector) if cfg.guard and self.selector is not None else None
        )
        if self.guard is not None and self.resume_from is not None:
            restore_guard(self, self.resume_from)
        self.logger = MetricsLogger(
            self.out_dir,
            enabled=self.dist.is_main,
            tensorboard=cfg.tensorboard,
            resume_step=self.step if self.resume_from is not None else None,
        )

    # ------------------------------------------------------------------------ construction
    def _join_processes(self) -> None:
        """The device, the data-parallel group (under ``torchrun``) and what the method asks of
        it; the verifiers the config adds."""
        cfg = self.cfg
        register_config_verifiers(cfg.verifiers)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        device = resolve_device(None if cfg.device == "auto" else cfg.device)
        self.dist = Dist.from_env(device.type)
        if device.type == "cuda" and self.dist.enabled:
            device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(device)
        self.device = device
        w = self.dist.world
        if cfg.batch_size % w or cfg.mini_batch % w:
            raise ConfigError(
                f"batch_size/mini_batch_size: {cfg.batch_size}/{cfg.mini_batch} must be divisible by the "
                f"{w} data-parallel processes"
            )
        self.method = method(cfg.method)
        # How the method's steps find their batch (every rank takes the same path through a step,
        # so this comes from the config, not from the selector only rank 0 holds).
        self.rollout_mode = self.method.step_mode(cfg.dynamic_sampling)
        self.batches = batch_strategy(self.rollout_mode, self)
        if cfg.sft_steps and not cfg.resume and self.dist.enabled and cfg.distributed == "fsdp":
            # The warm-up trains rank 0's whole policy, which FSDP holds sharded over the ranks.
            raise ConfigError(
                f"sft_steps: the warm-up runs on one process or under distributed=ddp, not fsdp; warm up "
                f"first (bots compare --warmup-only) and train from that model, got {cfg.sft_steps}"
            )

    def _load_data(self) -> None:
        """The training pool (its prompts, reference columns, identity) and the held-out rows."""
        cfg = self.cfg
        self.pool = TaskPool.load(cfg.pool)
        check_verifiers(self.pool, "pool")
        if cfg.batch_size > len(self.pool):
            raise ConfigError(f"batch_size: {cfg.batch_size} exceeds the pool's {len(self.pool)} tasks")
        self.chats = self.pool.prompts(system_prompt=cfg.system_prompt)
        self.pool_identity = self.pool.identity() if self.dist.is_main else None
        self.weak = self.pool.pass_rate(cfg.weak_column) if cfg.weak_column else None
        self.strong = self.pool.pass_rate(cfg.strong_column) if cfg.strong_column else None
        self.eval_pool, self.eval_chats, self.eval_rows = held_out(cfg)
        if self.eval_pool is not None:
            check_verifiers(self.eval_pool, "eval_pool")

    def _build_run_state(self) -> None:
        """The verifiers' scorer, rank 0's selector, and the counters a checkpoint records."""
        cfg = self.cfg
        self.scorer = RewardScorer(workers=cfg.reward_workers, timeout=cfg.reward_timeout)
        # A self-rolling selector's kept completion rows, and its current step's generation.
        self.kept = KeptRows(int(self.tok.pad_token_id))
        self.selector: Selector | None = None  # rank 0's; the other ranks follow its broadcasts
        # Task embeddings (embeddings:, for a method that reads them): the starting policy's are
        # computed after the warm-up, so a fresh run that warms up builds its selector then.
        self.embeddings_info: EmbeddingsInfo | None = None
        self._selector_after_warmup = (
            self.dist.is_main
            and self.method.reads_embeddings
            and cfg.embeddings == "policy"
            and bool(cfg.sft_steps)
            and self.resume_from is None
        )
        if self.dist.is_main and not self._selector_after_warmup:
            self._build_selector()
        self._twin: Any = None  # rollout_precision=int8's sampling twin, built at the first rollout
        self.step: int = 0
        self.cum_rollouts: int = 0
        self.cum_gen_tokens: int = 0
        self._signal: int | None = None
        self._abortable = False  # a signal may abandon the step in progress (see _on_signal)
        self._snapshot: dict[str, Any] | None = None
        self._step_errors = VerifierErrors()
        self.times = StepTimes()

    def _task_embeddings(self) -> npt.NDArray[np.float32] | None:
        """The embeddings the method reads (None: it reads none): from the config's file, from
        the run's own file on resumption, or computed from the policy as it is now."""
        cfg = self.cfg
        if not self.method.reads_embeddings:
            return None
        assert cfg.embeddings is not None  # the config refuses a method that reads them without
        if cfg.embeddings != "policy":
            matrix, info = embeddings_from_file(cfg.embeddings, self.pool)
        elif self.resume_from is not None:
            matrix, info = embeddings_from_run(self.out_dir, self.pool)
        else:
            matrix, info = embeddings_from_policy(
                unwrap(self.model),
                self.tok,
                self.pool,
                self.chats,
                self.out_dir,
                batch_size=cfg.generation_batch_size,
                max_prompt_tokens=cfg.max_prompt_tokens,
            )
        self.embeddings_info = info
        return matrix

    def _build_selector(self) -> None:
        """Rank 0's selector for the method (with its task embeddings, if it reads them)."""
        self.selector = run_selector(
            self.cfg, self.pool, self.weak, self.strong, self.method, self.batches, embeddings=self._task_embeddings()
        )

    # -------------------------------------------------------------------------------- run
    def warm_up(self) -> list[float]:
        """The supervised warm-up on the pool's gold answers (``sft_steps``; a fresh run only):
        rank 0 trains the policy (:func:`.sft.sft_warmup`), every rank then holds its weights, and
        the KL reference becomes the warmed-up policy. Returns the loss curve."""
        if not self.cfg.sft_steps or self.resume_from is not None or self.sft_losses:
            return self.sft_losses
        policy = unwrap(self.model)
        if self.dist.is_main:
            self.sft_losses = sft_warmup(policy, self.tok, self.pool, self.chats, self.cfg.sft, self.device)
        self.dist.sync_params(policy)
        if self.ref_model is not None:
            self.ref_model = frozen_copy(policy)
        if self._selector_after_warmup:  # the starting policy exists now: embed, then select
            self._build_selector()
            self._selector_after_warmup = False
            if self.cfg.guard:
                self.guard = make_guard(self.cfg, self.pool, self.selector)
        return self.sft_losses

    def run(self) -> TrainResult:
        """The run: the warm-up (:meth:`warm_up`), then training to ``steps`` (:meth:`_train_steps`),
        then the final checkpoint. SIGTERM/SIGINT stop the run within seconds, even while a
        verifier is stuck: a step still rolling out or scoring is abandoned, one in its optimizer
        updates is finished; the last finished step is checkpointed and the result says
        ``interrupted``. A step whose verifications are verifier errors at or above
        ``verifier_error_stop`` raises :class:`~bots_rft.train.stops.VerifierErrorStop` after
        checkpointing the step before."""
        history: list[dict[str, Any]] = []
        try:
            self.warm_up()  # before the signal handlers: a signal stops a warm-up as it always did
            with handle_signals(self._on_signal):
                self._log_start()
                final_eval, failure = self._train_steps(history)
                checkpoint = self.save()
        finally:
            self._abortable = False
            self._close_outputs()
        if failure is not None:
            failure.saved(self.step, str(checkpoint))
            raise failure  # its message is the report (the CLI prints it once; logging it too doubled it)
        return self._result(final_eval, history, checkpoint)

    def _log_start(self) -> None:
        """The run's first record: its config, world, pool sizes and the warm-up's last losses. A
        resumed run's record says where it resumed from and, when the machine or library stack
        differs from the one the run started on, what differs (and warns: the steps from here may
        not be those an uninterrupted run would have taken)."""
        if self.dist.is_main:
            machine = machine_record()
            changed = self._machine_changes(machine) if self.resume_from is not None else []
            if changed:
                # A framework's logging set-up (logging.config.dictConfig, whose default
                # disable_existing_loggers=True) disables loggers made before it, ours included;
                # this warning is the only word a user gets that the run may part from here.
                log.disabled = False
                log.warning(
                    "resume: this machine differs from the one the run started on (%s); the run continues, but "
                    "its steps from step %d on may differ from an uninterrupted run's",
                    "; ".join(changed),
                    self.step + 1,
                )
            self.logger.write(
                {
                    "kind": "config",
                    "step": self.step,
                    "config": self.cfg.to_dict(),
                    "world_size": self.dist.world,
                    "device": str(self.device),
                    "pool_tasks": len(self.pool),
                    "eval_tasks": len(self.eval_rows),
                    "sft_losses": self.sft_losses[-5:] if self.sft_losses else None,
                    # The task embeddings' source, size and cost (prompt tokens prefilled, seconds)
                    "embeddings": None if self.embeddings_info is None else self.embeddings_info.record(),
                    # What the run's arithmetic depends on besides its config (CPU, instruction
                    # sets, library builds): written at the start and at every resume.
                    "machine": machine,
                    "resumed_from": None if self.resume_from is None else str(self.resume_from),
                    "machine_changed": changed or None,
                }
            )

    def _machine_changes(self, machine: dict[str, Any]) -> list[str]:
        """What differs between ``machine`` and the machine the run's first record holds."""
        from .logger import read_metrics

        path = self.out_dir / "metrics.jsonl"
        if not path.exists():
            return []
        first = next((r for r in read_metrics(path) if r.get("kind") == "config"), None)
        return machine_differences((first or {}).get("machine"), machine)

    def _train_steps(self, history: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, VerifierErrorStop | None]:
        """Steps until ``steps`` or a stop, each logged (and kept in ``history`` on rank 0), with
        the evaluations and periodic checkpoints between them. A step abandoned by a signal or
        stopped for verifier errors is rewound (:meth:`_rewind`). Returns the last evaluation and
        the verifier-error stop, if that ended the run."""
        cfg = self.cfg
        from tqdm.auto import tqdm

        final_eval = None
        bar = tqdm(
            total=cfg.steps,
            initial=self.step,
            desc=f"grpo {cfg.method}",
            unit="step",
            disable=not (cfg.progress and self.dist.is_main),
        )
        try:
            self._finished_step()
            if self.step == 0:
                final_eval = self.evaluate()
                self._log_eval(final_eval)
            while self.step < cfg.steps:
                rec = self.train_step()
                self._abortable = False
                if self.dist.is_main:
                    self.logger.write(rec)
                    history.append(rec)
                    bar.set_postfix(reward=f"{rec['reward_mean']:.3f}", etr=f"{rec['etr']:.2f}")
                bar.update(1)
                self._finished_step()
                if (cfg.eval_every and self.step % cfg.eval_every == 0) or self.step == cfg.steps:
                    final_eval = self.evaluate()
                    self._log_eval(final_eval)
                self._abortable = False
                if cfg.save_every and self.step % cfg.save_every == 0 and self.step < cfg.steps:
                    self.save()
                # Collective, so that every rank stops after the same step.
                if self.dist.sum(1.0 if self._signal is not None else 0.0) > 0:
                    if self._signal is None:
                        self._signal = int(signal.SIGTERM)  # another rank was signalled
                    break
                self._abortable = not self.dist.enabled
                if self._signal is not None and self._abortable:
                    raise RunInterrupted(self._signal)  # came after the check above
        except RunInterrupted:
            self._rewind()
        except VerifierErrorStop as exc:
            self._rewind()
            return final_eval, exc
        finally:
            self._abortable = False  # from here on a signal waits for the final checkpoint
            bar.close()
        return final_eval, None

    def _result(
        self, final_eval: dict[str, Any] | None, history: list[dict[str, Any]], checkpoint: Path
    ) -> TrainResult:
        """What the run did; a run stopped by a signal says so (and logs where to resume from)."""
        interrupted = self._signal is not None and self.step < self.cfg.steps
        if interrupted and self.dist.is_main:
            assert self._signal is not None
            log.warning(
                "%s: stopped; checkpoint of step %d saved in %s (continue with --resume)",
                signal_name(self._signal),
                self.step,
                checkpoint,
            )
        totals = verifier_error_totals(self.logger.path) if self.dist.is_main else {}
        return TrainResult(
            self.out_dir,
            self.step,
            interrupted,
            final_eval,
            self.logger.path,
            history,
            signal=self._signal if interrupted else None,
            checkpoint=checkpoint,
            verifier_errors=sum(totals.values()),
            verifier_error_kinds=totals,
        )

    def _finished_step(self) -> None:
        """The state after the last finished step is kept (:func:`.resume.snapshot`), so that a
        step abandoned half-way (by a signal, or for verifier errors) can be checkpointed as if
        it never began; the step's verifier errors start from zero."""
        self._snapshot = snapshot(self)
        self._step_errors = VerifierErrors()
        # Abandoning a step mid-way is only safe where no other rank waits in a collective.
        self._abortable = not self.dist.enabled

    def _rewind(self) -> None:
        assert self._snapshot is not None
        rewind(self, self._snapshot)

    @property
    def rank0_selector(self) -> Selector:
        """The run's selector, which only rank 0 holds (the other ranks follow its broadcasts)."""
        if self.selector is None:
            raise RuntimeError(f"rank {self.dist.rank} holds no selector: only rank 0 selects")
        return self.selector

    def _selection(self) -> Any:
        """What selects and learns: the guard around the selector when configured, else the selector."""
        return self.selector if self.guard is None else self.guard

    def _stop_on_verifier_errors(self, errors: VerifierErrors) -> None:
        if errors.scored and errors.count and errors.rate >= self.cfg.verifier_error_stop:
            raise VerifierErrorStop(self.step, errors.count, errors.scored, errors.first, self.cfg.verifier_error_stop)

    def _on_signal(self, signum: int, frame: Any) -> None:
        first = self._signal is None
        self._signal = signum
        if self._abortable:
            # Rolling out or scoring (perhaps stuck in a verifier): abandon the step now.
            self._abortable = False
            raise RunInterrupted(signum)
        if first:
            # Updating weights or saving: never stop half-way; the loop stops after this.
            log.warning("%s: finishing step %d, then checkpointing it", signal_name(signum), self.step)

    def _close_outputs(self) -> None:
        self.logger.close()
        self.scorer.close()

    def close(self) -> None:
        self.dist.close()

    def queued_ids(self) -> list[int]:
        """The prompts a self-rolling selector still queues with rollouts of earlier steps."""
        queued = getattr(self.selector, "queued_ids", None)
        return [int(i) for i in queued()] if callable(queued) else []

    def save(self) -> Path:
        """A checkpoint of the run at this step (:func:`.resume.save_run`)."""
        return save_run(self)

    def save_pretrained(self, directory: str | Path) -> None:
        """The policy as a Hugging Face directory (rank 0)."""
        if self.dist.is_main:
            net = unwrap(self.model)
            net.save_pretrained(str(directory))
            self.tok.save_pretrained(str(directory))

    # ------------------------------------------------------------------- the stages of a step
    # A step is: select a batch -> roll it out -> score it -> feed the selector -> optimise ->
    # log (the record :meth:`train_step` returns, written by :meth:`run`). The method's batch
    # strategy (``self.batches``, :mod:`.step_batches`) runs the first three as its rollout mode
    # needs (DAPO's fill repeats them until the batch is full). Every stage is collective (each
    # rank calls it in the same order); rank 0 holds the selector.
    def train_step(self) -> dict[str, Any]:
        """One GRPO step (collective). The record is complete on rank 0."""
        self.step += 1
        t0 = time.perf_counter()
        self.times = StepTimes()
        batch = self.batches()
        results = gather_results(self.dist, batch, self.times, self._step_errors, self.cfg.rollouts)
        self._stop_on_verifier_errors(results.errors)  # before the selector or the model learn from them
        update_s = self.feed_selector(batch.rolled_ids, batch.rolled_successes, batch.rolled_trials)
        t_train = time.perf_counter()
        stats = self.optimise(batch.rollouts)
        train_s = time.perf_counter() - t_train
        return self.step_record(batch, results, stats, update_s=update_s, train_s=train_s, t0=t0)

    def select_batch(self, count: int, exclude: npt.NDArray[np.bool_] | None = None) -> list[int]:
        """Stage 1 (rank 0's selector; every rank receives the ids): ``count`` tasks, none of
        ``exclude``; fewer when fewer are left."""
        ids: list[int] | None = None
        if self.dist.is_main:
            t = time.perf_counter()
            sel = self._selection()
            if exclude is None:
                chosen = sel.select(count)
            elif isinstance(sel, EpochOrder):  # a data loader: hands out what is left
                chosen = sel.select(count, exclude=exclude)
            else:
                left = int((~exclude).sum())
                chosen = sel.select(min(count, left), exclude=exclude) if left else []
            ids = [int(i) for i in chosen]
            self.times.select_s += time.perf_counter() - t
            if isinstance(self.selector, PosteriorSelector) and len(ids):
                self.times.picks.append(self.selector.explain(ids))
        return self.dist.broadcast(ids)  # type: ignore[no-any-return]

    def roll_out(self, ids: list[int]) -> Rollouts | None:
        """Stage 2: this rank's share of ``ids``, each task's prompt sampled ``rollouts`` times
        (None when the share is empty)."""
        mine = self.dist.shard(ids)
        if not mine:
            return None
        t = time.perf_counter()
        with self.dist.full_params(self.model):
            ro = generate_rollouts(
                self.model, self.tok, [self.chats[i] for i in mine], mine, self.cfg.rollouts, **self._sampling()
            )
        self.times.gen_s += time.perf_counter() - t
        self.times.gen_tokens += int(ro.completion_mask.sum())
        return ro

    def roll_out_plan(self, ids: list[int], counts: list[int]) -> PlannedRollouts:
        """Stage 2 for bots-plan: task ``ids[i]`` sampled ``counts[i]`` times, one generation
        batch per distinct count (either rollout engine)."""
        t = time.perf_counter()
        with self.dist.full_params(self.model):
            ro = generate_planned_rollouts(
                self.model, self.tok, [self.chats[i] for i in ids], ids, counts, **self._sampling()
            )
        self.times.gen_s += time.perf_counter() - t
        self.times.gen_tokens += sum(int(p.completion_mask.sum()) for p in ro.parts)
        return ro

    def _sampling(self) -> dict[str, Any]:
        """How rollouts are sampled (:func:`.rollout.generate_rollouts`' keywords)."""
        cfg = self.cfg
        return {
            "max_new_tokens": cfg.max_new_tokens,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "batch_size": cfg.generation_batch_size,
            "max_prompt_tokens": cfg.max_prompt_tokens,
            "bf16": cfg.bf16,
            "engine": cfg.rollout_engine,
            "sampler": self._int8_twin(),
        }

    def _int8_twin(self) -> Any:
        """With ``rollout_precision=int8``: the policy's twin with int8 frozen weights, built at
        the first rollout (after any warm-up or resume) and kept: it shares the trainable
        weights, so it follows every update (:mod:`.sampling_copy`)."""
        if self.cfg.rollout_precision != "int8":
            return None
        if self._twin is None:
            self._twin = int8_twin(self.model)
        return self._twin

    def score(self, ro: Rollouts | None) -> Rollouts | None:
        """Stage 3: ``ro.rewards`` from the pool's verifiers; verifier errors are tallied for
        the step (and may stop the run before anything learns from them)."""
        if ro is None:
            return None
        t = time.perf_counter()
        rows = [int(i) for i in ro.task_ids.tolist()]
        ro.rewards = torch.as_tensor(score_texts(self.scorer, self.pool, rows, ro.texts, ro.n, self._step_errors))
        self.times.reward_s += time.perf_counter() - t
        return ro

    def gather_successes(self, ro: Rollouts | None) -> npt.NDArray[np.float64]:
        """Every rank's successes per task (in the order of the rolled-out ids), on every rank:
        the sum of each group's rewards, summed as the step's record sums them."""
        local = [] if ro is None else ro.rewards.tolist()  # type: ignore[union-attr]
        rewards = [r for part in self.dist.gather(local) for r in part]
        return np.asarray(rewards, dtype=np.float64).reshape(len(rewards), self.cfg.rollouts).sum(axis=1)

    def feed_selector(
        self,
        task_ids: npt.NDArray[np.int64],
        successes: npt.NDArray[np.float64],
        trials: npt.NDArray[np.float64] | None = None,
    ) -> float:
        """Stage 4 (rank 0): the selector learns every rolled-out group's successes out of its
        trials (``trials``, a plan's counts; None: n each), in one update (one step of its
        clock); returns the seconds it took."""
        if not self.dist.is_main:
            return 0.0
        t = time.perf_counter()
        learner = self._selection()
        flagged = set(self.guard.flagged) if self.guard is not None else set()
        learner.update(task_ids, successes, float(self.cfg.rollouts) if trials is None else trials)
        took = time.perf_counter() - t
        if self.guard is not None:
            for name in self.guard.flagged:
                if name not in flagged:  # once per group, as the guard's own warning
                    log.warning(
                        "guard: group %r scored 0 in every rollout of its last %d updates: a verifier or "
                        "format mismatch looks exactly like 'too hard'",
                        name,
                        self.guard.zero_streak,
                    )
        return took

    def optimise(self, ro: Rollouts | PlannedRollouts | None) -> dict[str, float]:
        """Stage 5: GRPO updates on this rank's share of the batch (:func:`.optimise.grpo_update`),
        then the learning-rate schedule's step."""
        # From here on the step changes the weights: a signal lets it finish (see _on_signal).
        self._abortable = False
        stats = (
            grpo_update(self.model, self.optimizer, ro, self.cfg.grpo, self.dist, self.device, self.ref_model)
            if ro is not None
            else {}
        )
        self.scheduler.step()
        return stats

    def step_record(
        self,
        batch: StepBatch,
        results: StepResults,
        stats: dict[str, float],
        *,
        update_s: float,
        train_s: float,
        t0: float,
    ) -> dict[str, Any]:
        """Stage 6: the step's metrics record (collective: sums the ranks' trained tokens)."""
        train_tokens = self.dist.sum(stats.get("train_tokens", 0.0))
        self.cum_rollouts += batch.charged
        self.cum_gen_tokens += results.gen_tokens
        return step_record(
            step=self.step,
            method=self.cfg.method,
            rollouts_per_task=self.cfg.rollouts,
            batch=batch,
            results=results,
            times=self.times,
            stats=stats,
            train_tokens=train_tokens,
            update_s=update_s,
            train_s=train_s,
            started=t0,
            lr=float(self.scheduler.get_last_lr()[0]),
            capability=self.selector.capability if isinstance(self.selector, PosteriorSelector) else None,
            cum_rollouts=self.cum_rollouts,
            extra=self._guard_record(),
        )

    def _guard_record(self) -> dict[str, Any]:
        """With the guard: the flagged groups and :meth:`~bots_rft.GroupGuard.metrics`."""
        if self.guard is None:
            return {}
        return {"guard_flagged": self.guard.flagged, **self.guard.metrics()}

    def evaluate(self) -> dict[str, Any] | None:
        """The held-out evaluation at this step (:func:`.evaluate.evaluate_policy`), or None."""
        if self.eval_pool is None or not self.eval_rows:
            return None
        return evaluate_policy(
            self.model,
            self.tok,
            self.eval_pool,
            self.eval_chats,
            self.eval_rows,
            self.scorer,
            self.dist,
            self.cfg,
            self.step,
        )

    def _log_eval(self, res: dict[str, Any] | None) -> None:
        if res is not None:
            self.logger.write({"kind": "eval", "step": self.step, "cum_rollouts": self.cum_rollouts, **res})


def train(cfg: TrainConfig) -> TrainResult:
    """Run a whole training (or resume one) and release the process group afterwards."""
    trainer = GRPOTrainer(cfg)
    try:
        return trainer.run()
    finally:
        trainer.close()
