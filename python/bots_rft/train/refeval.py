"""Reference pass rates: each task's success rate under a reference model, measured by real
sampled rollouts (temperature 1.0 by default) and written into the pool as a difficulty column
(``bots refeval``). These are the weak/strong reference rates BOTS's interpolation uses.

Work is done in fixed chunks of tasks; after each chunk the per-task successes go to a sidecar
progress file (``<out>.<column>.progress.jsonl``), flushed and fsynced, so an interrupted run
resumes where it stopped. Each chunk's sampling seed depends only on (seed, chunk number), so a
resumed run produces what an uninterrupted one would on the same device and batch size.
"""

from __future__ import annotations

import json
import math
import os
import time
import zlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..data.pool import Message, TaskPool
from ..errors import ConfigError, InvalidArgumentError
from ..rewards.base import RewardItem
from ..rewards.scorer import RewardScorer
from .config import ROLLOUT_ENGINES

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "RefEvalConfig",
    "RefEvalSummary",
    "sample_responses",
    "run_refeval",
    "progress_path_for",
    "REFEVAL_ENGINES",
]

#: ``engine`` values: the trainer's rollout engines (:mod:`.rollout`).
REFEVAL_ENGINES = ROLLOUT_ENGINES


@dataclass
class RefEvalConfig:
    model: str
    pool: str
    column: str
    # A LoRA adapter merged into ``model``: a peft adapter directory, a LoRA run's checkpoint, or a
    # LoRA run's output directory (its latest checkpoint); see run_checkpoint.resolve_adapter.
    adapter: str | None = None
    rollouts: int = 16
    out: str | None = None  # default: write back into ``pool``
    max_new_tokens: int = 512
    max_prompt_tokens: int | None = 4096
    system_prompt: str | None = None  # None: the pool's; "": none; else replaces it (as in training)
    temperature: float = 1.0
    top_p: float = 1.0
    batch_size: int = 64  # sequences per generate call
    # the trainer's rollout engines: "fast" (default), "speculative" (fast + a bfloat16 draft), or "hf"
    # (transformers' generate)
    engine: str = "fast"
    chunk_tasks: int | None = None  # tasks per progress flush; default max(1, batch_size // rollouts)
    limit: int | None = None  # only the first ``limit`` rows
    seed: int = 0
    device: str | None = None
    dtype: str | None = None
    workers: int | None = None  # reward worker processes
    reward_timeout: float = 30.0
    restart: bool = False  # ignore (and replace) an existing progress file
    keep_progress: bool = False

    def validate(self) -> None:
        def bad(name: str, why: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"{name}: {why}, got {getattr(self, name)!r}", name)

        if self.rollouts < 1:
            raise bad("rollouts", "must be at least 1")
        if self.max_new_tokens < 1:
            raise bad("max_new_tokens", "must be at least 1")
        if not (self.temperature > 0 and math.isfinite(self.temperature)):
            raise bad("temperature", "must be > 0 (sampling)")
        if not (0 < self.top_p <= 1):
            raise bad("top_p", "must lie in (0, 1]")
        if self.batch_size < 1:
            raise bad("batch_size", "must be at least 1")
        if self.engine not in REFEVAL_ENGINES:
            raise bad("engine", f"expected one of {', '.join(REFEVAL_ENGINES)}")
        if self.chunk_tasks is not None and self.chunk_tasks < 1:
            raise bad("chunk_tasks", "must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise bad("limit", "must be at least 1")
        if not self.column:
            raise bad("column", "needs a name")

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a progress file to be resumed."""
        keys = (
            "model",
            "adapter",
            "column",
            "rollouts",
            "max_new_tokens",
            "max_prompt_tokens",
            "system_prompt",
            "temperature",
            "top_p",
            "batch_size",
            "chunk_tasks",
            "seed",
        )
        # system_prompt and adapter only when set, and engine only when not "hf" (its default): a
        # progress file that names none of them (a run that set none) then matches, and resumes.
        # The engines sample the same distribution but not the same sequences, so a progress file
        # resumes only with the engine that wrote it.
        return {
            k: v
            for k, v in asdict(self).items()
            if (k in keys or k == "engine")
            and not (k in ("system_prompt", "adapter") and v is None)
            and not (k == "engine" and v == "hf")
        }


@dataclass
class RefEvalSummary:
    column: str
    out: str
    tasks: int
    evaluated_now: int
    resumed: int
    mean_pass_rate: float
    share_zero: float
    share_one: float
    share_between: float
    generated_tokens: int
    seconds: float
    rates: npt.NDArray[np.float64] = field(repr=False)
    # Seconds spent sampling and scoring (the chunk loop), and loading the model: tokens/s is
    # over the first, so that a short run is not judged by its model load.
    sampling_seconds: float = 0.0
    load_seconds: float = 0.0
    engine: str = ""  # the engine that sampled

    def lines(self) -> list[str]:
        return [
            f"wrote column {self.column!r} to {self.out}",
            f"tasks {self.tasks} (evaluated now {self.evaluated_now}, resumed {self.resumed}); "
            f"mean pass rate {self.mean_pass_rate:.4f}",
            f"share with pass rate 0: {self.share_zero:.3f}, in (0,1): {self.share_between:.3f}, "
            f"1: {self.share_one:.3f}",
            f"generated {self.generated_tokens} tokens in {self.sampling_seconds:.1f}s of sampling and scoring "
            f"({self.tokens_per_s:.0f} tokens/s, engine {self.engine}); model load {self.load_seconds:.1f}s, "
            f"total {self.seconds:.1f}s",
        ]

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of sampling and scoring."""
        return self.generated_tokens / max(self.sampling_seconds, 1e-9)


def progress_path_for(out: str | os.PathLike[str], column: str) -> Path:
    out_path = Path(out)
    return out_path.with_name(f"{out_path.name}.{column}.progress.jsonl")


def sample_responses(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    chats: Sequence[Sequence[Message]],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    max_prompt_tokens: int | None = None,
    engine: str = "fast",
) -> tuple[list[list[str]], int]:
    """``n`` sampled responses per chat (batched, left-padded, KV cache, stopping at EOS) and
    the number of tokens generated. Seed torch beforehand for reproducible samples. The sampling
    itself is the trainer's rollout generation (``engine``: its fast shared-prefix engine by default,
    or transformers' ``generate``), so reference pass rates and training rollouts come from the
    same code."""
    from .rollout import generate_rollouts

    rollouts = generate_rollouts(
        model,
        tokenizer,
        chats,
        range(len(chats)),
        n,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_p=top_p,
        batch_size=batch_size,
        max_prompt_tokens=max_prompt_tokens,
        bf16=False,
        engine=engine,
    )
    out: list[list[str]] = [[] for _ in chats]
    for k, text in enumerate(rollouts.texts):  # chat-major: n consecutive texts per chat
        out[k // n].append(text)
    return out, int(rollouts.completion_mask.sum().item())


def _chunk_seed(seed: int, chunk: int) -> int:
    return zlib.crc32(f"refeval/{seed}/{chunk}".encode())


def _read_progress(path: Path, fingerprint: dict[str, Any], n_rows: int) -> dict[int, tuple[float, int]]:
    """Row -> (successes, trials) recorded so far; a truncated last line is ignored."""
    done: dict[int, tuple[float, int]] = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines:
        return done
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError as exc:
        raise ConfigError(f"progress file {str(path)!r} has a corrupt header; rerun with --restart") from exc
    if header.get("config") != fingerprint or header.get("rows") != n_rows:
        raise ConfigError(
            f"progress file {str(path)!r} was written with different settings "
            f"({header.get('config')}, rows={header.get('rows')}) than now ({fingerprint}, rows={n_rows}); "
            "rerun with the same settings to resume, or with --restart to start over"
        )
    for line in lines[1:]:
        try:
            rec = json.loads(line)
            done[int(rec["row"])] = (float(rec["successes"]), int(rec["trials"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue  # torn write at the moment of interruption
    return done


def run_refeval(cfg: RefEvalConfig, *, progress: bool = True) -> RefEvalSummary:
    """Measure pass rates of ``cfg.model`` on ``cfg.pool`` and write them as ``cfg.column``."""
    import torch
    from tqdm.auto import tqdm

    from ..llm.models import load_model
    from .run_checkpoint import resolve_adapter

    # Everything that can be wrong with the request is found before the progress file is written:
    # a failed start must not leave a file whose fingerprint blocks the corrected rerun.
    cfg.validate()
    adapter = resolve_adapter(cfg.adapter) if cfg.adapter is not None else None
    started = time.monotonic()
    pool = TaskPool.load(cfg.pool)
    if cfg.column in pool.table.column_names and cfg.column not in pool.difficulty_columns:
        raise InvalidArgumentError(
            f"column: {cfg.column!r} is one of the pool's own columns, not a difficulty column; choose another name",
            "column",
        )
    out = cfg.out or cfg.pool
    n_target = min(len(pool), cfg.limit) if cfg.limit else len(pool)
    chunk_tasks = cfg.chunk_tasks or max(1, cfg.batch_size // cfg.rollouts)
    chunks = [list(range(s, min(s + chunk_tasks, n_target))) for s in range(0, n_target, chunk_tasks)]
    fingerprint = cfg.fingerprint() | {"chunk_tasks": chunk_tasks}

    ppath = progress_path_for(out, cfg.column)
    done: dict[int, tuple[float, int]] = {}
    fresh = not ppath.exists() or cfg.restart
    if not fresh:
        done = _read_progress(ppath, fingerprint, n_target)
    todo = [(c, rows) for c, rows in enumerate(chunks) if not all(r in done for r in rows)]
    resumed = sum(1 for r in done if r < n_target)
    # Loading the model checks the model, device and dtype (and is needed anyway when work is left).
    t_load = time.monotonic()
    loaded = load_model(cfg.model, device=cfg.device, dtype=cfg.dtype, seed=cfg.seed, adapter=adapter) if todo else None
    load_seconds = time.monotonic() - t_load
    if fresh:
        ppath.parent.mkdir(parents=True, exist_ok=True)
        with open(ppath, "w", encoding="utf-8") as f:
            f.write(json.dumps({"config": fingerprint, "rows": n_target, "pool": str(cfg.pool)}) + "\n")

    generated = 0
    evaluated = 0
    t_sampling = time.monotonic()
    if loaded is not None:
        model, tokenizer = loaded
        bar = tqdm(
            total=n_target,
            initial=n_target - sum(len(rows) for _, rows in todo),
            desc=f"refeval {cfg.column}",
            unit="task",
            disable=not progress,
        )
        with (
            RewardScorer(workers=cfg.workers, timeout=cfg.reward_timeout) as scorer,
            open(ppath, "a", encoding="utf-8") as log,
        ):
            # A chunk's rewards are scored in a background thread while the next chunk samples
            # (verifiers, code sandboxes above all, can take as long as generation); its progress
            # line is written once its scores are in, chunks in order, so resume is unchanged.
            def record(rows: list[int], scored: Future[list[Any]]) -> None:
                nonlocal evaluated
                rewards = np.array([r.reward for r in scored.result()]).reshape(len(rows), cfg.rollouts)
                for j, r in enumerate(rows):
                    done[r] = (float(rewards[j].sum()), cfg.rollouts)
                    log.write(
                        json.dumps(
                            {"row": r, "id": _jsonable(pool.ids[r]), "successes": done[r][0], "trials": cfg.rollouts}
                        )
                        + "\n"
                    )
                log.flush()
                os.fsync(log.fileno())
                evaluated += len(rows)
                bar.update(len(rows))

            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="refeval-score") as scoring:
                pending: tuple[list[int], Future[list[Any]]] | None = None
                for c, rows in todo:
                    torch.manual_seed(_chunk_seed(cfg.seed, c))
                    responses, n_tok = sample_responses(
                        model,
                        tokenizer,
                        pool.prompts(rows, system_prompt=cfg.system_prompt),
                        cfg.rollouts,
                        max_new_tokens=cfg.max_new_tokens,
                        temperature=cfg.temperature,
                        top_p=cfg.top_p,
                        batch_size=cfg.batch_size,
                        max_prompt_tokens=cfg.max_prompt_tokens,
                        engine=cfg.engine,
                    )
                    generated += n_tok
                    sources = pool.data_sources(rows)
                    truths = pool.ground_truths(rows)
                    infos = pool.extra_infos(rows)
                    items = [
                        RewardItem(str(sources[j]), resp, truths[j], infos[j])
                        for j in range(len(rows))
                        for resp in responses[j]
                    ]
                    scored = scoring.submit(scorer.score_batch, items)
                    if pending is not None:
                        record(*pending)
                    pending = (rows, scored)
                if pending is not None:
                    record(*pending)
        bar.close()
    sampling_seconds = time.monotonic() - t_sampling

    if cfg.column in pool.table.column_names:
        rates = pool.pass_rate(cfg.column).copy()  # rows outside --limit keep earlier values
    else:
        rates = np.full(len(pool), np.nan)
    for r, (s, t) in done.items():
        if r < n_target:
            rates[r] = s / t
    updated = pool.with_pass_rate(cfg.column, rates)
    if str(out).lower().endswith((".jsonl", ".json", ".ndjson")):
        updated.to_jsonl(out)
    else:
        updated.to_parquet(out)
    if not cfg.keep_progress:
        ppath.unlink(missing_ok=True)
    measured = rates[:n_target]
    return RefEvalSummary(
        column=cfg.column,
        out=str(out),
        tasks=n_target,
        evaluated_now=evaluated,
        resumed=resumed,
        mean_pass_rate=float(np.mean(measured)),
        share_zero=float(np.mean(measured == 0)),
        share_one=float(np.mean(measured == 1)),
        share_between=float(np.mean((measured > 0) & (measured < 1))),
        generated_tokens=generated,
        seconds=time.monotonic() - started,
        rates=measured,
        sampling_seconds=sampling_seconds,
        load_seconds=load_seconds,
        engine=cfg.engine,
    )


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value
