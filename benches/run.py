"""bots-rft benchmark: update / select / step of bots-rft against plain numpy and torch-CPU
implementations of the same algorithm, side by side in one run, with peak memory per task and
the memory-streaming floor. Writes bench.md, bench.json and bench.png.

Three parts, each job in its own process: ``step`` (worker.py: update / select / step against
numpy and torch), ``stages`` (stages.py: ns per task of each stage on one core, per SIMD path) and
``critical`` (critical_path.py: how long the trainer waits in select() after a pause, prefetch on
and off, and take(k) latency).

    python benches/run.py                       # full run (54,400 / 1M / 10M tasks), a few minutes
    python benches/run.py --quick               # smoke test: small pools, few repeats
    python benches/run.py --sizes 54400,1e6 --impls bots-rft,numpy --out /tmp/b
    python benches/run.py --parts stages,critical   # only the new tables (the report shows what ran)
    python benches/run.py --rerender --readme   # rewrite the reports and README's summary from bench.json
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
from report import readme_summary, replace_readme_summary, write_json, write_markdown, write_plot  # noqa: E402

FULL_SIZES = [54_400, 1_000_000, 10_000_000]
QUICK_SIZES = [5_000, 54_400]
# The per-stage table is about the large pools, where per-call overheads no longer matter.
FULL_STAGE_SIZES = [1_000_000, 10_000_000]
IMPLS = ["bots-rft", "numpy", "torch"]
PARTS = ["step", "stages", "critical"]
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
    return run_process(cmd, {"impl": impl, "num_tasks": n, "threads": threads}, args.job_timeout)


def run_process(
    cmd: list[str], ident: dict[str, Any], timeout: float, env_extra: dict[str, str] = WORKER_ENV
) -> dict[str, Any]:
    """Run one job's process (with ``env_extra`` in its environment); its last stdout line is its
    JSON result. On failure, ``ident`` with an ``error``."""
    env = {**os.environ, **env_extra}
    for attempt in range(2):
        try:
            proc = subprocess.run(
                cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=env, cwd=HERE, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            print(f"    job timed out after {timeout:.0f} s; skipped", flush=True)
            return {**ident, "error": f"timed out after {timeout:.0f} s"}
        if proc.returncode == 0:
            return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
        # The extension may be mid-rebuild by someone else: wait once and retry.
        print(
            f"    job failed (exit {proc.returncode}); {'retrying in 30 s' if attempt == 0 else 'giving up'}",
            flush=True,
        )
        if attempt == 0:
            time.sleep(30)
    return {**ident, "error": f"exited {proc.returncode}"}


def run_stages(n: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "stages.py"), f"--num-tasks={n}", "--threads=1",
           f"--simd-paths={args.stage_simd_paths}", f"--seed={args.seed}"]  # fmt: skip
    if args.quick:
        cmd += ["--warmup=1", "--min-repeats=3", "--max-repeats=5", "--budget=0.02"]
    else:
        cmd += [f"--warmup={1 if n >= 5_000_000 else 2}", "--min-repeats=7", "--max-repeats=100", "--budget=0.5"]
    # glibc's default allocator settings: the stages measure time, not RSS, and the worker
    # setting (every large array its own mapping) would add page faults to each draw's output.
    return run_process(cmd, {"kind": "stages", "num_tasks": n, "threads": 1}, args.job_timeout, env_extra={})


def run_critical(n: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE / "critical_path.py"), f"--num-tasks={n}", f"--threads={args.critical_threads}",
           f"--pause={args.pause}", f"--seed={args.seed}"]  # fmt: skip
    if args.quick:
        cmd += ["--warmup=1", "--repeats=3", "--take-draws=2"]
    else:
        cmd += ["--warmup=2", "--repeats=21", "--take-draws=6"]
    # The default allocator, as in a trainer's process: WORKER_ENV's settings exist for the step
    # table's RSS figures, which this job does not report (alternating the two made no measured
    # difference to its timings).
    return run_process(
        cmd,
        {"kind": "critical_path", "num_tasks": n, "threads": args.critical_threads},
        args.job_timeout,
        env_extra={},
    )


def simd_paths() -> dict[str, Any]:
    """The SIMD path the core chose on this CPU and every path it can run (the key
    ``simd_backend`` keeps the name benches/results/bench.json and report.py use)."""
    try:
        import core_calls

        return {"simd_backend": core_calls.simd_path(), "simd_available": core_calls.available_simd_paths()}
    except ImportError as exc:  # the extension is not built: the jobs will say so
        return {"simd_backend": f"unknown ({exc})", "simd_available": []}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small pools, few repeats (smoke test)")
    p.add_argument(
        "--sizes", type=parse_sizes, help="comma-separated pool sizes (default 54400,1e6,1e7; quick: 5000,54400)"
    )
    p.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    p.add_argument("--threads", default="1,2", help="thread counts for bots-rft and torch (numpy is single-threaded)")
    p.add_argument(
        "--torch-sampler",
        default="gamma",
        choices=["gamma", "beta"],
        help="torch Beta draws: _standard_gamma ratio (faster) or distributions.Beta().sample()",
    )
    p.add_argument("--budget", type=float, default=1.0, help="seconds of timed runs per operation beyond the minimum")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--job-timeout", type=float, default=240.0, help="seconds before one job is abandoned")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    p.add_argument(
        "--stage-sizes",
        type=parse_sizes,
        help="pool sizes of the per-stage table (default 1e6,1e7; quick or with --sizes: the step sizes)",
    )
    p.add_argument(
        "--stage-simd-paths",
        "--stage-backends",  # the old spelling, still accepted
        dest="stage_simd_paths",
        default="all",
        help="SIMD paths of the per-stage table: all, auto, or a list",
    )
    p.add_argument(
        "--critical-sizes", type=parse_sizes, help="pool sizes of the critical-path table (default: the step sizes)"
    )
    p.add_argument("--critical-threads", type=int, default=2, help="threads of the critical-path selectors")
    p.add_argument(
        "--pause", type=float, default=0.2, help="seconds between update() and select() in the critical-path table"
    )
    p.add_argument("--out", type=Path, default=HERE / "results", help="output folder")
    p.add_argument("--rerender", action="store_true", help="only rewrite bench.md and bench.png from OUT/bench.json")
    p.add_argument(
        "--readme",
        action="store_true",
        help="also rewrite the run summary in the repository's README.md (refused for --quick runs)",
    )
    args = p.parse_args(argv)
    if args.rerender:
        data = json.loads((args.out / "bench.json").read_text())
        extra = {k: data.get(k, []) for k in ("stages", "critical_path")}
        write_markdown(args.out / "bench.md", data["meta"], data["results"], **extra)
        write_plot(args.out / "bench.png", data["meta"], data["results"])
        print(f"rewrote {args.out / 'bench.md'} and bench.png from bench.json")
        return update_readme(args, data["meta"], data["results"], extra["critical_path"]) if args.readme else 0

    parts = [s.strip() for s in args.parts.split(",") if s.strip()]
    if set(parts) - set(PARTS):
        p.error(f"--parts: unknown {sorted(set(parts) - set(PARTS))}; choose from {PARTS}")
    if args.readme and args.quick:
        p.error("--readme: a --quick run is not representative; README keeps its numbers")
    sizes: list[int] = args.sizes or (QUICK_SIZES if args.quick else FULL_SIZES)
    stage_sizes: list[int] = args.stage_sizes or (sizes if args.quick or args.sizes else FULL_STAGE_SIZES)
    critical_sizes: list[int] = args.critical_sizes or sizes
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
        n: {t: copy_bandwidth(FUSED_STEP_BYTES_PER_TASK * n // 2, threads=t, runs=10) for t in thread_counts}
        for n in sizes
    }
    for t, bw in bw_dram.items():
        print(f"  {t} thread(s): {bw / 1e9:.1f} GB/s", flush=True)

    jobs = [
        (impl, n, t)
        for n in sizes
        for impl in impls
        for t in (thread_counts if impl != "numpy" else [1])
    ] if "step" in parts else []  # fmt: skip
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

    stages: list[dict[str, Any]] = []
    for i, n in enumerate(stage_sizes if "stages" in parts else [], 1):
        print(f"[stages {i}/{len(stage_sizes)}] N={n:>12,} threads=1, SIMD paths: {args.stage_simd_paths}", flush=True)
        stages.append(run_stages(n, args))
    critical: list[dict[str, Any]] = []
    for i, n in enumerate(critical_sizes if "critical" in parts else [], 1):
        print(f"[critical path {i}/{len(critical_sizes)}] N={n:>12,} threads={args.critical_threads}, "
              f"select {args.pause:g} s after update", flush=True)  # fmt: skip
        critical.append(run_critical(n, args))

    meta = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": core_count(),
        **simd_paths(),
        "parts": parts,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {d: version(d) for d in ("bots-rft", "numpy", "torch")},
        "params": {
            "batch": BATCH,
            "n_rollouts": N_ROLLOUTS,
            "lam": LAM,
            "rho": RHO,
            "evidence": "interpolation",
            "thompson": True,
            "torch_sampler": args.torch_sampler,
        },
        "quick": args.quick,
        "sizes": sizes if "step" in parts else [],
        "stage_sizes": stage_sizes if "stages" in parts else [],
        "critical_sizes": critical_sizes if "critical" in parts else [],
        "pause_s": args.pause,
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "wall_s": time.perf_counter() - started,
        "copy_bandwidth_bytes_per_s": {str(t): bw for t, bw in bw_dram.items()},
        "footprint_copy_bandwidth_bytes_per_s": {
            str(n): {str(t): bw for t, bw in v.items()} for n, v in bw_footprint.items()
        },
        "fused_step_bytes_per_task": FUSED_STEP_BYTES_PER_TASK,
    }
    write_json(args.out / "bench.json", meta, results, stages=stages, critical_path=critical)
    write_markdown(args.out / "bench.md", meta, results, stages=stages, critical_path=critical)
    plotted = write_plot(args.out / "bench.png", meta, results)
    print(
        f"wrote {args.out / 'bench.md'}, bench.json{', bench.png' if plotted else ''} in {meta['wall_s']:.0f} s "
        f"(load average {load_start[0]:.2f} -> {meta['load_avg_end'][0]:.2f})",
        flush=True,
    )
    failed = any("error" in r for r in [*results, *stages, *critical])
    if args.readme and not failed:
        return update_readme(args, meta, results, critical)
    return 1 if failed else 0


def update_readme(args: argparse.Namespace, meta: dict[str, Any], results: list[dict[str, Any]],
                  critical: list[dict[str, Any]]) -> int:  # fmt: skip
    """Replace the run summary between README.md's markers with this run's."""
    readme = HERE.parent / "README.md"
    if meta.get("quick") or "step" not in meta.get("parts", PARTS):
        print("--readme: the summary needs a full run with the step part; README keeps its numbers", file=sys.stderr)
        return 1
    try:
        replace_readme_summary(readme, readme_summary(meta, results, critical))
    except ValueError as exc:
        print(f"--readme: {exc}", file=sys.stderr)
        return 1
    print(f"rewrote the run summary in {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
