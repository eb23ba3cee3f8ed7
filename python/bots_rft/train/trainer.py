"""The GRPO training loop fed by a task selector (the paper's GRPO setting).

Each step: rank 0's selector picks B tasks and broadcasts their ids; every rank rolls out its
share n times (temperature 1.0), scores them with the pool's verifiers, and the rewards come
back to rank 0, which updates the selector with every task's successes; then each rank trains
on its share: group-normalised advantages, clipped surrogate over mini-batches against the
generation policy's log-probs, AdamW, grad-norm clip, constant lr after a linear warm-up.
"""

from __future__ import annotations

import copy
import logging
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from .. import BOTS
from ..baselines import DynamicSampling
from ..data import TaskPool
from ..errors import CheckpointError, ConfigError
from ..metrics import effective_ratios
from ..models import resolve_device
from ..rewards import RewardScorer
from .checkpoint import (latest_checkpoint, load_model_state, load_training_state, rng_state, save_checkpoint,
                         set_rng_state)  # fmt: skip
from .config import SELECTION_PARAMS, TrainConfig
from .distributed import Dist
from .evaluate import evaluate
from .grpo import group_advantages, grpo_loss
from .logger import MetricsLogger
from .model import autocast, load_policy, sequence_logprobs, unwrap
from .rollout import Rollouts, concat_rollouts, generate_rollouts
from .pool_identity import compare_pools, grown_state, load_pool_ids, save_pool_ids
from .scoring import VerifierErrors, register_config_verifiers, score_texts
from .selection import load_selector, make_selector, save_selector
from .stops import RunInterrupted, VerifierErrorStop, signal_name
from .sft import sft_warmup

__all__ = ["GRPOTrainer", "TrainResult", "train", "resolve_eval_pool"]

log = logging.getLogger("bots_rft.train")

# Config keys that must match for a checkpoint to be resumed (the pool is checked by identity).
_RESUME_KEYS = ("method", "batch_size", "rollouts", "seed", "mini_batch_size", "ppo_epochs")
# What a run writes into out_dir; a directory holding any is refused unless resuming or overwriting.
_RUN_OUTPUTS = ("metrics.jsonl", "checkpoints", "tensorboard")


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


def resolve_eval_pool(cfg: TrainConfig) -> Path | None:
    """``eval_pool``, or ``eval.parquet`` beside a pool named ``train.parquet``."""
    if cfg.eval_pool:
        return Path(cfg.eval_pool)
    p = Path(cfg.pool)
    sibling = p.with_name("eval.parquet")
    return sibling if p.name == "train.parquet" and sibling.exists() else None


