"""``bots demo``: BOTS against uniform random selection on a large synthetic pool.

The pool has hidden per-task success rates that rise as "training" progresses, and two noisy
reference pass rates per task (a weak and a strong model, each measured from 16 rollouts).
Each step selects a batch, simulates n rollouts per selected task from the hidden rates, and
updates the selector. It reports the effective task ratio (share of selected tasks with
0 < successes < n) and the selector's median latencies.
"""

from __future__ import annotations

import argparse
import json
import textwrap
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ._args import check_output_file, integer


@dataclass
class DemoResult:
    method: str
    etr: float
    etr_last_half: float
    select_ms: float
    update_ms: float


class DriftingPool:
    """Hidden success rates p_k(t) = sigmoid(skill(t)·pace_k - difficulty_k), skill rising with t."""

    def __init__(self, num_tasks: int, steps: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.difficulty = rng.normal(1.5, 4.0, num_tasks)
        self.pace = rng.uniform(0.5, 1.5, num_tasks)  # tasks learn at different speeds
        self.steps = steps
        weak = _sigmoid(-1.0 - self.difficulty)
        strong = _sigmoid(2.5 - self.difficulty)
        # References are measured, not known: 16 rollouts each, like GURU's pass-rate columns.
        self.weak = rng.binomial(16, weak) / 16
        self.strong = rng.binomial(16, strong) / 16

    def rates(self, ids: np.ndarray, step: int) -> np.ndarray:
        skill = -0.5 + 2.5 * step / max(self.steps, 1)
        return _sigmoid(skill * self.pace[ids] - self.difficulty[ids])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def run_demo(
    num_tasks: int, steps: int, batch: int, rollouts: int, seed: int, progress: bool = True
) -> list[DemoResult]:
    from .. import BOTS, Interpolation
    from .._progress import progress_bar

    pool = DriftingPool(num_tasks, steps, seed)
    results = []
    for method in ("bots", "random"):
        sel = BOTS(num_tasks, evidence=Interpolation(pool.weak, pool.strong), n_rollouts=rollouts, seed=seed)
        choice_rng = np.random.default_rng(seed + 1)
        rollout_rng = np.random.default_rng(seed + 2)
        etr, t_sel, t_upd = [], [], []
        for step in progress_bar(range(steps), desc=f"{method:>6}", disable=not progress, unit="step"):
            t0 = time.perf_counter()
            if method == "bots":
                ids = sel.select(batch)
            else:
                ids = choice_rng.choice(num_tasks, size=batch, replace=False)
            t1 = time.perf_counter()
            successes = rollout_rng.binomial(rollouts, pool.rates(ids, step))
            t2 = time.perf_counter()
            if method == "bots":
                sel.update(ids, successes, rollouts)
            t3 = time.perf_counter()
            etr.append(np.mean((successes > 0) & (successes < rollouts)))
            t_sel.append(t1 - t0)
            t_upd.append(t3 - t2)
        results.append(
            DemoResult(
                method=method,
                etr=float(np.mean(etr)),
                etr_last_half=float(np.mean(etr[steps // 2 :])),
                select_ms=1e3 * float(np.median(t_sel)),
                update_ms=1e3 * float(np.median(t_upd)) if method == "bots" else 0.0,
            )
        )
    return results


def format_table(results: list[DemoResult]) -> str:
    lines = [
        "| method | ETR (mean) | ETR (last half) | select, median* | update call, median |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        upd = f"{r.update_ms:.3f} ms" if r.method == "bots" else "-"
        lines.append(f"| {r.method} | {r.etr:.3f} | {r.etr_last_half:.3f} | {r.select_ms:.3f} ms | {upd} |")
    lines.append("* select runs the pending update's pass (update only records the step)")
    return "\n".join(lines)


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "demo",
        help="BOTS vs random selection on a large synthetic pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tasks", type=integer(1), default=1_000_000, help="pool size (default 1,000,000)")
    p.add_argument("--steps", type=integer(1), default=100, help="(default 100)")
    p.add_argument("--batch", type=integer(1), default=256, help="tasks per step, at most --tasks (default 256)")
    # One rollout per task can never be effective (0 < successes < 1 is impossible).
    p.add_argument("--rollouts", type=integer(2), default=16, help="rollouts per task, >= 2 (default 16)")
    p.add_argument(
        "--seed", type=integer(0), default=0, help="seed of the pool, the picks and the rollouts (default 0)"
    )
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        help="also write the results as JSON here, and the closing comparison's full table beside it "
        "(same name, .comparison.md)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing --json files")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (runs on the core install)")
    p.add_argument(
        "--no-comparison",
        action="store_true",
        help="skip the closing comparison of every method on the simulated learner",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="print the closing comparison's full table (18 columns) instead of its 6 main ones",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from .. import _core
    from ..errors import InvalidArgumentError

    if args.batch > args.tasks:
        raise InvalidArgumentError(f"--batch: must be at most --tasks ({args.tasks}), got {args.batch}", "batch")
    if args.json:
        check_output_file(args.json, "--json", overwrite=args.overwrite)
        if not args.no_comparison:
            check_output_file(comparison_path(args.json), "--json", overwrite=args.overwrite)
    print(
        f"bots demo: {args.tasks:,} tasks, {args.steps} steps, batch {args.batch}, {args.rollouts} rollouts per task, "
        f"{_core.thread_count()} threads"
    )
    results = run_demo(args.tasks, args.steps, args.batch, args.rollouts, args.seed, progress=not args.no_progress)
    print()
    print(format_table(results))
    bots, rand = results
    print(
        f"\nBOTS kept {bots.etr:.1%} of its selected tasks effective (0 < successes < {args.rollouts}); random kept {rand.etr:.1%}."
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    if not args.no_comparison:
        from ..report.simulation import quick_comparison

        print("\nEvery method on a simulated learner whose skill grows with what it trains on")
        print("(ETR alone does not show learning; this does):\n")
        full = quick_comparison(seed=args.seed, progress=not args.no_progress)
        print(full if args.wide else narrow(full))
        if args.json:
            comparison_path(args.json).write_text(full)
    return 0


#: The comparison's columns ``bots demo`` prints by default: one of each kind, so the table fits
#: in 80 columns (the full one has 18).
NARROW = ("Method", "TTB 50% ↓", "BSF 100% ↑", "TTB 50% ↓ (rollouts)", "ETR ↑", "Final score")


def comparison_path(json_path: Path) -> Path:
    return json_path.with_suffix(".comparison.md")


def narrow(text: str) -> str:
    """The markdown tables in ``text`` cut to the :data:`NARROW` columns, with a line saying
    where the rest is."""
    out: list[str] = []
    keep: list[int] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            keep = None
            out.extend(textwrap.wrap(line, 80) or [""])
            continue
        cells = line.strip().strip("|").split("|")
        if keep is None:  # the header row
            names = [c.strip() for c in cells]
            keep = [i for i, name in enumerate(names) if name in NARROW]
        out.append("| " + " | ".join(cells[i].strip() for i in keep) + " |")
    note = (
        "TTB: steps to reach Random's best, as a fraction of Random's; BSF: the best score within Random's "
        "steps, divided by Random's; --wide prints all 18 columns (--json writes them)."
    )
    out.extend(["", *textwrap.wrap(note, 80)])
    return "\n".join(out)
