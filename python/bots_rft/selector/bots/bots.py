"""The BOTS selector: one Beta posterior per task, updated each step from rollout results
(explicit evidence) and predictions for the other tasks (implicit evidence), and Thompson
sampling (or the posterior mean) to pick the tasks nearest a target success rate.

:class:`BOTS` owns the selector's logic: the update's checks and adaptive rules, selections made
ahead of time (prefetch) and the task stream of ``take``. Where the posterior lives and how a pass
over it runs is its backend's (a :class:`Posterior`: by default the Rust core's, two float64 numpy
arrays updated and ranked in place, in parallel, with the GIL released); a backend that replaces
more of BOTS (torch) is a subclass that ``BOTS(..., backend=...)`` builds. Backends register
themselves (:func:`register_backend`), so this module imports none of them. Every public method
takes a lock, so one selector can be shared between threads.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import numpy as np

from ..._validation import FloatArray, IntArray, as_ids, as_int, ids_in_pool, pool_too_large
from ..._validation import exclusion as _exclusion
from ...checkpoint import read_checkpoint
from ...errors import CheckpointError, DataError, InvalidArgumentError
from ...estimators import Estimator, ImplicitEvidence, StepEvidence, checked_prediction, user_object
from .base import Picks, SelectorBase
from .feedback import aggregate
from .params import DEFAULT_PRIOR, BOTSParams, SelectorParams, param_differences, readonly
from .rules import lam_for, predictions_miss, smoothed_drift
from .state import (
    ParamsOnLoad,
    check_state_header,
    evidence_identity,
    identity_differences,
    pool_fingerprint,
    state_params,
    state_pool,
    state_posterior,
)
from .stream import _MAX_SPECULATIVE_EXTRA, _Draw, _Skip, _sorted_contains, _Speculation, _Stream

if TYPE_CHECKING:
    from ... import _core

_ChoiceT = TypeVar("_ChoiceT", bound="_BackendChoice")


class PassHandle(Protocol):
    """A pass over the pool running in the background (what :meth:`Posterior.start` returns)."""

    def wait(self) -> tuple[IntArray, float, FloatArray] | None:
        """Wait for the pass; its selection (ranked ids, k-th distance, the ids' distances), if it
        made one."""
        ...

    def wait_take(self, k: int) -> tuple[IntArray | None, float] | None:
        """Wait for the pass; the first ``k`` ids of its selection and the k-th distance, or None."""
        ...


class Posterior(Protocol):
    """How a backend holds a pool's posterior and runs passes over it: the part of
    :class:`BOTS` that depends on where the posterior lives. A pass applies an update (eq. 1 for
    every task) and/or ranks the pool for a selection, in one sweep; ``start`` runs it in the
    background, ``run`` now. Updates and selections are described by the backend's own specs
    (``update_spec``, ``select_spec``), built from BOTS's validated values."""

    def __init__(
        self, num_tasks: int, prior_alpha: float | FloatArray, prior_beta: float | FloatArray, threads: int | None
    ) -> None: ...

    def run(self, update: Any, select: Any = None) -> tuple[IntArray, float, FloatArray] | None:
        """Apply ``update`` (None: none) and rank for ``select`` (None: none) now."""
        ...

    def start(self, update: Any, select: Any, take: int | None = None) -> PassHandle:
        """The same pass, in the background. ``take``: the ``k`` its ``wait_take`` will probably
        be asked for (a backend may prepare that answer's array now)."""
        ...

    def update_spec(self, batch: _core.Batch, evidence: dict[str, Any], **rule: Any) -> Any:
        """An update of ``batch`` with the step's implicit ``evidence`` and the rule's values
        (``prior_alpha``, ``prior_beta``, ``lam``, ``rho``, ``n_rollouts``)."""
        ...

    def select_spec(self, k: int, counter: int, **rule: Any) -> Any:
        """A selection of ``k`` tasks at stream position ``counter`` (``target``, ``thompson``,
        ``seed``, ``tau``, ``exclude_mask``, ``exclude_ids``, ``bound_hint``)."""
        ...

    def draws_at(self, ids: IntArray, seed: int, counter: int) -> np.ndarray:
        """The float32 Thompson draws of tasks ``ids`` at stream position ``counter``."""
        ...

    def at(self, ids: IntArray) -> tuple[FloatArray, FloatArray]:
        """(α, β) of tasks ``ids`` (new arrays)."""
        ...

    def arrays(self) -> tuple[FloatArray, FloatArray]:
        """α and β of the whole pool, not copied: read them before the next pass starts."""
        ...

    def assign(self, alpha: FloatArray, beta: FloatArray) -> None:
        """Take a checkpoint's α and β (copied)."""
        ...


#: The backends ``BOTS(..., backend=name)`` builds: name -> how. A backend that keeps BOTS's
#: logic and holds the posterior its own way registers a :class:`Posterior` class (the Rust core:
#: the instance is a BOTS); one that replaces BOTS's methods registers a function returning its
#: subclass of BOTS (torch: imported only when asked for). Backends register themselves
#: (:func:`register_backend`); ``bots_rft.selector.backends`` registers them all when the package loads.
@dataclass(frozen=True)
class _Backend:
    posterior: type[Posterior] | None
    selector: Callable[[], type[BOTS]] | None
    takes_device: bool


_BACKENDS: dict[str, _Backend] = {}


def register_backend(
    name: str,
    *,
    posterior: type[Posterior] | None = None,
    selector: Callable[[], type[BOTS]] | None = None,
    takes_device: bool = False,
) -> None:
    """Make ``BOTS(..., backend=name)`` run on a backend: ``posterior``, a :class:`Posterior`
    class that BOTS runs its passes on, or ``selector``, a function returning a subclass of BOTS
    to build instead (called only when the backend is asked for, so its dependencies are
    imported only then). ``takes_device``: whether the backend takes ``device=``."""
    if (posterior is None) == (selector is None):
        raise InvalidArgumentError("register_backend: give exactly one of posterior and selector", "posterior")
    _BACKENDS[name] = _Backend(posterior, selector, takes_device)


def _backend(backend: Any, device: Any) -> _Backend:
    """The registered backend ``backend``; refuses an unknown backend, and a device given to a
    backend that has none to put the posterior on."""
    entry = _BACKENDS.get(backend) if isinstance(backend, str) else None
    if entry is None:
        names = " or ".join(map(repr, _BACKENDS))
        raise InvalidArgumentError(f"backend: expected {names}, got {backend!r}", "backend")
    if device is not None and not entry.takes_device:
        takers = [name for name, known in _BACKENDS.items() if known.takes_device]
        only = " or ".join(f"backend={name!r}" for name in takers)
        raise InvalidArgumentError(
            f"device: only the {' and '.join(takers)} backend takes a device ({only}), got {device!r}", "device"
        )
    return entry


class _BackendChoice:
    """Makes ``BOTS(..., backend=...)`` an instance of the backend's subclass of BOTS when the
    backend registered one (so the instance is a BOTS either way). It is a base of BOTS rather
    than part of it so that BOTS's own signature (what ``inspect``, ``help()`` and IDEs show) is
    its ``__init__``'s."""

    def __new__(cls: type[_ChoiceT], *args: Any, backend: Any = "rust", device: Any = None, **kwargs: Any) -> _ChoiceT:
        chosen: type[Any] = cls
        if cls is BOTS:
            entry = _backend(backend, device)
            if entry.selector is not None:
                chosen = entry.selector()
        return cast(_ChoiceT, object.__new__(chosen))


class BOTS(_BackendChoice, SelectorBase):
    """Bayesian Online Task Selection over a pool of ``num_tasks`` tasks.

    Parameters map to the paper (section 3): ``lam`` is λ, the discount toward the prior;
    ``rho`` is ρ, the weight of implicit evidence; ``target`` is p* in [0, 1]; ``n_rollouts``
    is n, the pseudo sample size of implicit evidence; ``thompson`` picks posterior sampling
    (else the posterior mean); ``tau`` > 0 samples the batch without replacement from
    softmax(−|θ − p*| / τ) instead of taking the B tasks nearest p* (τ = 0, the paper's rule;
    τ → 0 reduces to it); ``adaptive_rho`` halves ρ when predictions miss (see
    :attr:`rho_in_use`); ``prior_alpha``/``prior_beta`` are α0/β0 (scalar or per task);
    ``evidence`` is an :class:`Interpolation`, any :class:`~bots_rft.estimators.Estimator`, or any
    :class:`ImplicitEvidence` plug-in (an object with ``predict``); the selector talks to all of
    them through the :class:`~bots_rft.estimators.Estimator` interface.
    ``threads=None`` uses every core; an int uses a pool of that size. Results never depend on it.
    ``backend="rust"`` (the default) runs on the Rust core; ``backend="torch"`` with
    ``device="cuda"`` (or ``"cpu"``) keeps the posterior in torch tensors on that device and
    returns a :class:`bots_rft.selector.backends.torch.TorchBOTS`, a subclass of BOTS with the same API
    and checkpoints.
    ``prefetch=True`` (the default) runs each update's pass over the pool in the background,
    fused with the selection the next :meth:`select` is expected to ask for, so that ``select``
    finds it ready; ``prefetch=False`` runs that pass inside ``select``. Results are identical
    either way (same ids, same posterior, bit for bit); only where the time is spent differs.

    Parameters are read-only attributes (``sel.lam``, ``sel.rho``, ...): assigning one raises
    AttributeError. :meth:`set_params` changes λ, ρ, p*, n or the sampling rule between steps,
    validated and recorded in the next checkpoint.
    """

    def __init__(
        self,
        num_tasks: int,
        *,
        backend: str = "rust",
        device: Any = None,
        lam: float = BOTSParams.lam,
        rho: float = BOTSParams.rho,
        target: float = BOTSParams.target,
        n_rollouts: float = BOTSParams.n_rollouts,
        thompson: bool = BOTSParams.thompson,
        prior_alpha: float | Any = DEFAULT_PRIOR,
        prior_beta: float | Any = DEFAULT_PRIOR,
        evidence: Estimator | ImplicitEvidence | None = None,
        seed: int = BOTSParams.seed,
        threads: int | None = None,
        prefetch: bool = True,
        adaptive_rho: bool = BOTSParams.adaptive_rho,
        tau: float = BOTSParams.tau,
        adaptive_lam: bool = BOTSParams.adaptive_lam,
        lag_discount: float = BOTSParams.lag_discount,
    ) -> None:
        # The signature spells the parameters out for the reader and the IDE; their defaults are
        # BOTSParams's (the catalogue's), and BOTSParams validates them, as on every backend,
        # after the pool size.
        as_int(num_tasks, "num_tasks", minimum=1)
        params = BOTSParams(
            lam=lam,
            rho=rho,
            target=target,
            tau=tau,
            n_rollouts=n_rollouts,
            thompson=thompson,
            seed=seed,
            adaptive_rho=adaptive_rho,
            adaptive_lam=adaptive_lam,
            lag_discount=lag_discount,
        )
        self._init_params(
            num_tasks,
            params,
            prior_alpha=prior_alpha,
            prior_beta=prior_beta,
            evidence=evidence,
            threads=threads,
            prefetch=prefetch,
        )
        posterior = _backend(backend, device).posterior
        if posterior is None:  # a subclass of BOTS asked for a backend that replaces BOTS's methods
            raise InvalidArgumentError(
                f"backend: {backend!r} builds its own class; {type(self).__name__} runs on a backend that holds "
                f"the posterior for BOTS ({', '.join(repr(n) for n, b in _BACKENDS.items() if b.posterior)})",
                "backend",
            )
        try:
            self._posterior: Posterior = posterior(self._num_tasks, self._prior_alpha, self._prior_beta, self._threads)
        except MemoryError:
            raise pool_too_large(self._num_tasks) from None
        # An update is validated (and the estimator advanced) when `update` is called; its O(N)
        # pass then runs in the background (prefetch) fused with the next selection, or, without
        # prefetch, waits here for the next `select`, which runs both in one fused pass. Anything
        # that reads the posterior settles both first.
        self._pending: Any = None  # the posterior's update spec
        self._pass: PassHandle | None = None
        self._pass_role: _Speculation | _Draw | None = None
        # The next selection computed ahead of time, for `select` to take if it asks for it.
        self._speculation: _Speculation | None = None
        # What the last `select` asked for (batch size, how many tasks it excluded): the shape of
        # the next speculation. None until the first `select`.
        self._last_request: tuple[int, int] | None = None
        # Loosened k-th distances of past selections by batch size: let a selection prune from its
        # first task. Only speed depends on them, so they are not checkpointed.
        self._bound_hints: dict[int, float] = {}
        # A (k, k-th distance) that `select` collected and left for the next pass to file.
        self._unfiled_hint: tuple[int, float] | None = None
        self._stream = _Stream()

    #: How this selector runs, beside its state: kept by load_state_dict, carried by pickling.
    _OPTIONS: tuple[str, ...] = ("threads", "prefetch")

    # ----------------------------------------------------------------------------- views
    @property
    def alpha(self) -> FloatArray:
        """α of every task: a read-only snapshot (a copy), with every update made so far applied.
        The posterior itself is never shared, because background passes write it; for a few
        tasks use :meth:`posterior`."""
        with self._lock:
            self._flush_locked()
            return readonly(self._posterior_arrays()[0].copy())

    @property
    def beta(self) -> FloatArray:
        """β of every task (see :attr:`alpha`)."""
        with self._lock:
            self._flush_locked()
            return readonly(self._posterior_arrays()[1].copy())

    def _params_changed(self) -> None:
        # A speculation ranked with the old parameters; start one with the new.
        self._settle()
        self._speculation = None
        self._speculate()

    def __repr__(self) -> str:
        p = self.params
        ev = type(self.evidence).__name__ if self._estimator is not None else None
        return (
            f"BOTS(num_tasks={self._num_tasks}, lam={p['lam']}, rho={p['rho']}, target={p['target']}, "
            f"n_rollouts={p['n_rollouts']}, thompson={p['thompson']}, evidence={ev}, seed={p['seed']}, "
            f"selections={self._num_selections}, updates={self._num_updates})"
        )

    def flush(self) -> None:
        """Finish any update now: wait for a background pass, apply a pending update. Never needed
        for correctness (every read does it); useful to time ``update`` on its own."""
        super().flush()

    def close(self) -> None:
        """Wait for any background pass and apply any pending update. The selector stays usable;
        this only guarantees that no work of it is running. Also called by ``with BOTS(...)``."""
        self.flush()

    def _posterior_at(self, ids: IntArray) -> tuple[FloatArray, FloatArray]:
        """(α, β) of tasks ``ids`` as float64 arrays of their own (every update applied)."""
        return self._posterior.at(ids)

    def _posterior_arrays(self) -> tuple[FloatArray, FloatArray]:
        """α and β of the whole pool as float64 arrays (every update applied; not copied where
        the backend keeps them so: read them under the lock)."""
        return self._posterior.arrays()

    def _flush_locked(self) -> None:
        """Finish every update made so far: wait for the background pass, run a pending update."""
        self._settle()
        if self._pending is not None:
            self._posterior.run(self._pending)
            self._pending = None

    def _settle(self) -> None:
        """Wait for the background pass, if any, and file what it selected."""
        if self._pass is None:
            return
        running, role = self._pass, self._pass_role
        self._pass, self._pass_role = None, None
        self._file(role, running.wait())

    def _file(self, role: _Speculation | _Draw | None, result: tuple[IntArray, float, FloatArray] | None) -> None:
        """Keep what a pass selected where `select` (a speculation) or `take` (a draw) finds it."""
        if role is None or result is None:
            return
        role.candidates, role.kth, _ = result
        self._remember_hint(role.k, role.kth)
        if isinstance(role, _Speculation):
            self._speculation = role
        else:
            self._stream.prepared = role

    def _start(self, update: Any, role: _Speculation | _Draw | None) -> None:
        """Start a pass (the pending update, if any, and a selection, if any) in the background,
        or, without prefetch, run it now. Nothing else may be in flight."""
        assert self._pass is None
        spec = None if role is None else self._select_spec(role.k, role.counter)
        if update is None and spec is None:
            return
        if self._prefetch:
            expected = (
                min(self._last_request[0], role.k) if self._last_request and isinstance(role, _Speculation) else None
            )
            self._pass = self._posterior.start(update, spec, expected)
            self._pass_role = role
            return
        self._file(role, self._posterior.run(update, spec))

    def _select_spec(self, k: int, counter: int, mask: Any = None, ids: Any = None) -> Any:
        if self._unfiled_hint is not None:
            self._remember_hint(*self._unfiled_hint)
            self._unfiled_hint = None
        return self._posterior.select_spec(
            k,
            target=self._target,
            thompson=self._thompson,
            seed=self._seed,
            counter=counter,
            exclude_mask=mask,
            exclude_ids=ids,
            bound_hint=self._bound_hints.get(k),
            tau=self._tau if self._tau > 0 else None,
        )

    def _remember_hint(self, k: int, kth: float) -> None:
        # 1.5x: the k-th distance moves from step to step; a hint that proves too tight costs a
        # second pass (the result is the same either way).
        if len(self._bound_hints) > 8:
            self._bound_hints.clear()
        if math.isfinite(kth) and kth > 0:
            self._bound_hints[k] = 1.5 * kth
        else:
            self._bound_hints.pop(k, None)

    def _expected_selection(self) -> _Speculation | None:
        """The selection the next `select` will probably ask for: like the last one (prefetch
        only; None before the first `select`)."""
        if not self._prefetch or self._last_request is None:
            return None
        k, excluded = self._last_request
        # Ranking more tasks than asked lets one pass serve a select that excludes up to that
        # many of them (see `_reuse`); the slack absorbs a growing exclusion list.
        extra = min(_MAX_SPECULATIVE_EXTRA, excluded + excluded // 4 + 16) if excluded else 0
        size = min(self._num_tasks, k + extra)
        return _Speculation(size, self._num_selections, self._target, self._thompson, self._tau, self._seed)

    def _speculate(self) -> None:
        """After a change of state or parameters: start the expected selection in the background."""
        role = self._expected_selection()
        if role is not None and self._pass is None:
            self._start(self._pending, role)
            self._pending = None

    def _update_spec(self, batch: _core.Batch, evidence: dict[str, Any], rho: float, lam: float) -> Any:
        return self._posterior.update_spec(
            batch,
            evidence,
            prior_alpha=self._prior_alpha,
            prior_beta=self._prior_beta,
            lam=lam,
            rho=rho,
            n_rollouts=self._n_rollouts,
        )

    def mean(self) -> FloatArray:
        """Posterior means α / (α + β) (a new array)."""
        with self._lock:
            self._flush_locked()
            alpha, beta = self._posterior_arrays()
            return alpha / (alpha + beta)

    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        """(α, β) of the given tasks (new arrays): cheap per-pick information, where
        :attr:`alpha` and :attr:`beta` copy the whole pool."""
        ids = ids_in_pool(task_ids, self._num_tasks)
        with self._lock:
            self._flush_locked()
            return self._posterior_at(ids)

    def predicted(self) -> FloatArray | None:
        """p̃ the interpolation estimator would give every task now (NaN = none), or None."""
        with self._lock:
            return self._estimator.predict_all() if self._estimator is not None else None

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """The ``batch_size`` distinct tasks whose sampled (or mean) success rate is nearest the
        target, best first, ties to the lower index. ``exclude``: task ids or a boolean mask of
        length ``num_tasks``. Never changes the posterior; advances the random stream, except
        ``select(0)``, which changes nothing (it returns no ids).

        :meth:`explain` then says, for the picks, what was drawn and why.

        With prefetch, the answer is usually ready: computed in the background since the last
        update. It is used only if it provably equals what this call computes (same random stream
        position and parameters, and enough ranked tasks left after the exclusions); otherwise
        the selection is computed here. The ids are the same either way."""
        k = as_int(batch_size, "batch_size", minimum=0)
        if k == 0:  # nothing drawn, so the next call's picks are those it would have been
            _exclusion(exclude, self._num_tasks)
            return np.empty(0, dtype=np.int64)
        if exclude is None:
            # The trainer's loop (update, its optimiser step, select): take the background pass's
            # answer in as few steps as possible (see `_take_prefetched`).
            with self._lock:
                chosen = self._take_prefetched(k)
                if chosen is not None:
                    self._speculation = None
                    self._num_selections += 1
                    self._last_request = (k, 0)  # a speculation exists only with prefetch
                    return chosen
        mask, ids = _exclusion(exclude, self._num_tasks)
        with self._lock:
            self._settle()
            chosen = self._reuse(k, mask, ids)
            if chosen is None:
                spec = self._select_spec(k, self._num_selections, mask, ids)
                result = self._posterior.run(self._pending, spec)
                self._pending = None
                assert result is not None
                chosen, kth, _ = result
                self._remember_hint(k, kth)
            self._speculation = None
            self._num_selections += 1
            if self._prefetch:  # the shape of the next speculation (a mask costs a count over the pool)
                excluded = (
                    int(ids.size) if ids is not None else (int(np.count_nonzero(mask)) if mask is not None else 0)
                )
                self._last_request = (k, excluded)
        return chosen

    def _ranked_theta(self, ranked: IntArray) -> FloatArray:
        self._flush_locked()
        return self._explain(ranked, self._num_selections - 1).theta

    def explain(self, task_ids: Any) -> Picks:
        """What the last selection drew for ``task_ids`` (usually its picks) and why: θ, its score,
        α, β and the estimator's p̃ (:class:`Picks`), computed for those tasks only
        (microseconds). Call it after :meth:`select` and before the next :meth:`update`: the draws
        are recomputed from the posterior (a draw depends only on the seed, the selection's
        position in the stream, the task and its α, β), which an update changes."""
        chosen = ids_in_pool(task_ids, self._num_tasks)
        with self._lock:
            self._flush_locked()
            return self._explain(chosen, max(self._num_selections - 1, 0))

    def _explain(self, chosen: IntArray, counter: int) -> Picks:
        alpha, beta = self._posterior_at(chosen)
        theta: FloatArray
        if self._thompson:
            draws = self._posterior.draws_at(chosen, self._seed, counter)
            theta = draws.astype(np.float64)
            distance = np.abs(draws - np.float32(self._target)).astype(np.float64)  # as the core ranks
        else:
            theta = alpha / (alpha + beta)
            distance = np.abs(theta - self._target)
        predicted = self._estimator.predict_at(chosen) if self._estimator is not None else None
        if predicted is None:
            predicted = np.full(chosen.size, np.nan)
        return Picks(chosen, theta, -distance, alpha, beta, np.asarray(predicted, dtype=np.float64))

    def _take_prefetched(self, k: int) -> IntArray | None:
        """The common case of :meth:`_reuse` in one call into the core: no exclusions, and the
        pass in the background (running or done) is the speculation made for this call. Its
        first ``k`` ids, or None (then `select` goes the general way, which finds the pass
        collected and filed). The thread calling this has usually just woken from the trainer's
        optimiser step with cold caches, where every Python call costs tens of microseconds, so
        the fewer the better."""
        role, running = self._pass_role, self._pass
        if running is None or not isinstance(role, _Speculation) or self._pending is not None:
            return None
        if not self._made_for_this_call(role):
            return None
        self._pass, self._pass_role = None, None
        result = running.wait_take(k)
        if result is None:
            return None
        first, kth = result
        self._unfiled_hint = (role.k, kth)  # filed by the next pass's start, off this thread's wait
        return first

    def _made_for_this_call(self, spec: Any) -> bool:
        """Whether a speculation was made at this stream position with these parameters."""
        return (spec.counter, spec.target, spec.thompson, spec.tau, spec.seed) == (
            self._num_selections,
            self._target,
            self._thompson,
            self._tau,
            self._seed,
        )

    def _reuse(self, k: int, mask: np.ndarray | None, ids: np.ndarray | None) -> IntArray | None:
        """The first ``k`` tasks of the speculation's ranking that are not excluded, if the
        speculation was made for this call (same stream position and parameters) and ranks
        enough of them; else None.

        Why this equals a fresh selection: the speculation holds the K best tasks of the whole
        pool in the total order (distance, id). Removing the excluded ones keeps that order, and
        any selectable task outside the K is worse than all of them; so if at least k remain, they
        are the k best selectable tasks."""
        spec = self._speculation
        if spec is None or self._pending is not None:
            return None
        if not self._made_for_this_call(spec):
            return None
        ranked = spec.candidates
        if mask is not None:
            ranked = ranked[~mask[ranked]]
        elif ids is not None and ids.size:
            ranked = ranked[~_sorted_contains(ids, ranked)]
        if ranked.size < k:
            return None
        return np.array(ranked[:k], dtype=np.int64)

    # ----------------------------------------------------------------------------- streaming
    def take(self, k: int, *, draw_size: int = 256, exclude: Any = None) -> IntArray:
        """Hand out the next ``k`` tasks for rollout, for trainers that ask a few at a time.

        Tasks come from a sequence of *draws*. A draw is one Thompson selection (or greedy, per
        ``thompson``) with its own position in the random stream, exactly as one :meth:`select`
        call makes it, ranking the pool by closeness to the target; it hands out at most
        ``draw_size`` tasks, best first, skipping tasks in flight (and ``exclude``: task ids or a
        boolean mask, as in :meth:`select`). A draw also never hands out a task that was in flight
        when it was made or has been handed out since: its ranking of that task predates evidence
        on its way. Taking ``draw_size`` tasks at once from a fresh draw with nothing in flight
        returns what ``select(draw_size)`` would.

        Handed-out tasks are *in flight* (:attr:`in_flight`) until evidence for them arrives
        (:meth:`update` / :meth:`update_rewards`) or are handed back with :meth:`release`; no
        draw hands out a task in flight. When the current draw has half of its tasks or fewer left
        to hand out, the next draw is made from the posterior as it is then (with prefetch, in the
        background); evidence arriving later shapes the draw after. The point where a draw is
        made depends only on the sequence of calls, so a run is reproducible, and identical with
        prefetch on and off. ``draw_size`` applies from the next draw on.
        """
        k = as_int(k, "k", minimum=0)
        size = as_int(draw_size, "draw_size", minimum=1)
        mask, ids = _exclusion(exclude, self._num_tasks)
        with self._lock:
            stream = self._stream
            skip = _Skip(stream.in_flight, mask, ids)
            skipped = skip.count()
            free = self._num_tasks - skipped
            if k > free:
                raise InvalidArgumentError(
                    f"k: {k} exceeds the {free} tasks neither in flight nor excluded "
                    f"(pool of {self._num_tasks}, {len(stream.in_flight)} in flight)",
                    "k",
                )
            out: list[int] = []
            while len(out) < k:
                if stream.current is None or stream.current.exhausted():
                    # Counted now: the tasks this call has handed out are in flight too, and a
                    # draw that ranks too few beyond them may have nothing left to hand out.
                    self._next_draw(size, skip.count())
                assert stream.current is not None
                handed = stream.current.hand_out(k - len(out), skip)
                upcoming = stream.prepared or (self._pass_role if isinstance(self._pass_role, _Draw) else None)
                if upcoming is not None:
                    upcoming.blocked.update(handed)
                out.extend(handed)
            current = stream.current
            running_low = current is None or current.left() <= current.quota // 2
            if running_low and stream.prepared is None and not isinstance(self._pass_role, _Draw):
                self._draw_ahead(size, skip.count())
        return np.array(out, dtype=np.int64)

    def _next_draw(self, size: int, skipped: int) -> None:
        """Make the prepared draw current, preparing one first if there is none."""
        stream = self._stream
        if stream.prepared is None and not isinstance(self._pass_role, _Draw):
            self._draw_ahead(size, skipped)
        self._settle()
        assert stream.prepared is not None
        stream.current, stream.prepared = stream.prepared, None

    def _draw_ahead(self, size: int, skipped: int) -> None:
        """Prepare the next draw from the posterior as it is now (pending update included)."""
        self._settle()
        self._speculation = None
        # Rank as many extra tasks as are skipped now: enough for `size` of them to be free
        # unless more are handed out or excluded before this draw is used (then the next draw
        # is made).
        role = _Draw(
            min(self._num_tasks, size + skipped), self._num_selections, quota=size, blocked=set(self._stream.in_flight)
        )
        self._num_selections += 1
        update, self._pending = self._pending, None
        self._start(update, role)

    def release(self, task_ids: Any) -> int:
        """Return handed-out tasks without evidence (e.g. a rollout that failed): they may be
        handed out again. Ids not in flight are ignored. Returns how many were released."""
        ids = as_ids(task_ids, "task_ids")
        with self._lock:
            before = len(self._stream.in_flight)
            self._stream.in_flight.difference_update(ids.tolist())
            return before - len(self._stream.in_flight)

    @property
    def in_flight(self) -> IntArray:
        """Tasks handed out by :meth:`take` and awaiting evidence, ascending."""
        with self._lock:
            return np.array(sorted(self._stream.in_flight), dtype=np.int64)

    # ----------------------------------------------------------------------------- updates
    def _apply(self, ids: IntArray, succ: FloatArray, tri: FloatArray, pred: FloatArray | None) -> None:
        with self._lock:
            batch = aggregate(self._num_tasks, ids, succ, tri)  # validates, sums repeats
            estimator = self._estimator if pred is None else None
            if pred is not None:  # replaces the estimator for this step: it neither observes nor predicts
                step = StepEvidence({"predicted": checked_prediction(pred, self._num_tasks)})
            elif estimator is not None:
                step = estimator.observe(batch)
            else:
                step = StepEvidence()
            halvings = self._rho_halvings + int(self._adaptive_rho and predictions_miss(step, batch))
            # Validated: from here on nothing can fail. Finish every earlier update: this one
            # starts from their posterior.
            self._flush_locked()
            drift = self._drift
            if self._adaptive_lam:  # reads the posterior the batch lands on: after the flush
                drift = smoothed_drift(drift, *self._posterior_at(batch.ids), batch)
            update = self._take_update(
                batch,
                step,
                estimator,
                rho=self._rho * 0.5**halvings,
                lam=lam_for(self._lam, drift) if self._adaptive_lam else self._lam,
            )
            if estimator is not None:
                estimator.commit(step)
            self._rho_halvings = halvings
            self._drift = drift
            self._num_updates += 1
            self._after_update(batch, update)

    def _take_update(
        self, batch: _core.Batch, step: StepEvidence, estimator: Estimator | None, *, rho: float, lam: float
    ) -> Any:
        """The update of ``batch`` with the step's implicit evidence, for :meth:`_after_update` to
        run (a backend that applies it at once does so here, before the estimator commits)."""
        spec = self._update_spec(batch, step.update_kwargs, rho=rho, lam=lam)
        self._speculation = None  # ranked from the posterior this update changes
        return spec

    def _after_update(self, batch: _core.Batch, update: Any) -> None:
        """After the bookkeeping: the batch's tasks are no longer in flight, and the update's pass
        starts (with prefetch, fused with the selection the next select is expected to ask for) or
        waits for the next pass."""
        self._stream.in_flight.difference_update(batch.ids.tolist())
        if self._prefetch:
            self._start(update, self._expected_selection())
        else:
            self._pending = update

    # ----------------------------------------------------------------------------- state
    #: The pool this selector's task ids index (:meth:`set_pool`); None: not bound to one.
    _pool: str | None = None

    @property
    def pool(self) -> str | None:
        """The fingerprint of the pool of tasks this selector is bound to (:meth:`set_pool`, or a
        checkpoint that recorded one), or None."""
        return self._pool

    @property
    def identity(self) -> dict[str, Any]:
        """What this selector's posterior is learnt on, as :meth:`state_dict` records it:
        ``evidence`` (:func:`~bots_rft.selector.bots.state.evidence_identity`: the estimator's kind and
        a hash of its reference arrays, or None) and ``pool`` (:attr:`pool`)."""
        with self._lock:
            return {"evidence": evidence_identity(self._estimator_state()), "pool": self._pool}

    def set_pool(self, task_ids: Any, *, content: Any = None, source: str = "task_ids") -> str:
        """Bind this selector to a pool: the task ids a dataset holds (any order; rows without a
        task are left out) and, optionally, ``content``, one string per id saying what the task
        is (the trainer integrations pass a hash of each row's prompt, so another pool of the same
        size and ids is told apart). Its fingerprint
        (:func:`~bots_rft.selector.bots.state.pool_fingerprint`) is recorded in every
        :meth:`state_dict`, and :meth:`load_state_dict` refuses a state recorded on another pool.
        A selector already bound (or restored from a checkpoint that recorded a pool) refuses a
        different one with a :class:`DataError` naming ``source``. Returns the fingerprint."""
        ids = np.asarray(task_ids if isinstance(task_ids, np.ndarray) else list(task_ids), dtype=np.int64)
        fingerprint = pool_fingerprint(ids, None if content is None else list(content))
        with self._lock:
            if self._pool is not None and self._pool != fingerprint:
                raise DataError(
                    f"{source}: this pool ({np.unique(ids).size} task ids, fingerprint {fingerprint}) is not the pool "
                    f"this selector was built or checkpointed on (fingerprint {self._pool}); resume on the same "
                    "pool, or start a fresh selector"
                )
            self._pool = fingerprint
        return fingerprint

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["identity"]["pool"] = self._pool
        return state

    def load_state_dict(self, state: dict[str, Any], *, params: ParamsOnLoad = "error") -> None:
        """Restore a :meth:`state_dict` of a selector over the same number of tasks, validated
        before anything changes (see :meth:`SelectorBase.load_state_dict`).

        The state's implicit evidence counts as a parameter: an estimator of another kind, other
        reference arrays (compared by hash), or evidence on one side only is refused under
        ``params="error"`` (the default) with the differences named, taken from the state under
        ``params="checkpoint"``, and left as this selector's under ``params="current"``. So is a
        state recorded on another pool (:meth:`set_pool`); a state or a selector without a pool
        (from a release that did not record pools, or never bound) is no difference, and a state
        without these records loads without the check: it has nothing to compare."""
        super().load_state_dict(state, params=params)

    def _restore_counts(self, state: dict[str, Any]) -> None:
        # Every backend's _from_state calls this: the pool a state records comes back with it.
        super()._restore_counts(state)
        self._pool = state_pool(state)

    def _adopt_state(self, fresh: SelectorParams, params: ParamsOnLoad, kept: tuple[str, ...]) -> None:
        """The evidence and the pool are parameters too: a state whose evidence (estimator kind,
        reference arrays) or pool differs is refused with the parameters' ``params`` choice
        (``"checkpoint"``: the state's evidence; ``"current"``: this selector's estimator, as it
        is). Whatever wins, a selector bound to a pool stays bound to it."""
        assert isinstance(fresh, BOTS)
        mine = evidence_identity(self._estimator_state())
        theirs = evidence_identity(fresh._estimator_state())
        extra = identity_differences((mine, theirs), (self._pool, fresh._pool))
        if extra and params == "error":
            differences = param_differences(self, fresh) + extra
            raise CheckpointError(
                f"state: its parameters differ from this selector's ({'; '.join(differences)}); pass "
                "params='checkpoint' to take the state's, params='current' to keep this selector's"
            )
        estimator, pool = self._estimator, self._pool
        super()._adopt_state(fresh, params, kept)
        if params == "current" and mine != theirs:
            self._estimator = estimator
        if pool is not None:
            self._pool = pool

    def _state_parts(self) -> tuple[FloatArray, FloatArray, dict[str, Any] | None]:
        self._flush_locked()
        alpha, beta = self._posterior_arrays()
        return alpha, beta, self._estimator_state()

    def _stream_state(self) -> dict[str, Any] | None:
        return self._stream.state_dict()

    def _rebuilt(self, state: dict[str, Any], evidence: Any, options: dict[str, Any]) -> BOTS:
        return BOTS._from_state(state, evidence=evidence, **options)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        threads: int | None = None,
        evidence: ImplicitEvidence | None = None,
        prefetch: bool = True,
        backend: str = "rust",
        device: Any = None,
    ) -> BOTS:
        """Read a checkpoint written by :meth:`save`. A custom (non-interpolation) estimator is
        not stored in the file: pass it as ``evidence`` and its ``load_state_dict`` gets its state.
        ``backend="torch"`` (with ``device=``) loads it into the torch backend: the two backends
        share one checkpoint layout."""
        chosen = _backend(backend, device).selector
        if chosen is not None and cls is BOTS:
            return chosen().load(
                path, threads=threads, evidence=evidence, prefetch=prefetch, backend=backend, device=device
            )
        return cls._from_state(read_checkpoint(path), threads=threads, evidence=evidence, prefetch=prefetch)

    @classmethod
    def _from_state(
        cls, state: dict[str, Any], *, threads: int | None = None, evidence: Any, prefetch: bool = True
    ) -> BOTS:
        check_state_header(state)
        try:
            n = int(state["num_tasks"])
            sel = cls(n, threads=threads, prefetch=prefetch, **state_params(state, state["params"], evidence, n))
            alpha, beta = state_posterior(state, n)
            sel._posterior.assign(alpha, beta)
            sel._restore_counts(state)
            sel._stream = _Stream.from_state_dict(state.get("stream"), n)
            sel._restore_adaptive(state)
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"state: malformed selector state ({type(exc).__name__}: {exc})") from None
        return sel

    # Pickling (Ray actors, torch.save, multiprocessing) goes through the state dict: arrays
    # travel as numpy buffers, and the lock is rebuilt on the other side.
    def __getstate__(self) -> dict[str, Any]:
        state = self.state_dict()
        if self._estimator is not None and not self._estimator.rebuilt_from_state:
            state["evidence_object"] = user_object(self._estimator)
        state.update(self._pickled_options())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        options = {name: state[name] for name in self._OPTIONS if name in state}
        fresh = self._rebuilt(state, state.get("evidence_object"), options)
        self.__dict__.update(fresh.__dict__)
