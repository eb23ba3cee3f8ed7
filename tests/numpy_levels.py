"""numpy's SIMD dispatch levels on this host, for rerunning pinned results under each.

numpy picks its ufunc kernels (``exp``, ``power``, sums…) per CPU among the features it was built
to dispatch to (``__cpu_dispatch__``, e.g. X86_V3 = AVX2, X86_V4 = AVX-512); a process started
with ``NPY_DISABLE_CPU_FEATURES`` naming some of them runs the next lower ones, as a CPU without
them would. Each level here disables the host's highest dispatched features one more at a time,
down to the build's baseline, so a value that depends on one CPU's kernels fails on any host that
has them."""

from __future__ import annotations

import os
from typing import NamedTuple

try:
    from numpy._core import _multiarray_umath as _umath
except ImportError:  # numpy 1.x
    from numpy.core import _multiarray_umath as _umath  # type: ignore[no-redef]

#: Set in a per-level run: the dispatched features numpy must report as found in that process.
EXPECT_ENV = "BOTS_EXPECT_NUMPY_FEATURES"


class Level(NamedTuple):
    name: str  # the highest feature left on ("baseline" when none is)
    disable: str  # the value of NPY_DISABLE_CPU_FEATURES ("" for native)
    found: tuple[str, ...]  # the dispatched features left on


def found_features() -> tuple[str, ...]:
    """The dispatched features numpy uses in this process, lowest first."""
    return tuple(f for f in _umath.__cpu_dispatch__ if _umath.__cpu_features__.get(f))


def levels() -> list[Level]:
    """Native first, then one more of the highest features disabled at a time, to the baseline
    (none inside a per-level run, which reruns nothing itself)."""
    if EXPECT_ENV in os.environ:
        return []
    found = found_features()
    # What this process was already started without stays off in every level (a whole suite run
    # under NPY_DISABLE_CPU_FEATURES reruns the pins at that level and below, not above it).
    already = os.environ.get("NPY_DISABLE_CPU_FEATURES", "").split()
    out = []
    for keep in range(len(found), -1, -1):
        name = found[keep - 1] if keep else "baseline"
        disable = " ".join([*already, *found[keep:]])
        out.append(Level(name if keep < len(found) else f"native ({name})", disable, found[:keep]))
    return out


def level_env(level: Level) -> dict[str, str]:
    env = dict(os.environ)
    env["NPY_DISABLE_CPU_FEATURES"] = level.disable
    env[EXPECT_ENV] = ",".join(level.found)
    return env


def check_expected() -> None:
    """In a per-level run, numpy must really be on the level it was asked for."""
    want = os.environ.get(EXPECT_ENV)
    if want is not None:
        got = ",".join(found_features())
        assert got == want, f"numpy dispatches to {got!r}, expected {want!r}"
