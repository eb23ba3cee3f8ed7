"""Shared pieces of the benchmark harness: the benchmark parameters, the synthetic workload,
the interface every implementation exposes, and process-memory probes."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

# The project's benchmark setting: B=256, n=16, λ=ρ=0.1, p*=0.5, interpolation evidence, Thompson.
BATCH = 256
N_ROLLOUTS = 16
LAM = 0.1
RHO = 0.1
TARGET = 0.5
MOMENTUM = 0.9
# Missing reference pass rates (NaN), per reference, independently.
MISSING = 0.05

# Bytes bots-rft's fused update+select pass must stream per task: read α, β (2×8), read the
# weak/strong references as float32 (2×4), write α, β (2×8).
FUSED_STEP_BYTES_PER_TASK = 40


class Selector(Protocol):
    """What the harness drives. ``update`` may defer its O(N) work until ``flush``/``select``."""

    @property
    def alpha(self) -> np.ndarray: ...

    @property
    def beta(self) -> np.ndarray: ...

    def update(self, task_ids: np.ndarray, successes: np.ndarray, trials: float) -> None: ...

    def flush(self) -> None: ...

    def select(self, batch_size: int) -> np.ndarray: ...

    def state_bytes(self) -> int: ...


@dataclass
class Workload:
    """Reference pass rates as a user holds them (float64, NaN = unknown, values representable
    in float32 so an implementation storing float32 sees the same numbers) and the hidden true
    success rate of each task, used to draw rollout outcomes."""

    weak: np.ndarray
    strong: np.ndarray
    true_rate: np.ndarray  # float32: only the simulation uses it
    rng: np.random.Generator

    @property
    def num_tasks(self) -> int:
        return len(self.weak)

    def successes(self, task_ids: np.ndarray) -> np.ndarray:
        """Successes ~ Binomial(n, p_k) for one batch (as float64, what trainers pass)."""
        return self.rng.binomial(N_ROLLOUTS, self.true_rate[task_ids]).astype(np.float64)


def make_workload(num_tasks: int, seed: int = 0) -> Workload:
    """GURU-like references: pass rates k/16 of a weak and a strong model around a latent task
    difficulty q ~ U(0, 1); the policy being trained sits between them (true rate q)."""
    rng = np.random.default_rng(seed)
    q = rng.random(num_tasks, dtype=np.float32)
    strong = rng.binomial(N_ROLLOUTS, np.sqrt(q)).astype(np.float32) / N_ROLLOUTS
    weak = rng.binomial(N_ROLLOUTS, q * q).astype(np.float32) / N_ROLLOUTS
    weak[rng.random(num_tasks, dtype=np.float32) < MISSING] = np.nan
    strong[rng.random(num_tasks, dtype=np.float32) < MISSING] = np.nan
    return Workload(
        weak=weak.astype(np.float64),
        strong=strong.astype(np.float64),
        true_rate=q,
        rng=np.random.default_rng(seed + 1),
    )


# ----------------------------------------------------------------------------- memory probes
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def rss_bytes() -> int:
    """Current resident set size."""
    return _status_kib("VmRSS") * 1024


def peak_rss_bytes() -> int:
    """Peak resident set size since start or since the last :func:`reset_peak_rss`."""
    return _status_kib("VmHWM") * 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0). False when not permitted; then the peak
    includes everything before, which only overstates memory."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


def llc_bytes() -> int:
    """Size of the last-level cache of CPU 0 (32 MiB when the system does not say)."""
    best = 0
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        best = max(best, int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size))
    return best or 32 << 20


# The cold-cache step sweeps this much memory first: twice the last-level cache, so that none of
# the pool is left in it, capped so that a VM reporting a huge shared cache does not spend a
# second per step on the sweep.
COLD_SWEEP_MAX_BYTES = 512 << 20


def cache_sweep_bytes() -> int:
    return min(2 * llc_bytes(), COLD_SWEEP_MAX_BYTES)


def core_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
