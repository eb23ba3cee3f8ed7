"""Per-stage cost of one bots-rft step on ONE core, in ns per task, for each SIMD path: the
update pass, the Thompson draw, greedy top-B and the fused Thompson selection (draw + top-B).
One pool size per process (its own job, like worker.py). Prints one JSON line on stdout;
progress goes to stderr.

    python benches/stages.py --num-tasks 1000000
    python benches/stages.py --num-tasks 10000000 --simd-paths auto

The draw stage also checks every shape and writes the N float32 draws to a new array, which the
fused selection never does. The array's page faults are timed on their own (``output_faults``: a
new N-float32 numpy array, one write per 4 KiB page) and ``select_minus_draw`` is
``thompson_select - (draw - output_faults)``: an estimate of what top-B adds to the sampling
(small; it can come out negative, as the draw's shape checks stay in).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import core_calls
from common import BATCH, make_workload
from worker import measure

STAGES = ("update", "draw", "greedy_select", "thompson_select")
# One float32 per 4 KiB page: touching it faults the page in, as writing the draws does.
PAGE_FLOAT32 = 4096 // 4


def _timed(fn: Callable[[], object]) -> Callable[[], float]:
    def op() -> float:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    return op


def fault_in_output(n: int) -> None:
    out = np.empty(n, dtype=np.float32)
    out[::PAGE_FLOAT32] = 0.0


def stage_ops(state: core_calls.StageState, threads: int) -> dict[str, Callable[[], float]]:
    counter = iter(range(1, 1 << 62))  # every draw a fresh position of the random stream
    return {
        "update": _timed(lambda: core_calls.update_pass(state, threads)),
        "draw": _timed(lambda: core_calls.draw(state, next(counter), threads)),
        "greedy_select": _timed(lambda: core_calls.greedy_select(state, BATCH, next(counter), threads)),
        "thompson_select": _timed(lambda: core_calls.thompson_select(state, BATCH, next(counter), threads)),
        "output_faults": _timed(lambda: fault_in_output(state.num_tasks)),
    }


def simd_paths_to_run(choice: str) -> list[str]:
    """``auto``: the automatic choice only; ``all``: every path this CPU can run; else a list."""
    available = core_calls.available_simd_paths()
    if choice == "auto":
        return [core_calls.simd_path()]
    if choice == "all":
        return available
    names = [b.strip() for b in choice.split(",") if b.strip()]
    missing = [b for b in names if b not in available]
    if missing:
        raise SystemExit(f"--simd-paths: {missing} not available on this CPU (available: {available})")
    return names


def run(args: argparse.Namespace) -> dict[str, Any]:
    n = args.num_tasks
    auto = core_calls.simd_path()
    state = core_calls.make_state(make_workload(n, seed=args.seed))
    # A posterior a few steps in (every task with a reference has moved off the flat prior), so
    # the sampler sees the shapes it sees in training.
    for _ in range(3):
        core_calls.update_pass(state, args.threads)

    per_simd_path: dict[str, Any] = {}
    try:
        for name in simd_paths_to_run(args.simd_paths):
            core_calls.set_simd_path(name)
            med: dict[str, float] = {}
            runs: dict[str, int] = {}
            for stage, op in stage_ops(state, args.threads).items():
                times = measure(op, args.warmup, args.min_repeats, args.max_repeats, args.budget)
                med[stage] = statistics.median(times)
                runs[stage] = len(times)
            ns = {k: v / n * 1e9 for k, v in med.items()}
            ns["select_minus_draw"] = ns["thompson_select"] - (ns["draw"] - ns["output_faults"])
            per_simd_path[name] = {
                "median_ms": {k: v * 1e3 for k, v in med.items()},
                "ns_per_task": ns,
                "timed_runs": runs,
            }
            print(
                f"    {name:9s} " + "  ".join(f"{k} {v:.2f}" for k, v in ns.items()) + " ns/task",
                file=sys.stderr,
                flush=True,
            )
    finally:
        core_calls.set_simd_path(None)
    # The keys keep their first names ("auto_backend", "backends": SIMD paths), which
    # benches/results/bench.json and report.py read.
    return {"kind": "stages", "num_tasks": n, "threads": args.threads, "auto_backend": auto, "backends": per_simd_path}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-tasks", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--simd-paths",
        "--backends",  # the old spelling, still accepted
        dest="simd_paths",
        default="all",
        help="auto (the automatic choice), all, or a comma-separated list",
    )
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-repeats", type=int, default=7)
    p.add_argument("--max-repeats", type=int, default=100)
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed runs per stage (beyond min-repeats)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
