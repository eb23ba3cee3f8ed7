"""The Rust backend: the posterior in two float64 arrays the Rust core (``bots_rft._core``) owns,
updates and ranks in place, in parallel, with the GIL released; Python sees read-only snapshots. Every call the selectors make into
the core's passes lives here: :class:`RustPosterior`, what :class:`~bots_rft.BOTS` runs on by
default (``backend="rust"``), and :class:`RustShard`, one shard of a
:class:`~bots_rft.selector.backends.sharded.ShardedBOTS`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _core
from ..._validation import FloatArray, IntArray
from ..bots.bots import PassHandle, register_backend
from ..bots.params import frozen

__all__ = ["RustPosterior", "RustShard", "thompson_draw"]


class RustPosterior:
    """A pool's posterior for :class:`~bots_rft.BOTS`: α and β in memory the core owns
    (``_core.Posterior``), starting at the prior, and the core's fused passes over them (an
    update, a selection, or both in one sweep; in the background with :meth:`start`). Python
    reads them through read-only snapshot views that no later pass changes."""

    def __init__(
        self, num_tasks: int, prior_alpha: float | FloatArray, prior_beta: float | FloatArray, threads: int | None
    ) -> None:
        alpha, beta = np.empty(num_tasks, dtype=np.float64), np.empty(num_tasks, dtype=np.float64)
        alpha[:], beta[:] = prior_alpha, prior_beta
        self._core = _core.Posterior(alpha, beta)
        self._threads = threads

    def run(
        self, update: _core.UpdateSpec | None, select: _core.SelectSpec | None = None
    ) -> tuple[IntArray, float, FloatArray] | None:
        return self._core.step(update, select, threads=self._threads)

    def start(
        self, update: _core.UpdateSpec | None, select: _core.SelectSpec | None, take: int | None = None
    ) -> PassHandle:
        return self._core.start_step(update, select, threads=self._threads, take=take)

    def update_spec(self, batch: _core.Batch, evidence: dict[str, Any], **rule: Any) -> _core.UpdateSpec:
        return _core.UpdateSpec(batch, **rule, **evidence)

    def select_spec(self, k: int, counter: int, **rule: Any) -> _core.SelectSpec:
        return _core.SelectSpec(k, counter=counter, **rule)

    def draws_at(self, ids: IntArray, seed: int, counter: int) -> np.ndarray:
        return _core.thompson_draws_at(self._core.alpha, self._core.beta, ids, seed, counter)

    def at(self, ids: IntArray) -> tuple[FloatArray, FloatArray]:
        return self._core.alpha[ids], self._core.beta[ids]

    def arrays(self) -> tuple[FloatArray, FloatArray]:
        return self._core.alpha, self._core.beta

    def assign(self, alpha: FloatArray, beta: FloatArray) -> None:
        self._core.assign(np.ascontiguousarray(alpha, dtype=np.float64), np.ascontiguousarray(beta, dtype=np.float64))


register_backend("rust", posterior=RustPosterior)


class RustShard:
    """One contiguous shard [lo, hi) of a :class:`~bots_rft.selector.backends.sharded.ShardedBOTS` pool (a
    Ray actor): its posterior, priors and references, and the core's passes over them. It holds data only: every call carries the parameters it runs
    with (the driver owns them, so a ``set_params`` reaches every shard with the next call).
    Batch ids and exclusions it receives are slice positions; the selections it returns carry
    global ids (the core draws with global indices)."""

    def __init__(self, lo: int, state: dict[str, Any], threads: int | None) -> None:
        self.lo = lo
        # Frozen: read-only memory the core shares with every pass instead of copying it.
        self.prior_alpha = frozen(state["prior_alpha"], np.float64)
        self.prior_beta = frozen(state["prior_beta"], np.float64)
        # The core's own copy (`_core.Posterior`), read through `alpha`/`beta` and changed only by
        # its passes. A new pool sends no posterior: it starts at the prior, built here.
        size = int(state["size"])
        alpha, beta = np.empty(size), np.empty(size)
        alpha[:] = self.prior_alpha if state["alpha"] is None else state["alpha"]
        beta[:] = self.prior_beta if state["beta"] is None else state["beta"]
        self.posterior = _core.Posterior(alpha, beta)
        self.weak = frozen(state.get("weak"), np.float32)
        self.strong = frozen(state.get("strong"), np.float32)
        self.threads = threads
        # The last update, run fused with the next selection's pass (as BOTS without prefetch).
        self.pending: _core.UpdateSpec | None = None

    @property
    def alpha(self) -> np.ndarray:
        """α of this shard's tasks: a read-only snapshot."""
        return self.posterior.alpha

    @property
    def beta(self) -> np.ndarray:
        """β of this shard's tasks: a read-only snapshot."""
        return self.posterior.beta

    def ping(self) -> int:
        return len(self.posterior)

    def _flush(self) -> None:
        if self.pending is not None:
            self.posterior.step(self.pending, threads=self.threads)
            self.pending = None

    def at(self, ids: np.ndarray, references: bool, posterior: bool) -> tuple[Any, Any, Any, Any]:
        """(weak, strong, α, β) of the tasks ``ids``: the references if asked for (and held), the
        posterior with every update applied if asked for; None for the rest."""
        weak = strong = alpha = beta = None
        if references and self.weak is not None and self.strong is not None:
            weak, strong = self.weak[ids], self.strong[ids]
        if posterior:
            self._flush()
            alpha, beta = self.alpha[ids], self.beta[ids]
        return weak, strong, alpha, beta

    def update(
        self,
        ids: np.ndarray,
        successes: np.ndarray,
        trials: np.ndarray,
        rule: dict[str, float],
        evidence: dict[str, Any],
    ) -> None:
        """Queue an update (run with the next pass). ``rule``: the λ, ρ and n it uses;
        ``evidence``: nothing, ``{"capability": μ̃}`` (with this shard's references) or
        ``{"predicted": p̃ of this shard's tasks}``."""
        self._flush()
        batch = _core.aggregate(len(self.posterior), ids, successes, trials)
        if "capability" in evidence:
            evidence = {"weak": self.weak, "strong": self.strong, "capability": evidence["capability"]}
        self.pending = _core.UpdateSpec(
            batch,
            prior_alpha=self.prior_alpha,
            prior_beta=self.prior_beta,
            lam=rule["lam"],
            rho=rule["rho"],
            n_rollouts=rule["n_rollouts"],
            **evidence,
        )

    def select(
        self, k: int, counter: int, mask: np.ndarray | None, ids: np.ndarray | None, rule: dict[str, Any]
    ) -> tuple[np.ndarray, np.ndarray]:
        """This shard's top ``k`` (global ids, distances) under ``rule`` (target, sampling, seed, τ)."""
        spec = _core.SelectSpec(
            k,
            target=rule["target"],
            thompson=rule["thompson"],
            seed=rule["seed"],
            counter=counter,
            exclude_mask=mask,
            exclude_ids=ids,
            tau=rule["tau"] if rule["tau"] > 0 else None,
            first_index=self.lo,
        )
        result = self.posterior.step(self.pending, spec, threads=self.threads)
        self.pending = None
        assert result is not None
        ids, _, distances = result
        return ids, distances

    def state(self) -> dict[str, Any]:
        self._flush()
        return {"alpha": self.alpha, "beta": self.beta, "weak": self.weak, "strong": self.strong}


def thompson_draw(alpha: float, beta: float, task: int, seed: int, counter: int) -> np.float32:
    """Task ``task``'s Thompson draw in selection ``counter``, from its α and β alone. The core
    keys a draw by (seed, counter, global index) only, so a one-task pool whose first index is
    ``task`` draws it; against target 0 the distance it ranks by is the draw itself."""
    spec = _core.SelectSpec(1, target=0.0, thompson=True, seed=seed, counter=counter, first_index=task)
    one = _core.Posterior(np.array([alpha], dtype=np.float64), np.array([beta], dtype=np.float64))
    ranked = one.step(None, spec, threads=1)
    assert ranked is not None
    return np.float32(ranked[2][0])


if TYPE_CHECKING:
    from ..bots import BOTS, Posterior, PosteriorSelector

    def _keeps_the_posterior_contract(posterior: RustPosterior) -> Posterior:
        return posterior  # mypy checks RustPosterior against the Posterior protocol here

    def _bots_keeps_the_selector_contract(sel: BOTS) -> PosteriorSelector:
        return sel  # and BOTS against the PosteriorSelector protocol
