"""BOTS in plain numpy, the way the paper's authors wrote it: a dense update of α, β over the
whole pool with the interpolation estimator, ``rng.beta`` over the whole pool,
and ``np.argpartition`` on |p̂ − p*| followed by a sort of the B best.

It is the baseline the Rust core is measured against, and an independent check of its update.
No attempt is made to be clever (in-place tricks, chunking): this is what a user would write.
"""

from __future__ import annotations

import numpy as np

from common import LAM, MOMENTUM, N_ROLLOUTS, RHO, TARGET


class NumpyBOTS:
    def __init__(
        self,
        weak: np.ndarray,
        strong: np.ndarray,
        *,
        lam: float = LAM,
        rho: float = RHO,
        n_rollouts: float = N_ROLLOUTS,
        target: float = TARGET,
        momentum: float = MOMENTUM,
        prior_alpha: float = 1.0,
        prior_beta: float = 1.0,
        seed: int = 0,
    ) -> None:
        # The references are the caller's arrays (no copy when already float64).
        self.weak = np.asarray(weak, dtype=np.float64)
        self.strong = np.asarray(strong, dtype=np.float64)
        n = len(self.weak)
        self.alpha = np.full(n, prior_alpha, dtype=np.float64)
        self.beta = np.full(n, prior_beta, dtype=np.float64)
        self.prior_alpha = prior_alpha
        self.prior_beta = prior_beta
        self.lam, self.rho, self.n_rollouts, self.target, self.momentum = lam, rho, n_rollouts, target, momentum
        self.capability: float | None = None
        self.rng = np.random.default_rng(seed)

    # ----------------------------------------------------------------------------- update
    def _observe(self, uids: np.ndarray, s: np.ndarray, t: np.ndarray) -> None:
        """Interpolation estimator on the distinct rolled-out tasks."""
        w, st = self.weak[uids], self.strong[uids]
        both = ~np.isnan(w) & ~np.isnan(st)
        if not both.any():
            return
        obs = float(np.mean(s[both] / t[both]))
        wm, sm = float(np.mean(w[both])), float(np.mean(st[both]))
        if abs(sm - wm) < 1e-6:
            return
        mu = (obs - wm) / (sm - wm)
        if self.capability is None:
            self.capability = mu
        else:
            self.capability = self.momentum * self.capability + (1.0 - self.momentum) * mu

    def update(self, task_ids: np.ndarray, successes: np.ndarray, trials: float | np.ndarray) -> None:
        ids = np.asarray(task_ids, dtype=np.int64)
        succ = np.asarray(successes, dtype=np.float64)
        tri = np.broadcast_to(np.asarray(trials, dtype=np.float64), ids.shape)
        uids, inv = np.unique(ids, return_inverse=True)
        s = np.bincount(inv, weights=succ, minlength=len(uids))
        t = np.bincount(inv, weights=tri, minlength=len(uids))
        self._observe(uids, s, t)

        a, b = self.alpha, self.beta
        a *= 1.0 - self.lam
        a += self.lam * self.prior_alpha
        b *= 1.0 - self.lam
        b += self.lam * self.prior_beta
        if self.capability is not None:
            mu = self.capability
            pred = np.clip(mu * self.strong + (1.0 - mu) * self.weak, 0.0, 1.0)
            pred[uids] = np.nan  # rolled-out tasks get their explicit evidence instead
            known = ~np.isnan(pred)
            w = self.rho * self.n_rollouts
            a += np.where(known, w * pred, 0.0)
            b += np.where(known, w * (1.0 - pred), 0.0)
        a[uids] += s
        b[uids] += t - s

    def flush(self) -> None:
        """Nothing is deferred here."""

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int) -> np.ndarray:
        p = self.rng.beta(self.alpha, self.beta)
        key = np.abs(p - self.target)
        k = min(batch_size, len(key))
        best = np.argpartition(key, k - 1)[:k] if k < len(key) else np.arange(len(key))
        # Best first, ties to the lower index.
        return best[np.lexsort((best, key[best]))].astype(np.int64)

    def state_bytes(self) -> int:
        return self.alpha.nbytes + self.beta.nbytes + self.weak.nbytes + self.strong.nbytes
