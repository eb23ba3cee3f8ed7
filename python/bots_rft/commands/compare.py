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

``--seeds 0,1,2`` runs every method once per seed (the RL seed: selection, sampling, mini-batch
order; the warm-up is shared) into OUT/<method>/seed<k>/. The TTB/BSF table then uses each
method's mean curve, a seed table gives 95% intervals, and the curves show 95% bands.
"""

from __future__ import annotations

import argparse
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
    p.add_argument("--methods", default="bots,random", help="comma-separated (default: %(default)s)")
    p.add_argument("--model", default=None)
    p.add_argument("--out", default=None, help="output directory (default: the config's out_dir, else runs/compare)")
    p.add_argument("--seeds", default=None, help="comma-separated RL seeds, e.g. 0,1,2 (default: the config's seed)")
    p.add_argument("--reuse", action="store_true", help="skip finished runs, resume interrupted ones")
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
    """The implicit-evidence quality table, when the pool carries both reference columns."""
    if not (cfg.weak_column and cfg.strong_column):
        return ""
    from ..data import TaskPool
    from ..report.training import evidence_markdown

    pool = TaskPool.load(cfg.pool)
    table = evidence_markdown(groups, pool.pass_rate(cfg.weak_column), pool.pass_rate(cfg.strong_column))
    if table is None:
        return ""
    return (
        f"Implicit evidence ({cfg.weak_column} → {cfg.strong_column}), predicted before each batch "
        f"was rolled out:\n\n{table}\n\n"
    )


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


def _differences(recorded: dict[str, Any], current: dict[str, Any], keys: Any) -> list[str]:
    """``key=then, now`` for every key whose value differs. A key the recorded config lacks was
    added to the trainer after that run started; it differs only when it is now set to something
    other than its default (a new key's default keeps what runs computed before it existed)."""
    from ..train.config import TrainConfig

    defaults = TrainConfig().to_dict()
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


def _check_existing(out: Path, runs: list[tuple[Path, Any]], warmup: Any, reuse: bool) -> None:
    """Before any work: every run directory that holds something is either refused (no --reuse)
    or was made with the same settings as its run would be now."""
    import json

    from ..errors import ConfigError

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
    if chosen is None and cfg.out_dir != TrainConfig.out_dir:
        chosen = cfg.out_dir  # set in the config file
    return Path(chosen or "runs/compare")


def main(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..methods import METHODS, method, method_names
    from ..report.training import (
        average_runs,
        budget_markdown,
        comparison_markdown,
        load_run,
        plot_runs,
        seeds_markdown,
        timing_markdown,
    )
    from ..train.config import load_config, parse_overrides

    methods = [m.strip().lower() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in method_names(aliases=True)]
    if len(methods) < 2 or bad:
        raise ConfigError(f"--methods: expected two or more of {list(METHODS)}, got {args.methods!r}")
    methods = [method(m).name for m in methods]  # canonical names: run directories and labels
    extra = parse_overrides(list(args.overrides))
    if args.model is not None:
        extra["model"] = args.model
    if args.no_progress:
        extra["progress"] = False
    if args.config is not None:
        check_input(args.config, "--config")
    override = extra.get("out_dir")
    cfg = load_config(args.config, extra)
    seeds = _parse_seeds(args.seeds)
    run_seeds: list[int | None] = list(seeds) if seeds else [None]  # None: the config's seed, OUT/<method>/
    out = _output_dir(args, cfg, None if override is None else str(override))
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
        check_training_config(cfg.replace(out_dir=str(out)))
        warm_dest = out / "warmup"
        rl_cfg = cfg.replace(model=str(warm_dest), sft_steps=0) if cfg.sft_steps > 0 else cfg

        def run_cfg_of(m: str, seed: int | None) -> Any:
            c = rl_cfg.replace(method=m, out_dir=str(_run_dir(out, m, seed)), resume=args.reuse)
            return c if seed is None else c.replace(seed=seed)

        plan = [(m, seed, run_cfg_of(m, seed)) for m in methods for seed in run_seeds]
        _check_existing(
            out,
            [(_run_dir(out, m, s), c) for m, s, c in plan],
            (warm_dest, cfg) if cfg.sft_steps > 0 else None,
            args.reuse,
        )
        out.mkdir(parents=True, exist_ok=True)
        if cfg.sft_steps > 0:
            cfg = _shared_warmup(cfg, warm_dest, args.reuse)  # type: ignore[assignment]
        from ..train.trainer import train

        for m, seed, run_cfg in plan:
            run_dir = _run_dir(out, m, seed)
            if args.reuse and _finished(run_dir, cfg.steps):
                print(f"bots compare: {m}: finished run in {run_dir}, reused")
                continue
            print(f"bots compare: training with {m} -> {run_dir}")
            train(run_cfg)
    groups = {m: [load_run(m, _run_dir(out, m, seed)) for seed in run_seeds] for m in methods}
    runs = [average_runs(m, g) for m, g in groups.items()]
    seed_text = f"seeds {', '.join(map(str, seeds))} (warm-up from seed {cfg.seed})" if seeds else f"seed {cfg.seed}"
    title = f"{Path(cfg.pool).parent.name or cfg.pool}, model {cfg.model}, B={cfg.batch_size}, n={cfg.rollouts}, {seed_text}"
    plot = plot_runs(groups, out / "curves.png", title)
    over = bool(seeds and len(seeds) > 1)
    curve = "each method's mean held-out accuracy curve over seeds" if over else "the held-out accuracy curve"
    text = (
        f"# bots compare: {', '.join(methods)}\n\n{title}\n\n"
        f"TTB/BSF are on {curve}, against the first of: random, "
        "else the first method; per training step, and per rollout spent in the '(rollouts)' "
        "columns (dynamic sampling pays there for the groups it rolls out and drops).\n\n"
        f"{comparison_markdown(runs)}\n\n"
        + (f"Over seeds (mean ± 95% half-width):\n\n{seeds_markdown(groups)}\n\n" if over else "")
        + f"The same rollout budget for every method (mean ± 95% half-width over seeds):\n\n{budget_markdown(groups)}\n\n"
        + _evidence_section(cfg, groups)
        + f"Medians over steps:\n\n{timing_markdown(runs)}\n\n![curves]({plot.name})\n"
    )
    (out / "summary.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


def _shared_warmup(cfg: object, dest: Path, reuse: bool) -> object:
    """Run the supervised warm-up once; every method then starts from ``dest``."""
    import json

    import torch

    from ..data import TaskPool
    from ..train.config import TrainConfig
    from ..train.model import load_policy
    from ..train.sft import sft_warmup

    assert isinstance(cfg, TrainConfig)
    if not (reuse and (dest / "config.json").exists() and (dest / WARMUP_RECORD).exists()):
        from ..llm.models import resolve_device

        device = resolve_device(None if cfg.device == "auto" else cfg.device)
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        model, tok = load_policy(cfg.model, str(device), cfg.dtype, cfg.seed)
        pool = TaskPool.load(cfg.pool)
        losses = sft_warmup(model, tok, pool, pool.prompts(system_prompt=cfg.system_prompt), cfg, device)
        model.save_pretrained(str(dest))
        tok.save_pretrained(str(dest))
        # What --reuse compares before it uses this warm-up again.
        record = {k: v for k, v in cfg.to_dict().items() if k in _WARMUP_KEYS}
        (dest / WARMUP_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
        print(f"bots compare: warm-up {cfg.sft_steps} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}, saved to {dest}")
    return cfg.replace(model=str(dest), sft_steps=0)
