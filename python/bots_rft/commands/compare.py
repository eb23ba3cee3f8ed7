"""``bots compare``: train with two or more selection methods on the same pool, seed and budget,
then write the paper-style tables (TTB/BSF against Random on held-out accuracy, ETR, <1/>0
ratios, rollouts per step) and curves (held-out accuracy, ETR, reward against steps).

A supervised warm-up (``sft_steps``) runs once and every method starts from its weights.
Runs go to OUT/<method>/ (OUT: ``--out``, else the config's ``out_dir``, else runs/compare). A run
directory that already holds a run is refused unless ``--reuse``, which skips finished runs and
resumes interrupted ones, but only when they were trained with the same settings as now (the
differing keys are named otherwise). ``--report-only`` rebuilds OUT/summary.md and OUT/curves.png
from the logs. ``--warmup-only`` runs only the warm-up, into OUT/warmup (a model directory that
``bots refeval`` can measure as a strong reference).

SIGTERM or SIGINT stops every run in progress at its next checkpoint (with ``--jobs``, the signal
is passed on to the worker processes), starts no other run, writes no report and exits with 128 +
the signal's number (143, 130); the same command with ``--reuse`` continues.

Every report also writes OUT/held_out.csv (method, seed, step, rollouts spent, the sampled
held-out accuracy avg_at_<k> and the greedy one, one row per evaluation) and a table of the
primary metric: each run's mean held-out accuracy over its evaluations, paired by seed. With
``compare.references`` the rollouts that measuring the references cost are charged to the methods
that read them; with ``compare.decision`` the report ends with that rule's verdict.

``--seeds 0,1,2`` runs every method once per seed (the RL seed: selection, sampling, mini-batch
order; the warm-up is shared) into OUT/<method>/seed<k>/. The TTB/BSF table then uses each
method's mean curve, a seed table gives 95% intervals, a paired table each method's difference
from Random seed by seed, and the curves show 95% bands. ``--jobs N`` trains N runs side by side
(one process each).

A config's ``compare:`` section makes the comparison one command: the methods, seeds and jobs, a
procedural pool to build into OUT/pool, and weak/strong references (checkpoints of the warm-up)
to measure on it. ``--smoke`` runs the same pipeline at a tiny size (a check that it works, not a
result).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._args import check_input, check_output_dir, check_training_config


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "compare",
        help="train several selection methods and tabulate TTB/BSF/ETR",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", default=None, help="YAML or TOML training config")
    p.add_argument(
        "--methods", default=None, help="comma-separated (default: the config's compare.methods, else bots,random)"
    )
    p.add_argument("--model", default=None)
    p.add_argument("--out", default=None, help="output directory (default: the config's out_dir, else runs/compare)")
    p.add_argument("--seeds", default=None, help="comma-separated RL seeds, e.g. 0,1,2 (default: the config's seed)")
    p.add_argument(
        "--jobs", type=int, default=None, help="runs trained side by side (default: the config's compare.jobs, else 1)"
    )
    p.add_argument("--reuse", action="store_true", help="skip finished runs, resume interrupted ones")
    p.add_argument("--smoke", action="store_true", help="the whole pipeline at a tiny size, to check that it runs")
    p.add_argument("--report-only", action="store_true", help="only rebuild the report from OUT/<method>/")
    p.add_argument(
        "--warmup-only",
        action="store_true",
        help="only run the supervised warm-up (sft_steps > 0) into OUT/warmup and stop: a 'strong' "
        "reference model for bots refeval",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.set_defaults(func=main)


def _evidence_section(cfg: Any, groups: Any) -> str:
    """The implicit-evidence quality table, when the pool carries both reference columns (with a
    Random arm, also an estimator's that replays Random's uniform batches)."""
    if not (cfg.weak_column and cfg.strong_column):
        return ""
    from ..data import TaskPool
    from ..report.training import evidence_markdown

    pool = TaskPool.load(cfg.pool)
    weak, strong = pool.pass_rate(cfg.weak_column), pool.pass_rate(cfg.strong_column)
    table = evidence_markdown(groups, weak, strong, shadow="random" if "random" in groups else None)
    if table is None:
        return ""
    return (
        f"Implicit evidence ({cfg.weak_column} → {cfg.strong_column}), predicted before each batch "
        f"was rolled out:\n\n{table}\n\n"
    )


def _reading_references(methods: list[str], cfg: Any) -> list[str]:
    """The methods that see the reference pass rates (none without both columns)."""
    from ..selector.registry import method

    refs = bool(cfg.weak_column and cfg.strong_column)
    return [m for m in methods if refs and method(m).references != "unused"]


def _decision_rule(spec: Any, methods: list[str]) -> Any:
    """The ``compare.decision`` rule with canonical method names, every one among ``methods``."""
    from ..errors import ConfigError
    from ..report.trial import DecisionRule
    from ..selector.registry import method, method_names
    from ..train.comparison import SECTION

    if spec.decision is None:
        return None
    names = {}
    for key in ("method", "baseline", "control"):
        name = getattr(spec.decision, key)
        if name is None:
            continue
        canonical = method(name.lower()).name if name.lower() in method_names(aliases=True) else name
        if canonical not in methods:
            raise ConfigError(f"{SECTION}.decision.{key}: expected one of the compared methods {methods}, got {name!r}")
        names[key] = canonical
    return DecisionRule(**{**spec.decision.to_dict(), **names})


def _trial_section(cfg: Any, spec: Any, methods: list[str], groups: Any, rule: Any, smoke: bool) -> tuple[str, str]:
    """The primary-metric table (and the rule's outcome) for summary.md, and the outcome line
    printed last (empty without a rule)."""
    from ..data import TaskPool
    from ..errors import InvalidArgumentError
    from ..report.trial import decide, held_out_rows, reference_cost, trial_markdown

    reading = _reading_references(methods, cfg)
    cost = 0
    text = ""
    if spec.references is not None:
        tasks = len(TaskPool.load(cfg.pool))
        cost = reference_cost(spec.references, tasks)
        charged = f", charged to {', '.join(reading)}" if reading else ""
        text = f"references: 2 × {tasks} tasks × {spec.references.rollouts} samples = {cost:,} rollouts{charged}.\n\n"
    rows = held_out_rows(groups)
    caveat = "(smoke run, not a result) " if smoke else ""
    try:
        table = trial_markdown(rows, rule, reads_references=reading, reference_rollouts=cost, caveat=caveat)
        outcome = "" if rule is None else caveat + decide(rows, rule).line()
    except InvalidArgumentError as exc:  # runs on different evaluation schedules: no common metric
        return text + f"The primary metric is not computed: {exc}\n\n", ""
    return text + table + "\n\n", outcome


def _parse_seeds(text: str | None) -> list[int] | None:
    from ..errors import ConfigError

    if text is None:
        return None
    try:
        seeds = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds: expected distinct non-negative integers like 0,1,2, got {text!r}")
    return seeds


def _run_dir(out: Path, method: str, seed: int | None) -> Path:
    return out / method if seed is None else out / method / f"seed{seed}"


def _finished(run_dir: Path, steps: int) -> bool:
    from ..train.logger import read_metrics

    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return False
    return any(r.get("kind") == "eval" and r.get("step") == steps for r in read_metrics(path))


# Settings that do not change what a run computes (where it writes, how it reports, how many CPU
# threads or scoring processes it uses): a run that differs only in these may be reused.
# How a run is driven, not what it learns: never a reason to redo a run.
_REUSE_IGNORED = frozenset(
    {
        "out_dir",
        "resume",
        "overwrite",
        "extend_pool",
        "resume_params",
        "progress",
        "tensorboard",
        "save_every",
        "keep_checkpoints",
        "threads",
        "reward_workers",
        "reward_timeout",
        "verifier_error_stop",
    }
)
# What the shared supervised warm-up depends on.
_WARMUP_KEYS = (
    "model",
    "pool",
    "seed",
    "system_prompt",
    "dtype",
    "max_prompt_tokens",
    "grad_clip",
    "sft_steps",
    "sft_lr",
    "sft_batch_size",
    "sft_template",
)
WARMUP_RECORD = "bots_compare_warmup.json"
# How a pool built from the config's compare.pool was made (compared on --reuse).
POOL_RECORD = "bots_compare_pool.json"


def _differences(recorded: dict[str, Any], current: dict[str, Any], keys: Any) -> list[str]:
    """``key=then, now`` for every key whose value differs. A key the recorded config lacks was
    added to the trainer after that run started; it differs only when it is now set to something
    other than its default (a new key's default keeps what runs computed before it existed)."""
    from ..train.config import TrainConfig

    defaults = TrainConfig.defaults()
    out = []
    for k in keys:
        then = recorded[k] if k in recorded else defaults.get(k)
        if then != current.get(k):
            out.append(f"{k}={recorded.get(k)!r} then, {current.get(k)!r} now")
    return out


def _recorded_config(run_dir: Path) -> dict[str, Any] | None:
    """The config a run in ``run_dir`` was (last) started with, from its metrics.jsonl."""
    from ..train.logger import read_metrics

    path = run_dir / "metrics.jsonl"
    configs = [r["config"] for r in read_metrics(path) if r.get("kind") == "config"] if path.exists() else []
    return configs[-1] if configs and isinstance(configs[-1], dict) else None


def _check_existing(out: Path, runs: list[tuple[Path, Any]], warmup: Any, reuse: bool, spec: Any = None) -> None:
    """Before any work: every run directory (and the built pool and warm-up) that holds something
    is either refused (no --reuse) or was made with the same settings as it would be now."""
    import json

    from ..errors import ConfigError

    pool = out / "pool"
    if spec is not None and spec.pool is not None and pool.exists() and any(pool.iterdir()):
        if not reuse:
            raise ConfigError(
                f"--out: {str(pool)!r} already holds a pool; pass --reuse to use it, or choose another --out"
            )
        try:
            saved_pool = json.loads((pool / POOL_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            saved_pool = None
        if saved_pool != json.loads(json.dumps(spec.pool.to_dict())):
            raise ConfigError(
                f"--reuse: the pool in {str(pool)!r} was built from other settings ({saved_pool!r}); "
                "remove it or choose another --out"
            )

    if warmup is not None:
        dest, cfg = warmup
        record = dest / WARMUP_RECORD
        if dest.exists() and any(dest.iterdir()):
            if not reuse:
                raise ConfigError(
                    f"--out: {str(dest)!r} already holds a warm-up; pass --reuse to use it, or choose another --out"
                )
            try:
                saved = json.loads(record.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                saved = None
            if not isinstance(saved, dict):
                raise ConfigError(
                    f"--reuse: {str(dest)!r} has no readable {WARMUP_RECORD}; remove it or choose another --out"
                )
            diff = _differences(saved, cfg.to_dict(), _WARMUP_KEYS)
            refs = None if spec is None or spec.references is None else spec.references
            wanted = None if refs is None else _reference_record(refs, cfg.seed)
            if saved.get("references") != wanted:
                diff.append(f"references={saved.get('references')!r} then, {wanted!r} now")
            if diff:
                raise ConfigError(
                    f"--reuse: the warm-up in {str(dest)!r} was made with other settings ({'; '.join(diff)}); "
                    "remove it or choose another --out"
                )
    for run_dir, cfg in runs:
        if not (run_dir.exists() and any(run_dir.iterdir())):
            continue
        if not reuse:
            raise ConfigError(
                f"--out: {str(run_dir)!r} already holds a run; pass --reuse to reuse or resume it, "
                "or choose another --out"
            )
        recorded = _recorded_config(run_dir)
        if recorded is None:
            continue  # started but never got as far as its first record: resumed from nothing
        now = cfg.to_dict()
        diff = _differences(recorded, now, sorted((set(recorded) | set(now)) - _REUSE_IGNORED))
        if diff:
            raise ConfigError(
                f"--reuse: {str(run_dir)!r} was trained with other settings ({'; '.join(diff)}); "
                "remove it, choose another --out, or run with its settings"
            )


def _output_dir(args: argparse.Namespace, cfg: Any, override: str | None) -> Path:
    from ..errors import ConfigError
    from ..train.config import TrainConfig

    if args.out is not None and override is not None and Path(args.out) != Path(override):
        raise ConfigError(f"--out: {args.out!r} and out_dir={override!r} disagree; give one")
    chosen = args.out or override
    if chosen is None and cfg.out_dir != TrainConfig.defaults()["out_dir"]:
        chosen = cfg.out_dir  # set in the config file
    return Path(chosen or "runs/compare")


def _smoke(cfg: Any, spec: Any) -> tuple[Any, Any]:
    """The same pipeline at a size that runs in about a minute: a check that every stage works
    (pool, warm-up, references, every method, the report), not a result."""

    from ..train.comparison import ReferenceSpec

    cfg = cfg.replace(
        steps=min(cfg.steps, 2),
        batch_size=4,
        rollouts=4,
        mini_batch_size=4,
        sft_steps=min(cfg.sft_steps, 20),
        eval_every=0,
        eval_limit=min(cfg.eval_limit or 16, 16),
        eval_samples=min(cfg.eval_samples, 2),
        save_every=0,
    )
    if spec.pool is not None:
        spec = spec.replace(pool=spec.pool.replace(tasks=120, eval_tasks=16))
    if spec.references is not None and cfg.sft_steps > 0:
        spec = spec.replace(
            references=ReferenceSpec(
                weak_sft_steps=max(1, cfg.sft_steps // 2),
                strong_sft_steps=cfg.sft_steps * 2,
                rollouts=2,
                seed=spec.references.seed,
            )
        )
    if spec.seeds is not None:
        spec = spec.replace(seeds=spec.seeds[:2])
    return cfg, spec


def _information(methods: list[str], cfg: Any) -> str:
    """What each method saw besides its own rollouts (a comparison states it)."""
    seen = _reading_references(methods, cfg)
    blind = [m for m in methods if m not in seen]
    parts = []
    if seen:
        parts.append(f"{', '.join(seen)}: the reference pass rates ({cfg.weak_column}, {cfg.strong_column})")
    if blind:
        parts.append(f"{', '.join(blind)}: no reference pass rates, only their own rollouts")
    return "What each method saw besides its rollouts: " + "; ".join(parts) + "."


def main(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..report.training import (
        average_runs,
        budget_markdown,
        comparison_markdown,
        load_run,
        paired_markdown,
        plot_held_out,
        plot_runs,
        seeds_markdown,
        timing_markdown,
    )
    from ..report.trial import write_held_out_csv
    from ..selector.registry import METHODS, method, method_names
    from ..train.comparison import SECTION, read_compare_section
    from ..train.config import load_config, parse_overrides

    extra = parse_overrides(list(args.overrides))
    if args.model is not None:
        extra["model"] = args.model
    if args.no_progress:
        extra["progress"] = False
    if args.config is not None:
        check_input(args.config, "--config")
    override = extra.get("out_dir")
    spec = read_compare_section(args.config)
    if spec.pool is not None:
        if "pool" in _file_keys(args.config) or "pool" in extra:
            raise ConfigError(f"pool: {SECTION}.pool builds the training pool; give one of them")
        extra["pool"] = "OUT/pool/train.parquet"  # placed under the output directory below
    cfg = load_config(args.config, extra, skip_sections=(SECTION,))
    if spec.references is not None and cfg.sft_steps < 1:
        raise ConfigError(
            f"sft_steps: {SECTION}.references are checkpoints of the warm-up; needs sft_steps >= 1, got {cfg.sft_steps}"
        )
    if args.smoke:
        cfg, spec = _smoke(cfg, spec)
    methods_text = args.methods or (",".join(spec.methods) if spec.methods else "bots,random")
    methods = [m.strip().lower() for m in methods_text.split(",") if m.strip()]
    bad = [m for m in methods if m not in method_names(aliases=True)]
    if len(methods) < 2 or bad:
        raise ConfigError(f"--methods: expected two or more of {list(METHODS)}, got {methods_text!r}")
    methods = [method(m).name for m in methods]  # canonical names: run directories and labels
    rule = _decision_rule(spec, methods)
    seeds = _parse_seeds(args.seeds) if args.seeds is not None else (list(spec.seeds) if spec.seeds else None)
    jobs = spec.jobs if args.jobs is None else args.jobs
    if jobs < 1:
        raise ConfigError(f"--jobs: expected an integer >= 1, got {jobs}")
    run_seeds: list[int | None] = list(seeds) if seeds else [None]  # None: the config's seed, OUT/<method>/
    out = _output_dir(args, cfg, None if override is None else str(override))
    if spec.pool is not None:
        cfg = cfg.replace(pool=str(out / "pool" / "train.parquet"))
    if spec.references is not None:
        if cfg.weak_column or cfg.strong_column:
            raise ConfigError(f"weak_column: {SECTION}.references measures the reference columns; give one of them")
        cfg = cfg.replace(weak_column=spec.references.weak_column, strong_column=spec.references.strong_column)
    if args.warmup_only:
        if cfg.sft_steps < 1:
            raise ConfigError(f"--warmup-only: needs sft_steps >= 1, got {cfg.sft_steps}")
        if args.report_only:
            raise ConfigError("--warmup-only and --report-only: give one")
        dest = out / "warmup"
        _check_existing(out, [], (dest, cfg), args.reuse)
        out.mkdir(parents=True, exist_ok=True)
        _shared_warmup(cfg, dest, args.reuse)
        print(f"bots compare: warm-up in {dest}")
        return 0
    if args.report_only:
        missing = [
            str(_run_dir(out, m, s))
            for m in methods
            for s in run_seeds
            if not (_run_dir(out, m, s) / "metrics.jsonl").exists()
        ]
        if missing:
            raise ConfigError(
                f"--report-only: no run log (metrics.jsonl) in {', '.join(map(repr, missing))}; "
                "run without --report-only first"
            )
    else:
        check_output_dir(out, "--out", overwrite=True)  # existing runs are checked one by one below
        if spec.pool is None:
            check_training_config(cfg.replace(out_dir=str(out)))
        warm_dest = out / "warmup"
        rl_cfg = cfg.replace(model=str(warm_dest), sft_steps=0) if cfg.sft_steps > 0 else cfg

        def run_cfg_of(m: str, seed: int | None) -> Any:
            c = rl_cfg.replace(method=m, out_dir=str(_run_dir(out, m, seed)), resume=args.reuse)
            return c if seed is None else c.replace(seed=seed)

        # Seed-major: with several jobs, every method's first seeds finish before any later seed.
        plan = [(m, seed, run_cfg_of(m, seed)) for seed in run_seeds for m in methods]
        _check_existing(
            out,
            [(_run_dir(out, m, s), c) for m, s, c in plan],
            (warm_dest, cfg) if cfg.sft_steps > 0 else None,
            args.reuse,
            spec,
        )
        out.mkdir(parents=True, exist_ok=True)
        if spec.pool is not None:
            _build_pool(spec, out / "pool", args.reuse)
            check_training_config(cfg.replace(out_dir=str(out)))
        if cfg.sft_steps > 0:
            cfg = _shared_warmup(cfg, warm_dest, args.reuse, spec.references, out / "references")  # type: ignore[assignment]
        if spec.references is not None:
            _measure_references(cfg, spec.references, out / "references", args.reuse)
        todo = []
        for m, seed, run_cfg in plan:
            run_dir = _run_dir(out, m, seed)
            if args.reuse and _finished(run_dir, cfg.steps):
                print(f"bots compare: {m}: finished run in {run_dir}, reused")
                continue
            todo.append((m, run_dir, run_cfg))
        stopped = _train_all(todo, jobs, cfg.progress)
        if stopped:
            return _report_stop(stopped)
    groups = {m: [load_run(m, _run_dir(out, m, seed)) for seed in run_seeds] for m in methods}
    runs = [average_runs(m, g) for m, g in groups.items()]
    csv_path = write_held_out_csv(groups, out / "held_out.csv")
    trial_text, outcome = _trial_section(cfg, spec, methods, groups, rule, args.smoke)
    seed_text = f"seeds {', '.join(map(str, seeds))} (warm-up from seed {cfg.seed})" if seeds else f"seed {cfg.seed}"
    title = f"{Path(cfg.pool).parent.name or cfg.pool}, model {cfg.model}, B={cfg.batch_size}, n={cfg.rollouts}, {seed_text}"
    plot = plot_runs(groups, out / "curves.png", title)
    metric = f"mean of {cfg.eval_samples} samples at temperature {cfg.temperature:g}" if cfg.eval_samples else "greedy"
    held = plot_held_out(groups, out / "held_out.png", title, metric)
    over = bool(seeds and len(seeds) > 1)
    curve = "each method's mean held-out accuracy curve over seeds" if over else "the held-out accuracy curve"
    text = (
        f"# bots compare: {', '.join(methods)}\n\n{title}\n\n"
        f"Held-out accuracy: {metric}, on {cfg.eval_limit or 'every'} held-out task(s). "
        f"{_information(methods, cfg)}\n\n"
        f"TTB/BSF are on {curve}, against the first of: random, "
        "else the first method; per training step, and per rollout spent in the '(rollouts)' "
        "columns (dynamic sampling pays there for the groups it rolls out and drops).\n\n"
        f"{comparison_markdown(runs)}\n\n"
        + (f"Over seeds (mean ± 95% half-width):\n\n{seeds_markdown(groups)}\n\n" if over else "")
        + (
            "Paired by seed (each seed's run minus the baseline's run of the same seed; mean ± 95% "
            f"half-width, * where the interval excludes 0):\n\n{paired_markdown(groups)}\n\n"
            if over
            else ""
        )
        + f"The same rollout budget for every method (mean ± 95% half-width over seeds):\n\n{budget_markdown(groups)}\n\n"
        + f"Every held-out evaluation of every run: {csv_path.name}.\n\n"
        + trial_text
        + _evidence_section(cfg, groups)
        + f"Medians over steps:\n\n{timing_markdown(runs)}\n\n![held-out]({held.name})\n\n![curves]({plot.name})\n"
    )
    (out / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    if outcome:
        print(f"bots compare: outcome under the rule: {outcome}")
    return 0


@dataclass(frozen=True)
class _Stopped:
    """A run that a signal stopped (``method`` None: the signal came before any run had started)."""

    method: str | None
    run_dir: Path | None
    steps_done: int
    signal: int


def _report_stop(stopped: list[_Stopped]) -> int:
    """Says which runs a signal stopped and where they resume from; the exit status ``bots train``
    gives for the same signal (128 + its number)."""
    import sys

    from ..train.stops import exit_status_for_signal, signal_name

    first = stopped[0].signal
    for s in stopped:
        if s.run_dir is not None:
            print(f"bots compare: {s.method} in {s.run_dir}: checkpoint of step {s.steps_done}", file=sys.stderr)
    print(
        f"bots compare: stopped by {signal_name(first)}; no report written; run the same command with --reuse "
        "to resume the interrupted runs and train the rest",
        file=sys.stderr,
    )
    return exit_status_for_signal(first)


def _file_keys(path: str | None) -> set[str]:
    from ..config_files import read_mapping

    if path is None:
        return set()
    data = read_mapping(path)
    if set(data) == {"train"} and isinstance(data["train"], dict):
        data = data["train"]
    return set(data)


def _train_one(cfg: Any) -> tuple[int, int | None]:
    """One run in a worker process (module level: the pool pickles it by name): the steps done
    and the signal that stopped it early, if one did."""
    from ..train.trainer import train

    result = train(cfg.replace(progress=False))
    return result.steps_done, result.signal if result.interrupted else None


def _train_all(todo: list[tuple[str, Path, Any]], jobs: int, progress: bool) -> list[_Stopped]:
    """Train every run of ``todo``: in this process one after another, or ``jobs`` worker
    processes side by side (each run with its own config's threads); the first failure stops the
    rest and is raised. A signal (SIGTERM, SIGINT) stops the runs in progress at their next
    checkpoint and starts no other; the runs it stopped are returned."""
    from ..train.trainer import train

    if jobs == 1 or len(todo) <= 1:
        for m, run_dir, run_cfg in todo:
            print(f"bots compare: training with {m} -> {run_dir}")
            result = train(run_cfg)
            if result.interrupted and result.signal is not None:
                return [_Stopped(m, run_dir, result.steps_done, result.signal)]
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
    stopped: list[_Stopped] = []
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
                            stopped.append(_Stopped(m, run_dir, steps_done, signum))
                        bar.update(1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if signals and not stopped:
        stopped.append(_Stopped(None, None, 0, signals[0]))
    return stopped


def _build_pool(spec: Any, dest: Path, reuse: bool) -> None:
    """The ``compare.pool`` pool in ``dest`` (kept when it is there and was built from the same
    spec, which ``_check_existing`` has verified)."""
    import json

    from ..data.strings import build_string_pool

    if (dest / "train.parquet").exists() and (dest / POOL_RECORD).exists():
        return
    p = spec.pool
    build_string_pool(
        dest,
        tasks=p.tasks,
        eval_tasks=p.eval_tasks,
        seed=p.seed,
        min_length=p.min_length,
        max_length=p.max_length,
        ops=p.ops,
    )
    (dest / POOL_RECORD).write_text(json.dumps(p.to_dict(), indent=1), encoding="utf-8")
    print(f"bots compare: built a pool of {p.tasks} + {p.eval_tasks} held-out string tasks in {dest}")


def _measure_references(cfg: Any, refs: Any, models: Path, reuse: bool) -> None:
    """Both references' pass rates on every training task, sampled as training samples (the
    config's temperature, system prompt and token limit), into the pool's reference columns.
    Interrupted measurements resume from ``bots refeval``'s progress file."""
    import torch

    from ..data import TaskPool
    from ..train.refeval import RefEvalConfig, run_refeval

    if cfg.threads:
        torch.set_num_threads(cfg.threads)  # as the runs use; more threads than cores only spin
    have = set(TaskPool.load(cfg.pool).difficulty_columns)
    for column, steps in ((refs.weak_column, refs.weak_sft_steps), (refs.strong_column, refs.strong_sft_steps)):
        if column in have:
            continue
        summary = run_refeval(
            RefEvalConfig(
                model=str(models / f"sft{steps}"),
                pool=cfg.pool,
                column=column,
                rollouts=refs.rollouts,
                max_new_tokens=cfg.max_new_tokens,
                max_prompt_tokens=cfg.max_prompt_tokens,
                system_prompt=cfg.system_prompt,
                temperature=cfg.temperature,
                batch_size=cfg.generation_batch_size,
                engine=cfg.rollout_engine,
                seed=cfg.seed,
                device=None if cfg.device == "auto" else cfg.device,
                workers=0,
            ),
            progress=cfg.progress,
        )
        print("\n".join(f"bots compare: {line}" for line in summary.lines()))


def _reference_record(refs: Any, seed: int) -> list[int]:
    """What the reference checkpoints depend on besides the warm-up keys: their steps, and the
    stream's seed when it is not the policy's (a record without it is the policy's stream)."""
    steps = [refs.weak_sft_steps, refs.strong_sft_steps]
    return steps if refs.seed is None or refs.seed == seed else [*steps, refs.seed]


def _shared_warmup(cfg: object, dest: Path, reuse: bool, refs: Any = None, ref_dir: Path | None = None) -> object:
    """Run the supervised warm-up once; every method then starts from ``dest``. With ``refs``,
    the same warm-up stream also yields the reference models: its model after
    ``refs.weak_sft_steps`` and ``refs.strong_sft_steps`` steps, saved to ``ref_dir/sft<k>``."""
    import json

    import torch

    from ..data import TaskPool
    from ..train.config import TrainConfig
    from ..train.policy import load_policy
    from ..train.sft import sft_warmup

    assert isinstance(cfg, TrainConfig)
    # Per warm-up stream (by seed): step -> the directories the model after that step goes to (a
    # reference may be the policy's own starting point).
    streams: dict[int, dict[int, list[Path]]] = {cfg.seed: {cfg.sft_steps: [dest]}}
    if refs is not None and ref_dir is not None:
        ref_seed = cfg.seed if refs.seed is None else refs.seed
        for k in (refs.weak_sft_steps, refs.strong_sft_steps):
            streams.setdefault(ref_seed, {}).setdefault(k, []).append(ref_dir / f"sft{k}")
    every = [d for targets in streams.values() for dirs in targets.values() for d in dirs]
    ready = all((d / "config.json").exists() for d in every) and (dest / WARMUP_RECORD).exists()
    if not (reuse and ready):
        from ..llm.models import resolve_device

        device = resolve_device(None if cfg.device == "auto" else cfg.device)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        pool = TaskPool.load(cfg.pool)
        shown = []
        for seed, targets in streams.items():
            stream_cfg = cfg.replace(seed=seed)
            model, tok = load_policy(cfg.model, str(device), cfg.dtype, seed)

            def saver(where: list[Path], model: Any = model, tok: Any = tok) -> Any:
                def save() -> None:
                    for d in where:
                        model.save_pretrained(str(d))
                        tok.save_pretrained(str(d))

                return save

            # One stream to the last checkpoint asked for; the learning rate is constant, so the
            # model after k steps is what a warm-up of k steps gives.
            last = max(targets)
            losses = sft_warmup(
                model,
                tok,
                pool,
                pool.prompts(system_prompt=cfg.system_prompt),
                stream_cfg.replace(sft_steps=last).sft,
                device,
                snapshots={k: saver(d) for k, d in targets.items()},
            )
            label = "" if seed == cfg.seed else f" (reference stream, seed {seed})"
            shown.append(
                f"warm-up{label} loss {losses[0]:.3f} at step 1; "
                + ", ".join(f"{k}: {losses[k - 1]:.3f}" for k in sorted(targets))
            )
        # What --reuse compares before it uses this warm-up again.
        record = {k: v for k, v in cfg.to_dict().items() if k in _WARMUP_KEYS}
        record["references"] = None if refs is None else _reference_record(refs, cfg.seed)
        (dest / WARMUP_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        print(f"bots compare: {'; '.join(shown)}; saved to {', '.join(map(str, every))}")
    return cfg.replace(model=str(dest), sft_steps=0)
