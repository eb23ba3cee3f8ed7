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
from typing import TYPE_CHECKING

from ._args import check_input, check_output_dir, check_training_config

if TYPE_CHECKING:
    from ..train.compare_plan import ComparePlan
    from ..train.compare_run import StoppedRun


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
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="only make what the runs share (the pool, the warm-up, the references and their measured pass "
        "rates) and stop: look at the references before the first run, e.g. to register a prediction",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    p.set_defaults(func=main, needs=("pydantic", "yaml", "pyarrow", "torch", "transformers", "matplotlib"))


def _parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2``: distinct non-negative integers."""
    from ..errors import ConfigError

    try:
        seeds = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds: expected distinct non-negative integers like 0,1,2, got {text!r}")
    return seeds


def config_from_args(args: argparse.Namespace) -> ComparePlan:
    """The comparison the arguments ask for (:class:`bots_rft.train.compare_plan.ComparePlan`),
    settled before any work."""
    from ..errors import ConfigError
    from ..train.compare_plan import plan_comparison
    from ..train.config import parse_overrides

    chosen = [
        f
        for f, on in (
            ("--warmup-only", args.warmup_only),
            ("--report-only", args.report_only),
            ("--prepare-only", args.prepare_only),
        )
        if on
    ]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)}: give one")
    extra = parse_overrides(list(args.overrides))
    if args.model is not None:
        extra["model"] = args.model
    if args.no_progress:
        extra["progress"] = False
    if args.config is not None:
        check_input(args.config, "--config")
    return plan_comparison(
        args.config,
        extra,
        methods=args.methods,
        seeds=None if args.seeds is None else _parse_seeds(args.seeds),
        jobs=args.jobs,
        out=args.out,
        reuse=args.reuse,
        smoke=args.smoke,
    )


def main(args: argparse.Namespace) -> int:
    from ..report.compare_summary import decision_rule, write_summary
    from ..train.compare_run import check_run_logs, prepare_shared, run_comparison, warm_up_only

    plan = config_from_args(args)
    rule = decision_rule(plan)
    cfg = plan.cfg
    if args.warmup_only:
        print(f"bots compare: warm-up in {warm_up_only(plan)}")
        return 0
    if args.prepare_only:
        check_output_dir(plan.out, "--out", overwrite=True)
        check_training_config(cfg.replace(out_dir=str(plan.out)))
        print(f"bots compare: prepared the runs' pool, warm-up and references in {prepare_shared(plan)}")
        return 0
    if args.report_only:
        check_run_logs(plan)
    else:
        check_output_dir(plan.out, "--out", overwrite=True)  # existing runs are checked one by one
        check_training_config(cfg.replace(out_dir=str(plan.out)))
        runs = run_comparison(plan)
        if runs.stopped:
            return _report_stop(runs.stopped)
        cfg = runs.cfg
    text, outcome = write_summary(plan, cfg, rule)
    print(text)
    if outcome:
        print(f"bots compare: outcome under the rule: {outcome}")
    return 0


def _report_stop(stopped: list[StoppedRun]) -> int:
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