def _trim(ids: torch.Tensor, attn: torch.Tensor, cmask: torch.Tensor, plen: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Drop columns that are padding in every row of a micro-batch (left of the prompts, right
    of the completions): less compute, same log-probs."""
    first = int(attn[:, :plen].any(0).long().argmax()) if plen else 0
    used = cmask.any(0)
    last = int(used.nonzero().max()) + 1 if bool(used.any()) else 1
    return ids[:, first : plen + last], attn[:, first : plen + last], cmask[:, :last], plen - first


class GRPOTrainer:
    def __init__(self, cfg: TrainConfig) -> None:
        cfg.validate()
        self.cfg = cfg
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
        self.out_dir = Path(cfg.out_dir)
        self.ckpt_root = self.out_dir / "checkpoints"
        self._check_out_dir()

        self.pool = TaskPool.load(cfg.pool)
        if cfg.batch_size > len(self.pool):
            raise ConfigError(f"batch_size: {cfg.batch_size} exceeds the pool's {len(self.pool)} tasks")
        self.chats = self.pool.prompts(system_prompt=cfg.system_prompt)
        self.pool_identity = self.pool.identity() if self.dist.is_main else None
        self.weak = self.pool.pass_rate(cfg.weak_column) if cfg.weak_column else None
        self.strong = self.pool.pass_rate(cfg.strong_column) if cfg.strong_column else None
        eval_path = resolve_eval_pool(cfg)
        self.eval_pool = TaskPool.load(eval_path) if eval_path is not None else None
        self.eval_chats = self.eval_pool.prompts(system_prompt=cfg.system_prompt) if self.eval_pool else []
        self.eval_rows: list[int] = []
        if self.eval_pool is not None:
            order = np.random.default_rng(12345).permutation(len(self.eval_pool))
            self.eval_rows = sorted(order[: cfg.eval_limit or len(order)].tolist())

        torch.manual_seed(cfg.seed)
        self.resume_from = latest_checkpoint(self.ckpt_root) if cfg.resume else None
        model, self.tok = load_policy(cfg.model, str(device), cfg.dtype, cfg.seed)
        self.sft_losses: list[float] = []
        if cfg.sft_steps and self.resume_from is None and self.dist.is_main:
            # Rank 0 only: DDP/FSDP broadcast its weights to the other ranks when wrapping.
            self.sft_losses = sft_warmup(model, self.tok, self.pool, self.chats, cfg, device)
        if cfg.gradient_checkpointing:
            import warnings

            with warnings.catch_warnings():  # transformers 5 renames it; the old name still works
                warnings.simplefilter("ignore", FutureWarning)
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.ref_model = None
        if cfg.kl_coef > 0:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        self.model = self.dist.wrap(model, cfg.distributed, device)
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay
        )
        warm = cfg.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / warm) if warm else 1.0
        )
        self.scorer = RewardScorer(workers=cfg.reward_workers, timeout=cfg.reward_timeout)
        self.selector: Any = None  # rank 0's; the other ranks follow its broadcasts
        # Every rank must take the same path in _select, so this is decided from the config,
        # not from the selector only rank 0 holds.
        self.rolls_out_in_select = cfg.method == "dynamic" or cfg.dynamic_sampling
        if self.dist.is_main:
            self.selector = make_selector(cfg, len(self.pool), self.weak, self.strong, rollout=self._dynamic_callback)
        self.step = 0
        self.cum_rollouts = 0
        self.cum_gen_tokens = 0
        self._signal: int | None = None
        self._abortable = False  # a signal may abandon the step in progress (see _on_signal)
        self._snapshot: dict[str, Any] | None = None
        self._step_errors = VerifierErrors()
        self._cache: dict[int, Rollouts] = {}
        self._gen_s = 0.0
        self._reward_s = 0.0
        self._gen_tokens = 0
        if self.resume_from is not None:
            self._restore(self.resume_from)
        self.logger = MetricsLogger(self.out_dir, enabled=self.dist.is_main, tensorboard=cfg.tensorboard,
                                    resume_step=self.step if self.resume_from is not None else None)  # fmt: skip

    # ------------------------------------------------------------------------ checkpoints
    def _check_out_dir(self) -> None:
        """A directory holding another run is refused (nothing is written) unless resuming it or
        told to overwrite it; overwriting removes that run's outputs first."""
        if self.cfg.resume or not self.out_dir.is_dir():
            return
        used = [n for n in _RUN_OUTPUTS if (self.out_dir / n).exists()]
        if not used:
            return
        if not self.cfg.overwrite:
            raise ConfigError(
                f"out_dir: {str(self.out_dir)!r} already holds a training run ({', '.join(used)}); continue it with "
                "--resume, replace it with --overwrite, or choose another directory"
            )
        if self.dist.is_main:
            for name in used:
                target = self.out_dir / name
                shutil.rmtree(target) if target.is_dir() else target.unlink()
        self.dist.barrier()

    def _check_pool(self, path: Path, saved: dict[str, Any] | None) -> Any:
        """None when the pool is the checkpoint's; else the function that grows the saved selector
        state to this pool (``extend_pool``), or a ConfigError saying what changed."""
        if saved is None:
            raise CheckpointError(f"checkpoint {str(path)!r} does not record its pool's identity")
        change = compare_pools(saved, load_pool_ids(path), self.pool)
        if change is None:
            return None
        if not self.cfg.extend_pool:
            raise ConfigError(
                f"pool: {self.cfg.pool!r} is not the pool the checkpoint in {str(path)!r} was trained on "
                f"({change.describe()}); resume on that pool, or pass --extend-pool (extend_pool=true) to add tasks"
            )
        if change.removed_ids.size:
            grown_state({}, change, self.selector)  # raises: names the removed ids, even when extending
        if not change.added.size and not change.reordered:
            log.warning("pool: resuming on changed task content (%s)", change.describe())
            return None
        fresh = self.selector
        log.warning("pool: extending the checkpoint's pool (%s); new tasks start at the prior", change.describe())
        return lambda state: grown_state(state, change, fresh)

    def _changed_selection_params(self, path: Path, saved: dict[str, Any]) -> dict[str, Any]:
        """The selection parameters to change on resume ({} when none differ or the run keeps
        the checkpoint's); refuses a difference unless ``resume_params`` says what to do."""
        # mopps and dots fix lam, rho and the sampling rule; random and offline use none of them.
        keys = SELECTION_PARAMS if self.cfg.method == "bots" else ("target",) if self.cfg.method in ("mopps", "dots") else ()
        diff = {k: getattr(self.cfg, k) for k in keys if k in saved and saved[k] != getattr(self.cfg, k)}
        if not diff:
            return {}
        if self.cfg.resume_params == "error":
            first = next(iter(diff))
            raise ConfigError(
                f"{first}: the checkpoint in {str(path)!r} was trained with {saved[first]!r}, now {diff[first]!r}; "
                "pass resume_params=config to continue with the new value(s), or resume_params=checkpoint to keep the saved ones"
            )
        if self.cfg.resume_params == "checkpoint":
            log.warning("resume: keeping the checkpoint's selection parameters (%s)",
                        ", ".join(f"{k}={saved[k]!r}" for k in diff))  # fmt: skip
            return {}
        return diff

    def _restore(self, path: Path) -> None:
        state = load_training_state(path, self.dist)
        adapt = self._check_pool(path, state["trainer"].get("pool")) if self.dist.is_main else None
        saved = state["trainer"].get("config", {})
        for key in _RESUME_KEYS:
            if key in saved and saved[key] != getattr(self.cfg, key):
                raise ConfigError(
                    f"{key}: the checkpoint in {str(path)!r} was trained with {saved[key]!r}, now {getattr(self.cfg, key)!r}"
                )
        try:
            if self.dist.is_fsdp(self.model):
                from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

                load_model_state(self.model, state["model"], self.dist)
                osd = FSDP.optim_state_dict_to_load(self.model, self.optimizer, self.dist.broadcast(state["optimizer"]))
                self.optimizer.load_state_dict(osd)
            else:
                load_model_state(self.model, state["model"], self.dist)
                self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {str(path)!r} does not fit this model/optimizer ({exc})") from None
        set_rng_state(state["rng"])
        changed = self._changed_selection_params(path, saved)
        if self.dist.is_main:
            self.selector = load_selector(self.selector, path, adapt)
            if isinstance(self.selector, DynamicSampling):
                self.selector.rollout = self._dynamic_callback
            bots = self.selector.proposer if isinstance(self.selector, DynamicSampling) else self.selector
            if changed and isinstance(bots, BOTS):
                bots.set_params(**changed)
                log.warning("resume: selection parameters changed from step %d on: %s", int(state["trainer"]["step"]) + 1,
                            ", ".join(f"{k}={v!r}" for k, v in changed.items()))  # fmt: skip
        t = state["trainer"]
        self.step = int(t["step"])
        self.cum_rollouts = int(t.get("cum_rollouts", 0))
        self.cum_gen_tokens = int(t.get("cum_gen_tokens", 0))
        if self.dist.is_main:
            log.info("resumed from %s at step %d", path, self.step)

    def save(self) -> Path:
        return save_checkpoint(
            self.ckpt_root, self.step, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            save_selector=lambda d: save_selector(self.selector, d),
            trainer_state={"config": self.cfg.to_dict(), "cum_rollouts": self.cum_rollouts,
                           "cum_gen_tokens": self.cum_gen_tokens, "pool": self.pool_identity},
            dist_=self.dist, keep=self.cfg.keep_checkpoints, save_extra=lambda d: save_pool_ids(d, self.pool),
        )  # fmt: skip

    # --------------------------------------------------------------------------- rollouts
    def _rollout_local(self, ids: list[int]) -> Rollouts | None:
        """Roll out and score this rank's tasks; accumulates generation time and tokens."""
        if not ids:
            return None
        cfg = self.cfg
        t0 = time.perf_counter()
        with self.dist.full_params(self.model):
            ro = generate_rollouts(
                self.model, self.tok, [self.chats[i] for i in ids], ids, cfg.rollouts, max_new_tokens=cfg.max_new_tokens,
                temperature=cfg.temperature, top_p=cfg.top_p, batch_size=cfg.generation_batch_size,
                max_prompt_tokens=cfg.max_prompt_tokens, bf16=cfg.bf16,
            )  # fmt: skip
        t1 = time.perf_counter()
        ro.rewards = torch.as_tensor(score_texts(self.scorer, self.pool, ids, ro.texts, cfg.rollouts, self._step_errors))
        self._gen_s += t1 - t0
        self._reward_s += time.perf_counter() - t1
        self._gen_tokens += int(ro.completion_mask.sum())
        return ro

    def _rollout_round(self, ids: list[int]) -> npt.NDArray[np.float64]:
        """Collective: every rank rolls out its share of ``ids`` and caches it per task;
        returns the successes of all ``ids`` (in order) on every rank."""
        mine = self.dist.shard(ids)
        ro = self._rollout_local(mine)
        if ro is not None:
            cpu = ro.to(torch.device("cpu"))
            for pos, tid in enumerate(mine):
                self._cache[int(tid)] = cpu.take([pos])
        succ = [] if ro is None else ro.rewards.sum(1).tolist()  # type: ignore[union-attr]
        return np.asarray([s for part in self.dist.gather(succ) for s in part], dtype=np.float64)

    def _dynamic_callback(self, ids: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        # Runs on rank 0 inside DynamicSampling.select; the other ranks wait in _select_dynamic.
        self.dist.broadcast(("rollout", [int(i) for i in ids]))
        return self._rollout_round([int(i) for i in ids])

    def _select(self) -> tuple[list[int], Rollouts | None, float]:
        """This step's task ids (same on every rank), this rank's rollouts of its share, and the
        selection latency in seconds (rank 0)."""
        cfg = self.cfg
        select_s = 0.0
        if not self.rolls_out_in_select:
            ids = None
            if self.dist.is_main:
                t = time.perf_counter()
                ids = [int(i) for i in self.selector.select(cfg.batch_size)]
                select_s = time.perf_counter() - t
            ids = self.dist.broadcast(ids)
            return ids, self._rollout_local(self.dist.shard(ids)), select_s
        # Dynamic sampling rolls out inside select: rank 0 drives, the others follow its rounds.
        self._cache.clear()
        if self.dist.is_main:
            t = time.perf_counter()
            gen_before = self._gen_s + self._reward_s
            ids = [int(i) for i in self.selector.select(cfg.batch_size)]
            select_s = time.perf_counter() - t - (self._gen_s + self._reward_s - gen_before)
            self.dist.broadcast(("done", ids))
        else:
            while True:
                msg = self.dist.broadcast(None)
                if msg[0] == "done":
                    ids = msg[1]
                    break
                self._rollout_round(msg[1])
        # Each rank trains on its share of the kept tasks, wherever they were rolled out.
        have = {i: self._cache[i] for i in ids if i in self._cache}
        merged: dict[int, Rollouts] = {}
        for part in self.dist.gather(have) if self.dist.enabled else [have]:
            merged.update(part)
        mine = self.dist.shard(ids)
        ro = concat_rollouts([merged[i] for i in mine], int(self.tok.pad_token_id)) if mine else None
        self._cache.clear()
        return ids, ro, select_s

    # --------------------------------------------------------------------------- training
    def _logprobs_nograd(self, model: Any, ro: Rollouts) -> torch.Tensor:
        out = torch.zeros(ro.completion_mask.shape, dtype=torch.float32, device=self.device)
        mb = self.cfg.micro_batch_size
        with torch.no_grad():
            for s in range(0, ro.input_ids.shape[0], mb):
                sl = slice(s, s + mb)
                ids, attn, cm, plen = _trim(ro.input_ids[sl], ro.attention_mask[sl], ro.completion_mask[sl], ro.prompt_len)
                with autocast(self.device, self.cfg.bf16):
                    lp = sequence_logprobs(model, ids, attn, plen, self.cfg.temperature)
                out[sl, : cm.shape[1]] = lp.float()
        return out

    def _train(self, ro: Rollouts) -> dict[str, float]:
        # From here on the step changes the weights: a signal lets it finish (see _on_signal).
        self._abortable = False
        cfg = self.cfg
        n = cfg.rollouts
        assert ro.rewards is not None
        rewards = ro.rewards
        ro = ro.to(self.device)
        adv = group_advantages(rewards.to(self.device), cfg.adv_eps).reshape(-1)
        m = cfg.mini_batch // self.dist.world
        minis = [list(range(s, min(s + m, ro.num_tasks))) for s in range(0, ro.num_tasks, m)]
        # One mini-batch, one epoch: the policy is still the generation policy, so its own
        # (detached) log-probs are the old ones and the extra forward pass is saved.
        old = self._logprobs_nograd(self.model, ro) if (cfg.ppo_epochs > 1 or len(minis) > 1) else None
        ref = self._logprobs_nograd(self.ref_model, ro) if self.ref_model is not None else None
        sums: dict[str, float] = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "ratio": 0.0}
        grad_norms: list[float] = []
        count = 0
        train_tokens = 0
        self.model.train()
        for _ in range(cfg.ppo_epochs):
            for mini in minis:
                seqs = torch.tensor([i * n + j for i in mini for j in range(n)], device=self.device)
                local_tokens = float(ro.completion_mask[seqs].sum())
                if cfg.loss_agg == "token-mean":
                    # DDP averages gradients over ranks: normalise by the global token count.
                    denom = max(self.dist.sum(local_tokens), 1.0) / self.dist.world
                else:
                    denom = float(len(seqs))
                micro = [seqs[s : s + cfg.micro_batch_size] for s in range(0, len(seqs), cfg.micro_batch_size)]
                for k, mi in enumerate(micro):
                    ids, attn, cm, plen = _trim(ro.input_ids[mi], ro.attention_mask[mi], ro.completion_mask[mi], ro.prompt_len)
                    with self.dist.no_sync(self.model, skip=k < len(micro) - 1):
                        with autocast(self.device, cfg.bf16):
                            logp = sequence_logprobs(self.model, ids, attn, plen, cfg.temperature)
                        old_mi = old[mi, : cm.shape[1]] if old is not None else logp.detach()
                        loss, st = grpo_loss(
                            logp, old_mi, adv[mi], cm, clip_eps=cfg.clip_eps,
                            ref_logp=ref[mi, : cm.shape[1]] if ref is not None else None, kl_coef=cfg.kl_coef,
                            loss_agg=cfg.loss_agg, denom=denom,
                        )  # fmt: skip
                        loss.backward()
                    train_tokens += int(attn.sum())
                    sums["loss"] += float(loss.detach())
                    sums["pg_loss"] += st.pg_loss
                    sums["kl"] += st.kl
                    sums["clip_frac"] += st.clip_frac * st.tokens
                    sums["ratio"] += st.ratio_mean * st.tokens
                    count += st.tokens
                if self.dist.is_fsdp(self.model):
                    gn = self.model.clip_grad_norm_(cfg.grad_clip)  # type: ignore[operator]
                else:
                    gn = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
                grad_norms.append(float(gn))
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        updates = max(len(minis) * cfg.ppo_epochs, 1)
        return {
            "loss": sums["loss"] / updates,
            "pg_loss": sums["pg_loss"] / updates,
            "kl": sums["kl"] / updates,
            "clip_frac": sums["clip_frac"] / max(count, 1),
            "ratio_mean": sums["ratio"] / max(count, 1),
            "grad_norm": float(np.mean(grad_norms)) if grad_norms else 0.0,
            "optimizer_updates": float(updates),
            "train_tokens": float(train_tokens),
        }

    # ------------------------------------------------------------------------------ steps
    def train_step(self) -> dict[str, Any]:
        """One GRPO step (collective). The record is complete on rank 0."""
        cfg = self.cfg
        self.step += 1
        t0 = time.perf_counter()
        self._gen_s = self._reward_s = 0.0
        self._gen_tokens = 0
        extra_before = self.selector.extra_rollouts if isinstance(self.selector, DynamicSampling) else 0
        ids, ro, select_s = self._select()
        mine = self.dist.shard(ids)
        rewards_local = [] if ro is None else ro.rewards.tolist()  # type: ignore[union-attr]
        parts = self.dist.gather((mine, rewards_local, self._gen_s, self._reward_s, self._gen_tokens,
                                  [] if ro is None else ro.completion_mask.sum(1).tolist(), self._step_errors))  # fmt: skip
        errors = VerifierErrors.merged(p[6] for p in parts)
        self._stop_on_verifier_errors(errors)  # before the selector or the model learn from them
        rewards = np.asarray([r for p in parts for r in p[1]], dtype=np.float64).reshape(len(ids), cfg.rollouts)
        successes = rewards.sum(axis=1)
        update_s = 0.0
        if self.dist.is_main:
            # Every selected task's outcome, before any filtering, reaches the selector.
            t = time.perf_counter()
            self.selector.update(np.asarray(ids, dtype=np.int64), successes, float(cfg.rollouts))
            update_s = time.perf_counter() - t
        t_train = time.perf_counter()
        stats = self._train(ro) if ro is not None else {}
        train_s = time.perf_counter() - t_train
        self.scheduler.step()
        train_tokens = self.dist.sum(stats.get("train_tokens", 0.0))
        gen_s = max(p[2] for p in parts)
        gen_tokens = int(sum(p[4] for p in parts))
        lengths = [x for p in parts for x in p[5]]
        rollouts = cfg.batch_size * cfg.rollouts
        extra = 0
        if isinstance(self.selector, DynamicSampling):
            extra = self.selector.extra_rollouts - extra_before
            rollouts += extra
        self.cum_rollouts += rollouts
        self.cum_gen_tokens += gen_tokens
        ratios = effective_ratios(successes, float(cfg.rollouts))
        step_s = time.perf_counter() - t0
        cap = self.selector.capability if isinstance(self.selector, BOTS) else None
        rec: dict[str, Any] = {
            "kind": "train", "step": self.step, "method": cfg.method,
            "reward_mean": float(rewards.mean()), "etr": ratios.etr, "below_one": ratios.below_one,
            "above_zero": ratios.above_zero, "effective_tasks": int(round(ratios.etr * len(ids))),
            "select_ms": 1e3 * select_s, "update_ms": 1e3 * update_s,
            "gen_s": gen_s, "reward_s": max(p[3] for p in parts), "train_s": train_s, "step_s": step_s,
            "gen_tokens": gen_tokens, "gen_tokens_per_s": gen_tokens / gen_s if gen_s > 0 else None,
            "train_tokens_per_s": train_tokens / train_s if train_s > 0 else None,
            "response_len": float(np.mean(lengths)) if lengths else 0.0,
            "lr": float(self.scheduler.get_last_lr()[0]), "capability": cap,
            "rollouts": rollouts, "extra_rollouts": extra, "cum_rollouts": self.cum_rollouts,
            "task_ids": ids, "successes": successes.tolist(), **errors.record(),
            **{k: v for k, v in stats.items() if k != "train_tokens"},
        }  # fmt: skip
        return rec

    def evaluate(self) -> dict[str, Any] | None:
        if self.eval_pool is None or not self.eval_rows:
            return None
        t = time.perf_counter()
        res = evaluate(
            self.model, self.tok, self.eval_pool, self.eval_chats, self.eval_rows, self.scorer, self.dist,
            max_new_tokens=self.cfg.eval_max_new_tokens or self.cfg.max_new_tokens,
            batch_size=self.cfg.generation_batch_size, max_prompt_tokens=self.cfg.max_prompt_tokens, bf16=self.cfg.bf16,
        )  # fmt: skip
        if res is not None:
            res["eval_s"] = time.perf_counter() - t
        return res

    def _log_eval(self, res: dict[str, Any] | None) -> None:
        if res is not None:
            self.logger.write({"kind": "eval", "step": self.step, "cum_rollouts": self.cum_rollouts, **res})

    # -------------------------------------------------------------------------------- run
    def run(self) -> TrainResult:
        """Train to ``steps``. SIGTERM/SIGINT stop the run within seconds, even while a verifier is
        stuck: a step still rolling out or scoring is abandoned, one in its optimizer updates is
        finished; the last finished step is checkpointed and the result says ``interrupted``.
        A step whose verifications are verifier errors at or above ``verifier_error_stop`` raises
        :class:`~bots_rft.train.stops.VerifierErrorStop` after checkpointing the step before."""
        cfg = self.cfg
        from tqdm.auto import tqdm

        handlers_set = threading.current_thread() is threading.main_thread()
        previous: dict[int, Any] = {}
        if handlers_set:
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        history: list[dict[str, Any]] = []
        final_eval = None
        failure: VerifierErrorStop | None = None
        checkpoint: Path | None = None
        try:
            if self.dist.is_main:
                self.logger.write({"kind": "config", "step": self.step, "config": cfg.to_dict(),
                                   "world_size": self.dist.world, "device": str(self.device),
                                   "pool_tasks": len(self.pool), "eval_tasks": len(self.eval_rows),
                                   "sft_losses": self.sft_losses[-5:] if self.sft_losses else None})  # fmt: skip
            bar = tqdm(total=cfg.steps, initial=self.step, desc=f"grpo {cfg.method}", unit="step",
                       disable=not (cfg.progress and self.dist.is_main))  # fmt: skip
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
                failure = exc
            self._abortable = False
            bar.close()
            checkpoint = self.save()
        finally:
            self._abortable = False
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.logger.close()
            self.scorer.close()
        if failure is not None:
            failure.saved(self.step, str(checkpoint))
            raise failure  # its message is the report (the CLI prints it once; logging it too doubled it)
        interrupted = self._signal is not None and self.step < cfg.steps
        if interrupted and self.dist.is_main:
            assert self._signal is not None
            log.warning("%s: stopped; checkpoint of step %d saved in %s (continue with --resume)",
                        signal_name(self._signal), self.step, checkpoint)  # fmt: skip
        totals = self._verifier_error_totals()
        return TrainResult(self.out_dir, self.step, interrupted, final_eval, self.logger.path, history,
                           signal=self._signal if interrupted else None, checkpoint=checkpoint,
                           verifier_errors=sum(totals.values()), verifier_error_kinds=totals)  # fmt: skip

    def _finished_step(self) -> None:
        """The state after the last finished step, kept so that a step abandoned half-way (by a
        signal, or for verifier errors) can be checkpointed as if it never began: its selection
        moved the selector's random stream and its sampling the RNGs, its update the posterior."""
        self._snapshot = {
            "step": self.step, "cum_rollouts": self.cum_rollouts, "cum_gen_tokens": self.cum_gen_tokens,
            "rng": rng_state(), "selector": copy.deepcopy(self.selector.state_dict()) if self.dist.is_main else None,
        }  # fmt: skip
        self._step_errors = VerifierErrors()
        # Abandoning a step mid-way is only safe where no other rank waits in a collective.
        self._abortable = not self.dist.enabled

    def _rewind(self) -> None:
        snap = self._snapshot
        assert snap is not None
        self.step, self.cum_rollouts, self.cum_gen_tokens = snap["step"], snap["cum_rollouts"], snap["cum_gen_tokens"]
        set_rng_state(snap["rng"])
        if self.dist.is_main:
            self.selector.load_state_dict(snap["selector"])
        self._cache.clear()

    def _stop_on_verifier_errors(self, errors: VerifierErrors) -> None:
        if errors.scored and errors.count and errors.rate >= self.cfg.verifier_error_stop:
            raise VerifierErrorStop(self.step, errors.count, errors.scored, errors.first, self.cfg.verifier_error_stop)

    def _verifier_error_totals(self) -> dict[str, int]:
        """Verifier errors of the whole run (resumed parts included), by kind, from metrics.jsonl."""
        from .logger import read_metrics

        totals: dict[str, int] = {}
        if not (self.dist.is_main and self.logger.path.exists()):
            return totals
        for rec in read_metrics(self.logger.path):
            for kind, n in (rec.get("verifier_error_kinds") or {}).items():
                totals[kind] = totals.get(kind, 0) + int(n)
        return dict(sorted(totals.items()))

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

    def close(self) -> None:
        self.dist.close()

    def save_pretrained(self, directory: str | Path) -> None:
        """The policy as a Hugging Face directory (rank 0)."""
        if self.dist.is_main:
            net = unwrap(self.model)
            net.save_pretrained(str(directory))
            self.tok.save_pretrained(str(directory))


def train(cfg: TrainConfig) -> TrainResult:
    """Run a whole training (or resume one) and release the process group afterwards."""
    trainer = GRPOTrainer(cfg)
    try:
        return trainer.run()
    finally:
        trainer.close()
