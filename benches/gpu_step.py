"""Step time of the torch backend on a GPU (``make bench-gpu``), against the GPU's memory floor.

One step is what a trainer calls per batch: ``update`` with the last batch's results (the
interpolation estimator's implicit evidence for every other task), then ``select(B)``. With the
Triton kernels the update's pass over the pool runs inside ``select`` (fused with the draw), so
the step time is what counts; the update and select columns only say where it is spent. For each
pool size the median step time is compared with the time the step's unavoidable memory traffic
takes at the device's measured copy bandwidth: α and β read and written once (float32) and the
two float32 references read once, 24 bytes per task. The ratio says how far the step is from that
floor.

    python benches/gpu_step.py                      # 10^6, 10^7, 10^8 tasks on cuda
    python benches/gpu_step.py --sizes 1e6 --device cpu --out /tmp/gpu_step  # a smoke run

Results: ``benches/results/gpu_step.{json,md}`` with the device's name. A run on a device other
than CUDA never writes there unless ``--out`` says so.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from bots_rft import Interpolation  # noqa: E402
from bots_rft.selector.backends.torch import TorchBOTS  # noqa: E402

#: Bytes per task a fused step cannot avoid (float32): α, β read and written, weak and strong read.
FLOOR_BYTES_PER_TASK = 4 * (2 + 2 + 2)
RESULTS = ROOT / "benches" / "results" / "gpu_step"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30, runs: int = 10) -> float:
    """Best observed bytes/s (read + write) of a device-to-device copy of ``nbytes``."""
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    best = 0.0
    for _ in range(runs + 1):
        sync(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = max(best, 2 * nbytes / (time.perf_counter() - t0))
    del src, dst
    return best


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads)"


def bench_size(
    n: int, device: torch.device, kernels: str, batch: int, steps: int, warmup: int, bandwidth: float
) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    weak = rng.uniform(0.0, 0.6, n)
    strong = np.clip(weak + rng.uniform(0.0, 0.4, n), 0.0, 1.0)
    sel = TorchBOTS(n, device=device, kernels=kernels, evidence=Interpolation(weak, strong), seed=1)
    del weak, strong
    ids = sel.select(batch)
    step_s, update_s, select_s = [], [], []
    for i in range(warmup + steps):
        successes = rng.integers(0, 9, batch)
        sync(device)
        t0 = time.perf_counter()
        sel.update(ids, successes, 8)
        sync(device)
        t1 = time.perf_counter()
        ids = sel.select(batch)  # returns host ids: waits for the device
        t2 = time.perf_counter()
        if i >= warmup:
            update_s.append(t1 - t0)
            select_s.append(t2 - t1)
            step_s.append(t2 - t0)
    floor_s = FLOOR_BYTES_PER_TASK * n / bandwidth
    median = statistics.median(step_s)
    out = {
        "num_tasks": n,
        "batch_size": batch,
        "kernels": sel.kernels,
        "steps": steps,
        "step_ms_median": 1e3 * median,
        "step_ms_p10": 1e3 * float(np.quantile(step_s, 0.1)),
        "step_ms_p90": 1e3 * float(np.quantile(step_s, 0.9)),
        "update_ms_median": 1e3 * statistics.median(update_s),
        "select_ms_median": 1e3 * statistics.median(select_s),
        "floor_bytes": FLOOR_BYTES_PER_TASK * n,
        "floor_ms": 1e3 * floor_s,
        "ratio_to_floor": median / floor_s,
    }
    del sel
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Torch backend step time on {report['device_name']}",
        "",
        f"torch {report['torch']}, triton {report['triton']}; copy bandwidth {report['bandwidth_gbs']:.0f} GB/s "
        f"(read + write, best of 10); floor = {FLOOR_BYTES_PER_TASK} bytes per task / bandwidth. "
        f"Step = update(B results, interpolation evidence) + select(B), B = {report['rows'][0]['batch_size']}, "
        f"median of {report['rows'][0]['steps']} steps.",
        "",
        "| tasks | kernels | step ms (median) | p10–p90 | update ms | select ms | floor ms | step / floor |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['num_tasks']:.0e} | {r['kernels']} | {r['step_ms_median']:.3f} | "
            f"{r['step_ms_p10']:.3f}–{r['step_ms_p90']:.3f} | {r['update_ms_median']:.3f} | "
            f"{r['select_ms_median']:.3f} | {r['floor_ms']:.3f} | {r['ratio_to_floor']:.1f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1e6,1e7,1e8", help="pool sizes, comma-separated")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--kernels", default="auto", choices=["auto", "triton", "torch"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help=f"output path without suffix (default {RESULTS})")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_step: no CUDA device (pass --device cpu --out PATH for a smoke run on CPU)")
    if device.type != "cuda" and args.out is None:
        sys.exit("gpu_step: results of a non-CUDA run are never written as GPU results; pass --out PATH")
    out = args.out or RESULTS
    # 1 GiB buffers on a GPU (far beyond its caches); a smoke run on CPU needs no more than 64 MiB.
    bandwidth = copy_bandwidth(device, nbytes=1 << 30 if device.type == "cuda" else 1 << 26)
    try:
        import triton  # type: ignore[import-untyped]

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    rows = []
    for size in args.sizes.split(","):
        n = int(float(size))
        row = bench_size(n, device, args.kernels, args.batch, args.steps, args.warmup, bandwidth)
        print(
            f"{n:.0e} tasks: step {row['step_ms_median']:.3f} ms (update {row['update_ms_median']:.3f}, "
            f"select {row['select_ms_median']:.3f}), floor {row['floor_ms']:.3f} ms, "
            f"{row['ratio_to_floor']:.1f}x",
            flush=True,
        )
        rows.append(row)
    report = {
        "device": str(device),
        "device_name": device_name(device),
        "torch": torch.__version__,
        "triton": triton_version,
        "bandwidth_gbs": bandwidth / 1e9,
        "floor_bytes_per_task": FLOOR_BYTES_PER_TASK,
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
