"""What the trainer waits for: the time ``select()`` blocks when the trainer calls it a while
after ``update()`` (its optimiser step, ``--pause`` seconds), with the background pass
(``prefetch=True``) and without it (``prefetch=False``: update and select run when ``select`` is
called); the time ``update()`` takes on the caller's thread; ``update(); select()`` back to back
(a caller that does not pause) in both modes; and the latency of the streaming interface
``take(k)``. One pool size per process. Prints one JSON line on stdout; progress goes
to stderr.

    python benches/critical_path.py --num-tasks 1000000 --threads 2

Needs a selector with ``prefetch`` (and ``take`` for the streaming part); without them the job
reports itself skipped with the reason instead of failing.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import statistics
import sys
import time
from typing import Any

import numpy as np

from bots_rft import BOTS, Interpolation
from common import BATCH, LAM, MOMENTUM, N_ROLLOUTS, RHO, TARGET, make_workload

TAKE_SIZES = (1, 16)
TAKE_DRAW_SIZE = 256


def missing_api() -> str | None:
    """Why this job cannot run on the installed bots-rft, or None when it can."""
    if "prefetch" not in inspect.signature(BOTS).parameters:
        return "bots_rft.BOTS has no `prefetch` parameter (background update pass not in this build)"
    if not hasattr(BOTS, "take"):
        return "bots_rft.BOTS has no `take` method (streaming interface not in this build)"
    return None


def summary(ms: list[float]) -> dict[str, float]:
    """Median, 90th percentile and maximum of a list of milliseconds."""
    p90 = statistics.quantiles(ms, n=10, method="inclusive")[8] if len(ms) > 1 else ms[0]
    return {"median": statistics.median(ms), "p90": p90, "max": max(ms), "runs": len(ms)}


def make_selector(weak: np.ndarray, strong: np.ndarray, threads: int, prefetch: bool, seed: int, **extra: Any) -> BOTS:
    return BOTS(
        len(weak),
        lam=LAM,
        rho=RHO,
        target=TARGET,
        n_rollouts=N_ROLLOUTS,
        thompson=True,
        evidence=Interpolation(weak, strong, momentum=MOMENTUM),
        seed=seed,
        threads=threads,
        prefetch=prefetch,
        **extra,
    )


def select_wait(n: int, threads: int, prefetch: bool, args: argparse.Namespace) -> dict[str, Any]:
    """A trainer's loop: update(), its optimiser step (sleep), select(). Times update() and
    select() on the caller's thread. The workload is re-seeded per mode, so both modes see the
    same successes and must make the same selections (a digest of them is returned)."""
    wl = make_workload(n, seed=args.seed)
    sel = make_selector(wl.weak, wl.strong, threads, prefetch, args.seed)
    digest = hashlib.sha256()
    ids = sel.select(BATCH)
    digest.update(ids.tobytes())
    update_ms: list[float] = []
    wait_ms: list[float] = []
    wake_ms: list[float] = []
    x = np.zeros(BATCH)
    for step in range(args.warmup + args.repeats):
        succ = wl.successes(ids)
        t0 = time.perf_counter()
        sel.update(ids, succ, N_ROLLOUTS)
        t1 = time.perf_counter()
        time.sleep(args.pause)  # the trainer's optimiser step; the background pass runs now
        t2 = time.perf_counter()
        ids = sel.select(BATCH)
        t3 = time.perf_counter()
        digest.update(ids.tobytes())
        if prefetch:
            # The floor under the wait, in the same phase of the host: a trivial call (a
            # 256-element numpy add) right after a second pause of the same length.
            time.sleep(args.pause)
            t4 = time.perf_counter()
            np.add(x, 1.0, out=x)
            wake = (time.perf_counter() - t4) * 1e3
        if step >= args.warmup:
            update_ms.append((t1 - t0) * 1e3)
            wait_ms.append((t3 - t2) * 1e3)
            if prefetch:
                wake_ms.append(wake)
    out = {
        "update_ms": summary(update_ms),
        "select_wait_ms": summary(wait_ms),
        "selections_sha256": digest.hexdigest(),
    }
    if wake_ms:
        out["wake_ms"] = summary(wake_ms)
    return out


def back_to_back(n: int, threads: int, prefetch: bool, args: argparse.Namespace) -> dict[str, Any]:
    """A caller that does not pause: ``update(); select()`` timed together, step after step. With
    prefetch the update's pass starts in the background and ``select()`` waits for it at once; it
    must cost no more than running the pass in ``select()`` (prefetch off)."""
    wl = make_workload(n, seed=args.seed)
    sel = make_selector(wl.weak, wl.strong, threads, prefetch, args.seed)
    ids = sel.select(BATCH)
    digest = hashlib.sha256(ids.tobytes())
    ms: list[float] = []
    for step in range(args.warmup + args.repeats):
        succ = wl.successes(ids)
        t0 = time.perf_counter()
        sel.update(ids, succ, N_ROLLOUTS)
        ids = sel.select(BATCH)
        t1 = time.perf_counter()
        digest.update(ids.tobytes())
        if step >= args.warmup:
            ms.append((t1 - t0) * 1e3)
    return {"step_ms": summary(ms), "all_ms": ms, "selections_sha256": digest.hexdigest()}


def take_loop(n: int, threads: int, k: int, interval: float, args: argparse.Namespace) -> dict[str, Any]:
    """take(k) for ``--take-draws`` draws' worth of tasks, ``interval`` seconds apart; evidence
    goes back with one update() per ``--evidence-batch`` taken tasks, as an asynchronous trainer
    returns a group. Times take() and update()."""
    wl = make_workload(n, seed=args.seed)
    sel = make_selector(wl.weak, wl.strong, threads, True, args.seed)
    calls = max(args.warmup + 2, args.take_draws * TAKE_DRAW_SIZE // k)
    take_ms: list[float] = []
    update_ms: list[float] = []
    awaiting: list[np.ndarray] = []
    for i in range(calls):
        t0 = time.perf_counter()
        ids = sel.take(k, draw_size=TAKE_DRAW_SIZE)
        t1 = time.perf_counter()
        if i >= args.warmup:
            take_ms.append((t1 - t0) * 1e3)
        awaiting.append(ids)
        if sum(len(a) for a in awaiting) >= args.evidence_batch:
            done = np.concatenate(awaiting)
            awaiting.clear()
            succ = wl.successes(done)
            t2 = time.perf_counter()
            sel.update(done, succ, N_ROLLOUTS)
            update_ms.append((time.perf_counter() - t2) * 1e3)
        if interval > 0:
            time.sleep(interval)
    return {"take_ms": summary(take_ms), "update_ms": summary(update_ms) if update_ms else None}


def take_latency(n: int, threads: int, k: int, args: argparse.Namespace) -> dict[str, Any]:
    """take(k) paced like the batch loop (B tasks per ``--pause``: k/B × pause between calls, a
    rollout worker's turn), and back to back (no pause: the calls' own cost, with caches warm)."""
    interval = args.pause * k / BATCH
    paced = take_loop(n, threads, k, interval, args)
    hot = take_loop(n, threads, k, 0.0, args)
    return {"k": k, "draw_size": TAKE_DRAW_SIZE, "interval_s": interval, "evidence_batch": args.evidence_batch,
            **paced, "back_to_back_take_ms": hot["take_ms"]}  # fmt: skip


def run(args: argparse.Namespace) -> dict[str, Any]:
    n, threads = args.num_tasks, args.threads
    out: dict[str, Any] = {"kind": "critical_path", "num_tasks": n, "threads": threads, "pause_s": args.pause}
    reason = missing_api()
    if reason is not None:
        out["skipped"] = reason
        print(f"    skipped: {reason}", file=sys.stderr, flush=True)
        return out
    modes: dict[str, Any] = {}
    for name, prefetch in (("prefetch", True), ("sync", False)):
        modes[name] = r = select_wait(n, threads, prefetch, args)
        print(
            f"    {name:8s} select waits median {r['select_wait_ms']['median']:.4f} ms, p90 {r['select_wait_ms']['p90']:.4f} ms; "
            f"update {r['update_ms']['median']:.4f} ms",
            file=sys.stderr,
            flush=True,
        )
    out["modes"] = modes
    # The two modes alternate, twice, so that a change in the machine's load shows in both.
    b2b: dict[str, list[dict[str, Any]]] = {"prefetch": [], "sync": []}
    for _ in range(2):
        for name, prefetch in (("prefetch", True), ("sync", False)):
            b2b[name].append(back_to_back(n, threads, prefetch, args))
    for name, runs in b2b.items():
        merged = [x for r in runs for x in r["all_ms"]] if all("all_ms" in r for r in runs) else None
        modes[name]["back_to_back"] = {
            "step_ms": summary(merged) if merged else runs[-1]["step_ms"],
            "selections_sha256": runs[0]["selections_sha256"],
        }
        print(f"    {name:8s} update(); select() back to back: median {modes[name]['back_to_back']['step_ms']['median']:.4f} ms",
              file=sys.stderr, flush=True)  # fmt: skip
    out["identical_back_to_back"] = len({r["selections_sha256"] for runs in b2b.values() for r in runs}) == 1
    out["wake_ms"] = modes["prefetch"]["wake_ms"]
    print(
        f"    a trivial call after the same pause: median {out['wake_ms']['median']:.4f} ms",
        file=sys.stderr,
        flush=True,
    )
    out["identical_selections"] = modes["prefetch"]["selections_sha256"] == modes["sync"]["selections_sha256"]
    out["take"] = []
    for k in TAKE_SIZES:
        r = take_latency(n, threads, k, args)
        out["take"].append(r)
        print(f"    take({k:2d}) median {r['take_ms']['median']:.4f} ms, p90 {r['take_ms']['p90']:.4f} ms; "
              f"back to back {r['back_to_back_take_ms']['median']:.4f} ms", file=sys.stderr, flush=True)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--num-tasks", type=int, required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--pause", type=float, default=0.2, help="seconds between update() and select() (the optimiser step)"
    )
    p.add_argument("--warmup", type=int, default=2, help="untimed steps (and takes) first")
    p.add_argument("--repeats", type=int, default=21, help="timed update/pause/select steps per mode")
    p.add_argument("--take-draws", type=int, default=6, help="draws' worth of tasks each take(k) run hands out")
    p.add_argument(
        "--evidence-batch", type=int, default=BATCH, help="taken tasks whose results go back in one update()"
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(json.dumps(run(args)), flush=True)


if __name__ == "__main__":
    main()
