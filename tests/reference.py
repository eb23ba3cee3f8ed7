"""A plain numpy implementation of the method (update, interpolation estimator, selection), written independently of the core, that the
tests compare the core against."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RefInterpolation:
    weak: np.ndarray
    strong: np.ndarray
    momentum: float = 0.9
    capability: float | None = None

    def observe(self, ids: np.ndarray, S: np.ndarray, T: np.ndarray) -> None:
        u = np.unique(ids)
        both = ~np.isnan(self.weak[u]) & ~np.isnan(self.strong[u])
        if not both.any():
            return
        u = u[both]
        obs = np.mean(S[u] / T[u])
        w = np.mean(self.weak[u])
        s = np.mean(self.strong[u])
        if abs(s - w) < 1e-6:
            return
        mu = (obs - w) / (s - w)
        if self.capability is None:
            self.capability = mu
        else:
            self.capability = self.momentum * self.capability + (1 - self.momentum) * mu

    def predict(self) -> np.ndarray | None:
        if self.capability is None:
            return None
        mu = self.capability
        return np.clip(mu * self.strong + (1 - mu) * self.weak, 0, 1)


def reference_update(
    alpha: np.ndarray,
    beta: np.ndarray,
    alpha0: np.ndarray | float,
    beta0: np.ndarray | float,
    ids: np.ndarray,
    successes: np.ndarray,
    trials: np.ndarray | float,
    lam: float,
    rho: float,
    n: float,
    predicted: np.ndarray | None = None,
    interp: RefInterpolation | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    N = len(alpha)
    S = np.zeros(N)
    T = np.zeros(N)
    np.add.at(S, ids, successes)
    np.add.at(T, ids, np.broadcast_to(trials, np.shape(ids)))
    rolled = np.zeros(N, dtype=bool)
    rolled[ids] = True
    pred = predicted
    if pred is None and interp is not None:
        interp.observe(ids, S, T)
        pred = interp.predict()
    a = (1 - lam) * alpha + lam * np.broadcast_to(alpha0, (N,))
    b = (1 - lam) * beta + lam * np.broadcast_to(beta0, (N,))
    if pred is not None:
        m = ~rolled & ~np.isnan(pred)
        a[m] += rho * n * pred[m]
        b[m] += rho * n * (1 - pred[m])
    a[rolled] += S[rolled]
    b[rolled] += (T - S)[rolled]
    return a, b


def reference_greedy(
    alpha: np.ndarray, beta: np.ndarray, k: int, target: float, excluded: np.ndarray | None = None
) -> np.ndarray:
    key = np.abs(alpha / (alpha + beta) - target)
    order = np.argsort(key, kind="stable")
    if excluded is not None:
        order = order[~excluded[order]]
    return order[:k]
