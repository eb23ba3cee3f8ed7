"""``bots scoreboard``: BOTS against every peer, fairly, in several regimes.

Runs the matrix of regimes (the paper's single-epoch pool, a MATH-sized pool over many epochs, a
DAPO-Math-sized pool, a drifting learner, noisy references, and three sensitivity settings of
the learner, one of them the learner before the fit to the real trainer: "linear-rule") x
information settings (paper: each method as published; shared: every method given the reference
pass rates it can use; none: none given them; charged: as published, with every method that read
the references charged the rollouts and generation time measuring them costs) x methods (Random,
BOTS, DAPO dynamic sampling at the generation batch each peer paper used, GRESO, SPEED-RL at its
yaml's and its scripts' generation batch, DPS, Knapsack-RL, Reinforce-Ada, AdaRFT) over several
seeds, and writes under --out: scoreboard.csv (regime, information, method, axis, metric, mean,
lo, hi, seeds), paired.csv (BOTS minus each peer, seed by seed, with 95% intervals and a
verdict), scoreboard.md (with where BOTS loses, computed from the run) and one heat map per
information setting (scoreboard_<information>.png; --no-plots skips them and runs without
matplotlib). Axes: per training step, per rollout spent and per modelled wall-clock. The
learner's fitted settings are in bots_rft.simulate.fitted.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ._args import check_output_dir, integer


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "scoreboard",
        help="BOTS against every peer in several regimes, information settings and axes (CSV, markdown, PNG)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", type=Path, required=True, help="output directory (created)")
    p.add_argument("--quick", action="store_true", help="small pools, 20 steps of 32, 3 seeds: a smoke run")
    p.add_argument("--seeds", type=integer(2), default=None, help="seeds 0..N-1, >= 2 (default 5; 3 with --quick)")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true", help="skip the heat maps (no matplotlib needed)")
    p.set_defaults(func=main, needs=("pydantic", "tqdm"))  # its config model; its bar object even when hidden


def main(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from ..report.scoreboard import write_scoreboard
    from ..simulate.scoreboard import count_runs, run_scoreboard, scoreboard_config

    config = scoreboard_config(quick=args.quick, seeds=args.seeds)
    check_output_dir(args.out, "--out", overwrite=args.overwrite)  # before the run, not after it
    cmd = shlex.join(
        ["bots", "scoreboard", "--out", str(args.out)]
        + (["--quick"] if args.quick else [])
        + (["--seeds", str(args.seeds)] if args.seeds is not None else [])
        + (["--no-plots"] if args.no_plots else [])
    )
    total = count_runs(config)
    print(
        f"bots scoreboard: {len(config.regimes)} regimes x {len(config.information)} information settings x "
        f"{len(config.entrants)} methods, {len(config.seeds)} seeds: {total} runs"
    )
    with tqdm(total=total, desc="scoreboard", unit="run", disable=args.no_progress, mininterval=0.5) as bar:

        def advance(description: str) -> None:
            bar.set_postfix_str(description, refresh=False)
            bar.update()

        result = run_scoreboard(config, on_run=advance)
    written = write_scoreboard(result, args.out, command=cmd, plots=not args.no_plots)
    print(f"{total} runs in {result.seconds:.1f} s; wrote {len(written)} files to {args.out}/")
    print(f"(summary: {args.out / 'scoreboard.md'})")
    return 0
