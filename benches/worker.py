"""One benchmark job (implementation × pool size × threads) in its own process, so its peak
memory is its own. Prints one JSON line on stdout; progress goes to stderr.

    python benches/worker.py --impl numpy --num-tasks 1000000 --threads 1
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from common import (
    BATCH,
    N_ROLLOUTS,
    Selector,
    cache_sweep_bytes,
    make_workload,
    peak_rss_bytes,
    reset_peak_rss,
    rss_bytes,
)


def build(impl: str, weak: np.ndarray, strong: np.ndarray, threads: int, seed: int, sampler: str) -> Selector:
    if impl == "bots-rft":
        from impl_bots import BotsRft

        return BotsRft(weak, strong, threads=threads, seed=seed)
    if impl == "numpy":
        from impl_numpy import NumpyBOTS

        return NumpyBOTS(weak, strong, seed=seed)
    if impl == "torch":
        import torch

        from impl_torch import TorchBOTS

        torch.set_num_threads(threads)
        return TorchBOTS(weak, strong, seed=seed, sampler="beta" if sampler == "beta" else "gamma")
    raise ValueError(f"impl: unknown implementation {impl!r}")


def measure(op: Callable[[], float], warmup: int, min_repeats: int, max_repeats: int, budget_s: float) -> list[float]:
    """Run ``op`` (which returns its own timed seconds) ``warmup`` times, then as many times as
    fit in ``budget_s`` (at least ``min_repeats``, at most ``max_repeats``); timed seconds."""
    last = 0.0
    for _ in range(warmup):
        last = op()
    repeats = min_repeats if last <= 0 else int(budget_s / last)
    repeats = max(min_repeats, min(max_repeats, repeats))
    gc.collect()
    gc.disable()  # a collection inside a timed region is noise, not the implementation's cost
    try:
        return [op() for _ in range(repeats)]
    finally:
        gc.enable()


# Statistics use the stdlib: the first np.median call imports modules worth ~8 MB of RSS, which
# would be charged to the implementation at small N.


def run(args: argparse.Namespace) -> dict[str, Any]:
    n = args.num_tasks
    # Warm up the implementation on a tiny pool first, so thread pools, lazy imports and
    # allocator arenas exist before the baseline and are not charged per task.
    tiny = make_workload(4096, seed=args.seed)
    sel = build(args.impl, tiny.weak, tiny.strong, args.threads, args.seed, args.torch_sampler)
    for _ in range(2):
        sel.update(sel.select(BATCH), tiny.successes(sel.select(BATCH)), N_ROLLOUTS)
    del sel, tiny

    wl = make_workload(n, seed=args.seed)
    # The memory the cold-cache step sweeps (resident before the baseline: it is the harness's,
    # not the implementation's).
    sweep = np.ones(cache_sweep_bytes() // 8)
    gc.collect()
    baseline = rss_bytes()  # imports + the user's own reference arrays
    peak_reset = reset_peak_rss()

    t0 = time.perf_counter()
    sel = build(args.impl, wl.weak, wl.strong, args.threads, args.seed, args.torch_sampler)
    init_s = time.perf_counter() - t0
    ids = sel.select(BATCH)
    # (a set, not np.unique: nothing numpy imports lazily may land after the baseline)
    if len(ids) != min(BATCH, n) or len(set(ids.tolist())) != len(ids):
        raise RuntimeError(f"{args.impl}: select returned {len(ids)} ids, {len(set(ids.tolist()))} distinct")

    def op_update() -> float:
        succ = wl.successes(ids)
        t = time.perf_counter()
        sel.update(ids, succ, N_ROLLOUTS)
        sel.flush()  # a deferred update does its O(N) pass here
        return time.perf_counter() - t

    def op_select() -> float:
        nonlocal ids
        t = time.perf_counter()
        ids = sel.select(BATCH)
        return time.perf_counter() - t

    def op_step() -> float:
        nonlocal ids
        succ = wl.successes(ids)
        t = time.perf_counter()
        sel.update(ids, succ, N_ROLLOUTS)
        ids = sel.select(BATCH)
        return time.perf_counter() - t

    def op_step_cold() -> float:
        """The step after a sweep over more memory than the last-level cache holds: what a
        trainer meets when its own work (forward and backward passes) runs between two steps."""
        nonlocal ids
        succ = wl.successes(ids)
        np.add(sweep, 1.0, out=sweep)
        t = time.perf_counter()
        sel.update(ids, succ, N_ROLLOUTS)
        ids = sel.select(BATCH)
        return time.perf_counter() - t

    times: dict[str, list[float]] = {}
    ops = (("update", op_update), ("select", op_select), ("step", op_step), ("step_cold", op_step_cold))
    for name, op in ops:
        # The sweep costs more than a small step: the cold step gets the minimum of timed runs.
        most = args.min_repeats if name == "step_cold" else args.max_repeats
        times[name] = measure(op, args.warmup, args.min_repeats, most, args.budget)
        print(
            f"    {name:6s} median {statistics.median(times[name]) * 1e3:10.3f} ms  ({len(times[name])} runs)",
            file=sys.stderr,
            flush=True,
        )

    peak = peak_rss_bytes()
    steady = rss_bytes()
    return {
        "impl": args.impl,
        "num_tasks": n,
        "threads": args.threads,
        "torch_sampler": args.torch_sampler if args.impl == "torch" else None,
        "init_ms": init_s * 1e3,
        "times_ms": {k: [x * 1e3 for x in v] for k, v in times.items()},
        "median_ms": {k: statistics.median(v) * 1e3 for k, v in times.items()},
        "min_ms": {k: min(v) * 1e3 for k, v in times.items()},
        "cold_sweep_bytes": sweep.nbytes,
        "state_bytes_per_task": sel.state_bytes() / n,
        "baseline_rss_bytes": baseline,
        "peak_rss_above_baseline_bytes": peak - baseline,
        "steady_rss_above_baseline_bytes": steady - baseline,
        "peak_bytes_per_task": (peak - baseline) / n,
        "steady_bytes_per_task": (steady - baseline) / n,
        "peak_reset": peak_reset,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--impl", required=True, choices=["bots-rft", "numpy", "torch"])
    p.add_argument("--num-tasks", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-repeats", type=int, default=7)
    p.add_argument("--max-repeats", type=int, default=200)
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per operation (beyond min-repeats)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-sampler", default="gamma", choices=["gamma", "beta"])
    args = p.parse_args(argv)
    print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
