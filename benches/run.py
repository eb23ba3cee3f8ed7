"""bots-rft benchmark: update / select / step of bots-rft against plain numpy and torch-CPU
implementations of the same algorithm, side by side in one run, with peak memory per task and
the memory-streaming floor. Writes bench.md, bench.json and bench.png.

    python benches/run.py                       # full run (54,400 / 1M / 10M tasks), a few minutes
    python benches/run.py --quick               # smoke test: small pools, few repeats
    python benches/run.py --sizes 54400,1e6 --impls bots-rft,numpy --out /tmp/b
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bandwidth import copy_bandwidth  # noqa: E402
from common import BATCH, FUSED_STEP_BYTES_PER_TASK, LAM, N_ROLLOUTS, RHO, core_count, cpu_model  # noqa: E402
from report import write_json, write_markdown, write_plot  # noqa: E402

FULL_SIZES = [54_400, 1_000_000, 10_000_000]
QUICK_SIZES = [5_000, 54_400]
IMPLS = ["bots-rft", "numpy", "torch"]
# Worker environment: a fixed glibc mmap threshold makes every large array its own mapping,
# returned to the OS when freed, so RSS measures live arrays rather than allocator slack.
WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


def parse_sizes(text: str) -> list[int]:
    """``54400,1e6,10_000_000`` -> [54400, 1000000, 10000000]."""
    out = []
    for part in text.split(","):
        part = part.strip().replace("_", "")
        if part:
            value = float(part)
            if value < 1 or value != int(value):
                raise argparse.ArgumentTypeError(f"--sizes: not a positive integer: {part!r}")
            out.append(int(value))
    return out


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def run_job(impl: str, n: int, threads: int, args: argparse.Namespace, big: bool) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(HERE / "worker.py"),
        f"--impl={impl}",
        f"--num-tasks={n}",
        f"--threads={threads}",
        f"--seed={args.seed}",
        f"--torch-sampler={args.torch_sampler}",
    ]
    if args.quick:
        cmd += ["--warmup=1", "--min-repeats=3", "--max-repeats=5", "--budget=0.05"]
    else:
        # One warm-up is enough at 10M (each run is long); ≥7 timed runs everywhere.
        cmd += [f"--warmup={1 if big else 2}", "--min-repeats=7", "--max-repeats=200", f"--budget={args.budget}"]
    env = {**os.environ, **WORKER_ENV}
    for attempt in range(2):
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=env, cwd=HERE,
                                  timeout=args.job_timeout)
        except subprocess.TimeoutExpired:
            print(f"    worker timed out after {args.job_timeout:.0f} s; skipped", flush=True)
            return {"impl": impl, "num_tasks": n, "threads": threads, "error": f"timed out after {args.job_timeout:.0f} s"}
        if proc.returncode == 0:
            return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
        # The extension may be mid-rebuild by someone else: wait once and retry.
        print(f"    worker failed (exit {proc.returncode}); {'retrying in 30 s' if attempt == 0 else 'giving up'}", flush=True)
        if attempt == 0:
            time.sleep(30)
    return {"impl": impl, "num_tasks": n, "threads": threads, "error": f"worker exited {proc.returncode}"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small pools, few repeats (smoke test)")
    p.add_argument("--sizes", type=parse_sizes, help="comma-separated pool sizes (default 54400,1e6,1e7; quick: 5000,54400)")
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--threads", default="1,2", help="thread counts for bots-rft and torch (numpy is single-threaded)")
    p.add_argument("--torch-sampler", default="gamma", choices=["gamma", "beta"],
                   help="torch Beta draws: _standard_gamma ratio (faster) or distributions.Beta().sample()")
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per operation beyond the minimum")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--job-timeout", type=float, default=240.0, help="seconds before one job is abandoned")
    p.add_argument("--out", type=Path, default=HERE / "results", help="output folder")
    p.add_argument("--rerender", action="store_true", help="only rewrite bench.md and bench.png from OUT/bench.json")
    args = p.parse_args(argv)
    if args.rerender:
        data = json.loads((args.out / "bench.json").read_text())
        write_markdown(args.out / "bench.md", data["meta"], data["results"])
        write_plot(args.out / "bench.png", data["meta"], data["results"])
        print(f"rewrote {args.out / 'bench.md'} and bench.png from bench.json")
        return 0

    sizes: list[int] = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    unknown = sorted(set(impls) - set(IMPLS))
    if unknown:
        p.error(f"--impls: unknown {unknown}; choose from {IMPLS}")
    thread_counts = sorted({int(t) for t in args.threads.split(",")})
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    load_start = os.getloadavg()

    print(f"copy bandwidth ({'256 MiB' if args.quick else '1 GiB'} float64, np.copyto, best of 10) ...", flush=True)
    big_copy = (256 << 20) if args.quick else (1 << 30)
    bw_dram = {t: copy_bandwidth(big_copy, threads=t, runs=10) for t in thread_counts}
    # Same copy with the step's own footprint (src + dst = 40 B × N): the floor when it fits in cache.
    bw_footprint = {
        n: {t: copy_bandwidth(FUSED_STEP_BYTES_PER_TASK * n // 2, threads=t, runs=10) for t in thread_counts} for n in sizes
    }
    for t, bw in bw_dram.items():
        print(f"  {t} thread(s): {bw / 1e9:.1f} GB/s", flush=True)

    jobs = [
        (impl, n, t)
        for n in sizes
        for impl in impls
        for t in (thread_counts if impl != "numpy" else [1])
    ]
    results = []
    for i, (impl, n, t) in enumerate(jobs, 1):
        print(f"[{i}/{len(jobs)}] {impl:8s} N={n:>12,} threads={t}", flush=True)
        t0 = time.perf_counter()
        r = run_job(impl, n, t, args, big=n >= 5_000_000)
        if "error" not in r:
            m = r["median_ms"]
            print(
                f"    -> update {m['update']:.3f} ms, select {m['select']:.3f} ms, step {m['step']:.3f} ms; "
                f"peak {r['peak_bytes_per_task']:.1f} B/task ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
        results.append(r)

    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": core_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {d: version(d) for d in ("bots-rft", "numpy", "torch")},
        "params": {"batch": BATCH, "n_rollouts": N_ROLLOUTS, "lam": LAM, "rho": RHO, "evidence": "interpolation",
                   "thompson": True, "torch_sampler": args.torch_sampler},
        "quick": args.quick,
        "sizes": sizes,
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "wall_s": time.perf_counter() - started,
        "copy_bandwidth_bytes_per_s": {str(t): bw for t, bw in bw_dram.items()},
        "footprint_copy_bandwidth_bytes_per_s": {str(n): {str(t): bw for t, bw in v.items()} for n, v in bw_footprint.items()},
        "fused_step_bytes_per_task": FUSED_STEP_BYTES_PER_TASK,
    }
    write_json(args.out / "bench.json", meta, results)
    write_markdown(args.out / "bench.md", meta, results)
    write_plot(args.out / "bench.png", meta, results)
    print(f"wrote {args.out / 'bench.md'}, bench.json, bench.png in {meta['wall_s']:.0f} s "
          f"(load average {load_start[0]:.2f} -> {meta['load_avg_end'][0]:.2f})", flush=True)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
