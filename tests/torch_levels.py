"""torch's CPU instruction sets on this host, for rerunning pinned results under each.

ATen dispatches its CPU kernels among instruction sets (``ATEN_CPU_CAPABILITY``: default, avx2,
avx512 on x86); MKL (matrix products) and oneDNN are held to the matching set, so that a run under
one set uses no wider kernels anywhere. A process started under a set runs as a CPU without the
wider ones would."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

#: The instruction sets ATen dispatches among on x86, lowest first.
ISA_LADDER = ("default", "avx2", "avx512")
MKL_ISA = {"default": "SSE4_2", "avx2": "AVX2", "avx512": "AVX512"}
ONEDNN_ISA = {"default": "SSE41", "avx2": "AVX2", "avx512": "AVX512_CORE"}
#: Set by a per-instruction-set run: the capability torch must report in that process.
EXPECT_ISA_ENV = "BOTS_PINNED_EXPECT_ISA"


@functools.cache
def native_isa() -> str:
    """torch's widest instruction set on this host (read in a clean process)."""
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS")}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip().lower()


def skip_reason(isa: str) -> str | None:
    """Why ``isa`` cannot run here (None: it can)."""
    native = native_isa()
    if native not in ISA_LADDER:
        return f"torch's instruction-set ladder here is {native!r}, not x86's {ISA_LADDER}"
    if ISA_LADDER.index(isa) > ISA_LADDER.index(native):
        return f"this CPU's widest kernels are {native}; {isa} cannot run here"
    return None


def isa_env(isa: str) -> dict[str, str]:
    return {
        **os.environ,
        "ATEN_CPU_CAPABILITY": isa,
        "MKL_ENABLE_INSTRUCTIONS": MKL_ISA[isa],
        "ONEDNN_MAX_CPU_ISA": ONEDNN_ISA[isa],
        EXPECT_ISA_ENV: isa,
    }


def check_expected() -> None:
    """In a per-instruction-set run, torch must really use the set it was asked for."""
    want = os.environ.get(EXPECT_ISA_ENV)
    if want:
        import torch

        assert torch.backends.cpu.get_cpu_capability().lower() == want
