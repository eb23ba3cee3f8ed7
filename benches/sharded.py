"""ShardedBOTS on this machine: step time and memory per task of a pool over k Ray actors (local
Ray), against one process's BOTS, with the same workload and seed (so the same picks).

    .venv/bin/python benches/sharded.py --tasks 100000000 --shards 4 --single \
        --out benches/results/sharded_1e8.json

Step = ``update(previous picks, Binomial(16, p) successes, 16)`` then ``select(256)``, the
benchmark setting of ``benches/common.py`` (interpolation evidence, Thompson sampling); one
warm-up step, then the median of ``--steps`` steps. Each shard actor runs the core on one thread;
the single ``BOTS`` on ``--threads`` threads with ``prefetch=False`` (it runs the update's pass
inside ``select``, as a shard does).

Memory per task: each shard actor's unique set size (USS, its private pages: α, β, the core's
scratch) above an idle actor's, plus the growth of the shared-memory object store (where the
shards' float32 references stay, read in place), divided by the pool size. The driver holds only
parameters and μ̃ (its RSS growth is reported too; the caller's Interpolation object is not
counted). The machine's load average before and after is recorded: other work on the machine
slows the timings.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BATCH, LAM, MOMENTUM, N_ROLLOUTS, RHO, TARGET, cpu_model, make_workload, rss_bytes  # noqa: E402

SEED = 7


def shm_used() -> int:
    """Bytes in use in /dev/shm, where Ray's object store keeps its objects on Linux."""
    usage = shutil.disk_usage("/dev/shm")
    return usage.used


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def actor_memory(sel: Any) -> list[dict[str, int]]:
    """RSS and USS of each shard's actor process."""
    import psutil  # type: ignore[import-untyped]
    import ray

    pids = ray.get([a.__ray_call__.remote(lambda _self: os.getpid()) for a in sel.actors])
    out = []
    for pid in pids:
        info = psutil.Process(pid).memory_full_info()
        out.append({"pid": pid, "rss": int(info.rss), "uss": int(info.uss)})
    return out


def run_steps(sel: Any, workload: Any, steps: int) -> dict[str, Any]:
    """Warm-up step, then ``steps`` timed steps; the picks of every step (for the identity check)."""
    workload.rng = np.random.default_rng(SEED + 1)  # the same successes for every selector
    picks = [sel.select(BATCH)]
    update_s, select_s = [], []
    for i in range(steps + 1):
        ids = picks[-1]
        successes = workload.successes(ids)
        t0 = time.perf_counter()
        sel.update(ids, successes, N_ROLLOUTS)
        t1 = time.perf_counter()
        picks.append(sel.select(BATCH))
        t2 = time.perf_counter()
        if i:  # the first step warms up
            update_s.append(t1 - t0)
            select_s.append(t2 - t1)
    step_s = [u + s for u, s in zip(update_s, select_s)]
    return {
        "step_ms_median": 1e3 * statistics.median(step_s),
        "update_ms_median": 1e3 * statistics.median(update_s),
        "select_ms_median": 1e3 * statistics.median(select_s),
        "step_ms": [round(1e3 * x, 2) for x in step_s],
        "picks": [p.tolist() for p in picks],
    }


def bench_sharded(
    n: int, shards: int, workload: Any, evidence: Any, steps: int, idle: dict[str, int]
) -> dict[str, Any]:
    from bots_rft.integrations.ray import ShardedBOTS

    shm0, rss0 = shm_used(), rss_bytes()
    t0 = time.perf_counter()
    sel = ShardedBOTS(
        n,
        shards=shards,
        lam=LAM,
        rho=RHO,
        target=TARGET,
        n_rollouts=N_ROLLOUTS,
        evidence=evidence,
        seed=SEED,
        threads=1,
        actor_options={"num_cpus": 0},
    )
    build_s = time.perf_counter() - t0
    timing = run_steps(sel, workload, steps)
    actors = actor_memory(sel)
    shm = shm_used() - shm0
    private = sum(a["uss"] - idle["uss"] for a in actors)
    result = {
        "kind": "sharded",
        "tasks": n,
        "shards": shards,
        "build_s": round(build_s, 2),
        **timing,
        "actors": actors,
        "actor_private_bytes": private,
        "object_store_bytes": shm,
        "driver_rss_growth_bytes": rss_bytes() - rss0,
        "bytes_per_task": (private + shm) / n,
        "actor_private_bytes_per_task": private / n,
        "object_store_bytes_per_task": shm / n,
    }
    del sel
    gc.collect()
    time.sleep(2)  # let Ray end the actors and free their objects
    return result


def bench_single(n: int, workload: Any, evidence: Any, steps: int, threads: int) -> dict[str, Any]:
    from bots_rft import BOTS

    rss0 = rss_bytes()
    sel = BOTS(
        n,
        lam=LAM,
        rho=RHO,
        target=TARGET,
        n_rollouts=N_ROLLOUTS,
        evidence=evidence,
        seed=SEED,
        threads=threads,
        prefetch=False,
    )
    timing = run_steps(sel, workload, steps)
    grown = rss_bytes() - rss0
    result = {
        "kind": "bots",
        "tasks": n,
        "threads": threads,
        **timing,
        "rss_growth_bytes": grown,
        "bytes_per_task": grown / n,
    }
    del sel
    gc.collect()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, nargs="+", default=[1_000_000])
    ap.add_argument("--shards", type=int, nargs="+", default=[4])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--single", action="store_true", help="also time one process's BOTS")
    ap.add_argument("--threads", type=int, default=2, help="threads of the single BOTS")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args()

    import ray

    from bots_rft import Interpolation, _core
    from bots_rft.integrations.ray import ShardedBOTS

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False)
    report: dict[str, Any] = {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "simd": _core.simd_path(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_average_before": load_average(),
        "setting": {"batch": BATCH, "n_rollouts": N_ROLLOUTS, "lam": LAM, "rho": RHO, "momentum": MOMENTUM},
        "steps": args.steps,
        "runs": [],
    }
    # An idle shard actor: the baseline its process costs without a pool.
    tiny = ShardedBOTS(1000, shards=1, threads=1, actor_options={"num_cpus": 0})
    tiny.select(8)
    idle = actor_memory(tiny)[0]
    report["idle_actor"] = idle
    del tiny
    for n in args.tasks:
        workload = make_workload(n, seed=SEED)
        evidence = Interpolation(workload.weak, workload.strong, MOMENTUM)
        workload.weak = workload.strong = np.empty(0)  # the estimator holds its float32 copies
        gc.collect()
        runs = []
        for k in args.shards:
            runs.append(bench_sharded(n, k, workload, evidence, args.steps, idle))
            print(json.dumps({x: runs[-1][x] for x in ("tasks", "shards", "step_ms_median", "bytes_per_task")}))
        if args.single:
            # The same estimator object: the sharded runs only read it (its μ̃ is still unset).
            runs.append(bench_single(n, workload, evidence, args.steps, args.threads))
            print(json.dumps({x: runs[-1][x] for x in ("tasks", "step_ms_median", "bytes_per_task")}))
        first = runs[0]["picks"]
        for run in runs:
            run["same_picks_as_first"] = run["picks"] == first
            del run["picks"]
        report["runs"].extend(runs)
        del workload, evidence
        gc.collect()
    report["load_average_after"] = load_average()
    report["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ray.shutdown()
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
