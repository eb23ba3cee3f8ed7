"""BOTS on torch CPU tensors (float64): the same dense update as :mod:`impl_numpy`, Beta draws
over the whole pool, and ``torch.topk`` for the B best. Thread count is torch's global setting
(``torch.set_num_threads``), chosen by the caller.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from common import LAM, MOMENTUM, N_ROLLOUTS, RHO, TARGET

Sampler = Literal["gamma", "beta"]


class TorchBOTS:
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
        sampler: Sampler = "gamma",
    ) -> None:
        # Zero-copy views of the caller's float64 references.
        self.weak = torch.from_numpy(np.ascontiguousarray(weak, dtype=np.float64))
        self.strong = torch.from_numpy(np.ascontiguousarray(strong, dtype=np.float64))
        n = len(self.weak)
        self._alpha = torch.full((n,), prior_alpha, dtype=torch.float64)
        self._beta = torch.full((n,), prior_beta, dtype=torch.float64)
        self.prior_alpha, self.prior_beta = prior_alpha, prior_beta
        self.lam, self.rho, self.n_rollouts, self.target, self.momentum = lam, rho, n_rollouts, target, momentum
        self.capability: float | None = None
        self.sampler = sampler
        self.gen = torch.Generator().manual_seed(seed)

    @property
    def alpha(self) -> np.ndarray:
        return self._alpha.numpy()

    @property
    def beta(self) -> np.ndarray:
        return self._beta.numpy()

    # ----------------------------------------------------------------------------- update
    def _observe(self, uids: torch.Tensor, s: torch.Tensor, t: torch.Tensor) -> None:
        w, st = self.weak[uids], self.strong[uids]
        both = ~torch.isnan(w) & ~torch.isnan(st)
        if not bool(both.any()):
            return
        obs = float((s[both] / t[both]).mean())
        wm, sm = float(w[both].mean()), float(st[both].mean())
        if abs(sm - wm) < 1e-6:
            return
        mu = (obs - wm) / (sm - wm)
        self.capability = (
            mu if self.capability is None else self.momentum * self.capability + (1.0 - self.momentum) * mu
        )

    def update(self, task_ids: np.ndarray, successes: np.ndarray, trials: float | np.ndarray) -> None:
        ids = torch.from_numpy(np.asarray(task_ids, dtype=np.int64))
        succ = torch.from_numpy(np.asarray(successes, dtype=np.float64))
        tri = torch.broadcast_to(torch.as_tensor(trials, dtype=torch.float64), ids.shape)
        uids, inv = torch.unique(ids, return_inverse=True)
        s = torch.zeros(len(uids), dtype=torch.float64).index_add_(0, inv, succ)
        t = torch.zeros(len(uids), dtype=torch.float64).index_add_(0, inv, tri)
        self._observe(uids, s, t)

        a, b = self._alpha, self._beta
        a.mul_(1.0 - self.lam).add_(self.lam * self.prior_alpha)
        b.mul_(1.0 - self.lam).add_(self.lam * self.prior_beta)
        if self.capability is not None:
            mu = self.capability
            pred = (mu * self.strong + (1.0 - mu) * self.weak).clamp_(0.0, 1.0)
            pred[uids] = float("nan")  # rolled-out tasks get their explicit evidence instead
            known = ~torch.isnan(pred)
            w = self.rho * self.n_rollouts
            a += torch.where(known, w * pred, 0.0)
            b += torch.where(known, w * (1.0 - pred), 0.0)
        a.index_add_(0, uids, s)
        b.index_add_(0, uids, t - s)

    def flush(self) -> None:
        """Nothing is deferred here."""

    # ----------------------------------------------------------------------------- selection
    def _draw(self) -> torch.Tensor:
        if self.sampler == "beta":
            # torch.distributions uses the global generator; the stream only needs to be random.
            return torch.distributions.Beta(self._alpha, self._beta, validate_args=False).sample()
        x = torch._standard_gamma(self._alpha, generator=self.gen)
        y = torch._standard_gamma(self._beta, generator=self.gen)
        return x / (x + y)

    def select(self, batch_size: int) -> np.ndarray:
        key = (self._draw() - self.target).abs_()
        k = min(batch_size, len(key))
        _, idx = torch.topk(key, k, largest=False, sorted=True)
        return idx.numpy().astype(np.int64)

    def state_bytes(self) -> int:
        return sum(x.numel() * x.element_size() for x in (self._alpha, self._beta, self.weak, self.strong))
