"""The runs of a ``bots compare`` (a :class:`~.compare_plan.ComparePlan`): before any work the
existing directories are checked (:mod:`.compare_reuse`), then the pool, the shared warm-up and
the references are made once (:mod:`.compare_warmup`), then every method is trained once per
seed, seed-major, in this process or ``jobs`` worker processes side by side.

SIGTERM or SIGINT stops every run in progress at its next checkpoint (with several jobs the
signal is passed on to the workers) and starts no other; :func:`run_comparison` then returns the
runs it stopped (:class:`StoppedRun`), and the same plan with ``reuse`` continues them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .compare_plan import ComparePlan
from .compare_reuse import check_existing, finished
from .compare_warmup import build_pool, measure_references, shared_warmup, warmup_config
from .config import TrainConfig

__all__ = ["StoppedRun", "CompareRuns", "run_comparison", "warm_up_only", "check_run_logs", "train_all"]


@dataclass(frozen=True)
class StoppedRun:
    """A run that a signal stopped (``method`` None: the signal came before any run had started)."""

    method: str | None
    run_dir: Path | None
    steps_done: int
    signal: int


@dataclass(frozen=True)
class CompareRuns:
    """What :func:`run_comparison` did: ``cfg`` is the config the runs started from (after the
    shared warm-up, its ``model`` is OUT/warmup); ``stopped`` the runs a signal stopped (empty
    when every run finished)."""

    cfg: TrainConfig
    stopped: list[StoppedRun]


def warm_up_only(plan: ComparePlan) -> Path:
    """Only the supervised warm-up, into OUT/warmup (a model directory that ``bots refeval`` can
    measure as a strong reference); its directory."""
    cfg = plan.cfg
    if cfg.sft_steps < 1:
        raise ConfigError(f"--warmup-only: needs sft_steps >= 1, got {cfg.sft_steps}")
    dest = plan.out / "warmup"
    warm_cfg = warmup_config(cfg, plan.spec)
    check_existing(plan.out, [], (dest, warm_cfg), plan.reuse)
    plan.out.mkdir(parents=True, exist_ok=True)
    shared_warmup(warm_cfg, dest, plan.reuse)
    return dest


def check_run_logs(plan: ComparePlan) -> None:
    """Every run of ``plan`` has a run log to report (``--report-only``)."""
    missing = [
        str(plan.run_dir(m, s))
        for m in plan.methods
        for s in plan.run_seeds
        if not (plan.run_dir(m, s) / "metrics.jsonl").exists()
    ]
    if missing:
        raise ConfigError(
            f"--report-only: no run log (metrics.jsonl) in {', '.join(map(repr, missing))}; "
            "run without --report-only first"
        )


def _make_shared(plan: ComparePlan, cfg: TrainConfig) -> TrainConfig:
    """The pool, the shared warm-up and the references with their pass rates, in ``plan.out``;
    the config the runs start from (after a warm-up, its ``model`` is OUT/warmup)."""
    spec, out = plan.spec, plan.out
    out.mkdir(parents=True, exist_ok=True)
    if spec.pool is not None:
        build_pool(spec, out / "pool")
    if cfg.sft_steps > 0:
        warm_cfg = warmup_config(cfg, spec)
        cfg = shared_warmup(warm_cfg, out / "warmup", plan.reuse, spec.references, out / "references").replace(
            pool=cfg.pool
        )
    if spec.references is not None:
        measure_references(cfg, spec.references, out / "references")
    return cfg


def prepare_shared(plan: ComparePlan) -> Path:
    """Only what every run of ``plan`` shares (``--prepare-only``): the pool, the warm-up and the
    references with their measured pass rates, made (or, with ``plan.reuse``, kept) exactly as a
    full comparison makes them, so that a later run with ``--reuse`` starts from them. OUT."""
    cfg = plan.cfg
    warmup = (plan.out / "warmup", warmup_config(cfg, plan.spec)) if cfg.sft_steps > 0 else None
    check_existing(plan.out, [], warmup, plan.reuse, plan.spec)
    _make_shared(plan, cfg)
    return plan.out


def run_comparison(plan: ComparePlan) -> CompareRuns:
    """Train every method of ``plan`` once per seed (with ``plan.reuse``, finished runs are kept
    and interrupted ones resumed), after making the pool, warm-up and references they share."""
    cfg, spec, out = plan.cfg, plan.spec, plan.out
    warm_dest = out / "warmup"
    rl_cfg = cfg.replace(model=str(warm_dest), sft_steps=0) if cfg.sft_steps > 0 else cfg

    def run_cfg_of(m: str, seed: int | None) -> TrainConfig:
        c = rl_cfg.replace(method=m, out_dir=str(plan.run_dir(m, seed)), resume=plan.reuse)
        return c if seed is None else c.replace(seed=seed)

    # Seed-major: with several jobs, every method's first seeds finish before any later seed.
    runs = [(m, seed, run_cfg_of(m, seed)) for seed in plan.run_seeds for m in plan.methods]
    check_existing(
        out,
        [(plan.run_dir(m, s), c) for m, s, c in runs],
        (warm_dest, warmup_config(cfg, spec)) if cfg.sft_steps > 0 else None,
        plan.reuse,
        spec,
    )
    cfg = _make_shared(plan, cfg)
    todo = []
    for m, seed, run_cfg in runs:
        run_dir = plan.run_dir(m, seed)
        if plan.reuse and finished(run_dir, cfg.steps):
            print(f"bots compare: {m}: finished run in {run_dir}, reused")
            continue
        todo.append((m, run_dir, run_cfg))
    return CompareRuns(cfg, train_all(todo, plan.jobs, cfg.progress))


def _train_one(cfg: TrainConfig) -> tuple[int, int | None]:
    """One run in a worker process (module level: the pool pickles it by name): the steps done
    and the signal that stopped it early, if one did."""
    from .trainer import train

    result = train(cfg.replace(progress=False))
    return result.steps_done, result.signal if result.interrupted else None


def train_all(todo: list[tuple[str, Path, TrainConfig]], jobs: int, progress: bool) -> list[StoppedRun]:
    """Train every run of ``todo``: in this process one after another, or ``jobs`` worker
    processes side by side (each run with its own config's threads); the first failure stops the
    rest and is raised. A signal (SIGTERM, SIGINT) stops the runs in progress at their next
    checkpoint and starts no other; the runs it stopped are returned."""
    from .trainer import train

    if jobs == 1 or len(todo) <= 1:
        for m, run_dir, run_cfg in todo:
            print(f"bots compare: training with {m} -> {run_dir}")
            result = train(run_cfg)
            if result.interrupted and result.signal is not None:
                return [StoppedRun(m, run_dir, result.steps_done, result.signal)]
        return []
    import multiprocessing
    import os
    import signal
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from tqdm.auto import tqdm

    # A signal to this process alone (``kill PID``) reaches the workers too: each run in progress
    # checkpoints and returns, and runs not yet started are cancelled.
    signals: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        signals.append(signum)
        for child in multiprocessing.active_children():
            if child.pid is not None:
                os.kill(child.pid, signum)

    ctx = multiprocessing.get_context("spawn")  # no forked torch/thread state in the workers
    print(f"bots compare: {len(todo)} runs, {jobs} at a time")
    stopped: list[StoppedRun] = []
    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = {pool.submit(_train_one, run_cfg): (m, run_dir) for m, run_dir, run_cfg in todo}
            pending = set(futures)
            with tqdm(total=len(todo), desc="bots compare", unit="run", disable=not progress) as bar:
                while pending:
                    done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                    if signals:
                        for other in pending:
                            other.cancel()
                    for f in done:
                        m, run_dir = futures[f]
                        if f.cancelled():
                            continue
                        error = f.exception()
                        if error is not None:
                            if signals and isinstance(error, BrokenProcessPool):
                                continue  # a worker the signal reached before its trainer started
                            for other in pending:
                                other.cancel()
                            print(f"bots compare: {m} in {run_dir} failed")
                            raise error
                        steps_done, signum = f.result()
                        if signum is not None:
                            stopped.append(StoppedRun(m, run_dir, steps_done, signum))
                        bar.update(1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if signals and not stopped:
        stopped.append(StoppedRun(None, None, 0, signals[0]))
    return stopped
