"""bots-rft behind the harness's :class:`common.Selector` interface (a thin pass-through)."""

from __future__ import annotations

from typing import Any

import numpy as np

from bots_rft import BOTS, Interpolation
from common import LAM, MOMENTUM, N_ROLLOUTS, RHO, TARGET


class BotsRft:
    def __init__(self, weak: np.ndarray, strong: np.ndarray, *, threads: int | None, seed: int = 0) -> None:
        self.sel = BOTS(
            len(weak),
            lam=LAM,
            rho=RHO,
            target=TARGET,
            n_rollouts=N_ROLLOUTS,
            thompson=True,
            evidence=Interpolation(weak, strong, momentum=MOMENTUM),
            seed=seed,
            threads=threads,
            # The step table times the pass where the caller waits for it: update(); flush() is the
            # update pass alone, select() the selection. With prefetch the background pass would
            # fold the next selection into the update; critical_path.py measures that mode.
            prefetch=False,
        )

    @property
    def alpha(self) -> np.ndarray:
        return self.sel.alpha

    @property
    def beta(self) -> np.ndarray:
        return self.sel.beta

    def update(self, task_ids: np.ndarray, successes: np.ndarray, trials: float | np.ndarray) -> None:
        self.sel.update(task_ids, successes, trials)

    def flush(self) -> None:
        self.sel.flush()

    def select(self, batch_size: int) -> np.ndarray:
        return self.sel.select(batch_size)

    def state_bytes(self) -> int:
        """Bytes of the arrays the selector exposes as its state (α, β, per-task priors, the
        estimator's references). Buffers the core keeps privately are not visible here; the
        peak-RSS column catches them."""
        arrays: list[Any] = [self.sel.alpha, self.sel.beta]
        ev = self.sel.evidence
        if isinstance(ev, Interpolation):
            # The references as stored (float32 when the core reads them so); `weak`/`strong`
            # return float64 copies.
            stored = getattr(ev, "references32", None)
            arrays += list(stored()) if callable(stored) else [ev.weak, ev.strong]
        for name in ("_prior_alpha", "_prior_beta"):
            p = getattr(self.sel, name, None)
            if isinstance(p, np.ndarray):
                arrays.append(p)
        return int(sum(np.asarray(a).nbytes for a in arrays))
