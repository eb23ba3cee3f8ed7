"""What a run's numbers depend on besides its config: the machine and the library stack.

A training run's sampled tokens come from float arithmetic whose last bits depend on the CPU's
instruction set and on how torch, oneDNN, MKL and numpy were built, so a run reproduces bit for bit
on the same CPU and library stack and may drift elsewhere. Every run's first record (and every
resume's) holds :func:`machine_record`, so two runs that differ can be told apart by it.
"""

from __future__ import annotations

import os
import platform
import re
from importlib import metadata
from typing import Any

__all__ = ["machine_record", "machine_differences"]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _numpy_features() -> list[str]:
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features  # type: ignore[import-not-found]
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features  # type: ignore[no-redef]
    return sorted(
        k for k, on in features.items() if on and k.startswith(("AVX", "FMA", "SSE4", "X86_V", "ASIMD", "SVE"))
    )


def machine_record() -> dict[str, Any]:
    """The CPU (model, cores this process may use), the platform, the instruction sets torch and
    numpy dispatch to, the oneDNN and BLAS torch was built with, the bots core's SIMD path, and the
    versions of the libraries a run's arithmetic goes through."""
    import numpy as np
    import torch

    from .. import _core

    shown = torch.__config__.show()
    onednn = re.search(r"MKL-DNN v([0-9.]+)", shown)
    blas = re.search(r"BLAS_INFO=([A-Za-z0-9_]+)", shown)
    return {
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "onednn": onednn.group(1) if onednn else None,
        "torch_blas": blas.group(1) if blas else None,
        "cuda": torch.version.cuda if torch.cuda.is_available() else None,
        "numpy": np.__version__,
        "numpy_cpu_features": _numpy_features(),
        "numpy_cpu_dispatch_disabled": os.environ.get("NPY_DISABLE_CPU_FEATURES") or None,
        "bots_core_simd": _core.simd_path(),
        "bots_rft": _version("bots-rft"),
        "transformers": _version("transformers"),
        "safetensors": _version("safetensors"),
    }


def machine_differences(before: Any, now: dict[str, Any]) -> list[str]:
    """``key: before -> now`` for every entry of a run's recorded machine (``before``, from its
    first record; None or not a dict: a run recorded before machines were) that differs now."""
    if not isinstance(before, dict):
        return []
    return [
        f"{k}: {before.get(k)!r} -> {now.get(k)!r}"
        for k in sorted(set(before) | set(now))
        if before.get(k) != now.get(k)
    ]
