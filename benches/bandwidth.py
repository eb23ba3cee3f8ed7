"""Copy bandwidth of this machine, for the memory-streaming floor.

Bandwidth = bytes read + bytes written per second of ``np.copyto`` (numpy releases the GIL for
plain copies, so two Python threads copying halves use two cores). Best of several runs: the
floor is what the hardware can do, not what it did while something else was running.
"""

from __future__ import annotations

import threading
import time

import numpy as np


def copy_bandwidth(nbytes: int, threads: int = 1, runs: int = 5, min_seconds: float = 0.02) -> float:
    """Best observed bytes/s (read + write) copying an ``nbytes`` float64 buffer into another.
    Small buffers are copied many times per run so one run lasts at least ``min_seconds``."""
    n = max(threads * 1024, nbytes // 8)
    src = np.ones(n)
    dst = np.ones(n)  # touched, so page faults are not timed
    reps = max(1, int(min_seconds * 20e9 / (16 * n)))  # ~20 GB/s guess for the repeat count
    parts = [
        (dst[i * n // threads : (i + 1) * n // threads], src[i * n // threads : (i + 1) * n // threads])
        for i in range(threads)
    ]

    def work(d: np.ndarray, s: np.ndarray, barrier: threading.Barrier) -> None:
        barrier.wait()
        for _ in range(reps):
            np.copyto(d, s)

    best = 0.0
    for _ in range(runs + 1):  # the first run warms caches and the TLB; best-of ignores it anyway
        if threads == 1:
            t0 = time.perf_counter()
            for _ in range(reps):
                np.copyto(dst, src)
            dt = time.perf_counter() - t0
        else:
            barrier = threading.Barrier(threads + 1)
            pool = [threading.Thread(target=work, args=(d, s, barrier)) for d, s in parts]
            for t in pool:
                t.start()
            barrier.wait()
            t0 = time.perf_counter()
            for t in pool:
                t.join()
            dt = time.perf_counter() - t0
        best = max(best, 16.0 * n * reps / dt)
    return best
