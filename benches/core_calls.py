"""The compiled core's kernels called one stage at a time, for the per-stage table.

This is the only module of the harness that calls ``bots_rft._core`` directly (everything else
goes through :class:`bots_rft.BOTS`), so a change of the binding's signatures is fixed here.

The four calls split one step of the selector into its parts:

- ``update_pass``: the O(N) posterior update of one batch with interpolation evidence
  (``Posterior.step`` with an ``UpdateSpec`` and no ``SelectSpec``: no selection);
- ``draw``: one Thompson draw per task (``thompson_draws``; it also writes the N float32 draws
  to a new array, which the fused selection never does);
- ``greedy_select``: top-B on the posterior means (no sampling);
- ``thompson_select``: draw and top-B fused, chunk by chunk, as ``select()`` runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from bots_rft import _core
from common import BATCH, LAM, N_ROLLOUTS, RHO, TARGET, Workload

SEED = 0


@dataclass
class StageState:
    """A posterior and one step's inputs, as the selector would hand them to the core."""

    posterior: _core.Posterior
    weak32: npt.NDArray[np.float32]
    strong32: npt.NDArray[np.float32]
    batch: _core.Batch
    capability: float

    @property
    def alpha(self) -> npt.NDArray[np.float64]:
        return self.posterior.alpha

    @property
    def beta(self) -> npt.NDArray[np.float64]:
        return self.posterior.beta

    @property
    def num_tasks(self) -> int:
        return len(self.posterior)


def make_state(wl: Workload) -> StageState:
    """A flat prior, the workload's references as float32, and one batch of B rolled-out tasks
    (the first B ids; which ones does not change the O(N) pass) with a mid-range capability."""
    n = wl.num_tasks
    ids = np.arange(min(BATCH, n), dtype=np.int64)
    succ = wl.successes(ids)
    batch = _core.aggregate(n, ids, succ, np.full(len(ids), float(N_ROLLOUTS)))
    return StageState(
        posterior=_core.Posterior(np.ones(n), np.ones(n)),
        # Frozen, as the selector's Interpolation keeps them: the pass shares them, no copy.
        weak32=_core.frozen(wl.weak.astype(np.float32)),
        strong32=_core.frozen(wl.strong.astype(np.float32)),
        batch=batch,
        capability=0.5,
    )


def update_pass(s: StageState, threads: int) -> None:
    spec = _core.UpdateSpec(s.batch, lam=LAM, rho=RHO, n_rollouts=float(N_ROLLOUTS), weak=s.weak32, strong=s.strong32,
                            capability=s.capability)  # fmt: skip
    s.posterior.step(spec, threads=threads)


def draw(s: StageState, counter: int, threads: int) -> npt.NDArray[np.float32]:
    return _core.thompson_draws(s.alpha, s.beta, SEED, counter, threads=threads)


def _select(s: StageState, k: int, thompson: bool, counter: int, threads: int) -> npt.NDArray[np.int64]:
    spec = _core.SelectSpec(k, target=TARGET, thompson=thompson, seed=SEED, counter=counter)
    return _core.select(s.alpha, s.beta, spec, threads=threads)[0]


def greedy_select(s: StageState, k: int, counter: int, threads: int) -> npt.NDArray[np.int64]:
    return _select(s, k, False, counter, threads)


def thompson_select(s: StageState, k: int, counter: int, threads: int) -> npt.NDArray[np.int64]:
    return _select(s, k, True, counter, threads)


def simd_path() -> str:
    """The SIMD path the kernels use now (automatic choice unless forced)."""
    return _core.simd_path()


def available_simd_paths() -> list[str]:
    return list(_core.available_simd_paths())


def set_simd_path(name: str | None) -> None:
    """Force a SIMD path by name; None restores the automatic choice."""
    _core.set_simd_path(name)
