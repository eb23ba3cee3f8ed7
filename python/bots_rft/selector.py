"""The BOTS selector: one Beta posterior per task, updated each step from rollout results
(explicit evidence) and predictions for the other tasks (implicit evidence), and Thompson
sampling (or the posterior mean) to pick the tasks nearest a target success rate.

The posterior lives in two float64 arrays owned by the Rust core (`_core.Posterior`), which
updates and reads them in place, in parallel, with the GIL released; Python reads them through
read-only snapshot views. Every public method takes a lock, so one selector can be shared between
threads.
"""

from __future__ import annotations

import inspect
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from . import _core
from ._validation import (
    FloatArray,
    IntArray,
    as_bool,
    as_floats,
    as_ids,
    as_int,
    as_real,
    ids_in_pool,
    in_closed_unit,
    positive,
    prior,
)
from ._validation import exclusion as _exclusion
from .checkpoint import read_checkpoint, write_checkpoint
from .errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from .estimators import estimator_from_state
from .evidence import (
    Estimator,
    ImplicitEvidence,
    StepEvidence,
    as_estimator,
    checked_prediction,
    user_object,
)
from .parameters import DOTS_FIXED, MOPPS_FIXED
from .planning import Plan, allocate_rollouts, check_plan_args

STATE_FORMAT = "bots-rft/selector"
# 2: adds "stream" (the state of `take`); version-1 states load unchanged.
STATE_VERSION = 2
_MAX_SEED = 2**64 - 1
# What set_params may change between steps. The seed names the random stream and the priors
# are the point the posterior decays toward; both stay fixed for a selector's life.
SETTABLE_PARAMS = (
    "lam",
    "rho",
    "target",
    "n_rollouts",
    "thompson",
    "adaptive_rho",
    "tau",
    "adaptive_lam",
    "lag_discount",
)
# Adaptive ρ (the authors' rule): halve ρ when the estimator's predictions for a batch miss the
# observed rates by this much on average.
ADAPTIVE_RHO_MAE = 0.25
# How load_state_dict resolves a state whose parameters differ from this selector's.
ParamsOnLoad = Literal["error", "checkpoint", "current"]
_PARAMS_ON_LOAD = ("error", "checkpoint", "current")


class Picks(NamedTuple):
    """One selection's picks with what was drawn and why (:meth:`BOTS.explain`).

    ``theta``: each pick's sampled success rate (its Thompson draw, as the core computed it in
    float32) or its posterior mean (``thompson=False``); ``score``: −|θ − p*|, what the rule
    ranks by (with ``tau`` > 0 the rule samples from softmax(score / τ)); ``alpha``/``beta``: the
    posterior the draw came from; ``predicted``: the estimator's p̃ (NaN: none)."""

    ids: IntArray
    theta: FloatArray
    score: FloatArray
    alpha: FloatArray
    beta: FloatArray
    predicted: FloatArray


_SelectorT = TypeVar("_SelectorT", bound="_SelectorParams")


def _constructor_signature(init: Callable[..., None]) -> inspect.Signature:
    """The signature a class with this ``__init__`` is called with (``self`` dropped)."""
    sig = inspect.signature(init)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


class _SelectorParams:
    """What every BOTS backend shares (:class:`BOTS`, and the torch backend's ``TorchBOTS``, which
    is deliberately not a BOTS: BOTS's constructor dispatches on ``backend``): the validated
    parameters, their read-only properties, :meth:`set_params` and the presets. A backend's
    ``__init__`` calls :meth:`_init_params`, then builds only its own state (the posterior, passes,
    device). Hooks: ``_params_changed`` (after :meth:`set_params`) and ``_refuse_unsupported``
    (for a backend that lacks a parameter)."""

    if TYPE_CHECKING:
        # Every backend is built as ``cls(num_tasks, **parameters)`` (what the presets call).
        def __init__(self, num_tasks: int, **parameters: Any) -> None: ...

    def _init_params(
        self,
        num_tasks: int,
        *,
        lam: float,
        rho: float,
        target: float,
        n_rollouts: float,
        thompson: bool,
        prior_alpha: float | Any,
        prior_beta: float | Any,
        evidence: Estimator | ImplicitEvidence | None,
        seed: int,
        threads: int | None,
        prefetch: bool,
        adaptive_rho: bool,
        tau: float,
        adaptive_lam: bool,
        lag_discount: float,
    ) -> None:
        n = as_int(num_tasks, "num_tasks", minimum=1)
        self._num_tasks = n
        self._lam = in_closed_unit(lam, "lam")
        self._rho = in_closed_unit(rho, "rho")
        self._target = in_closed_unit(target, "target")
        self._tau = _check_tau(tau)
        self._n_rollouts = positive(n_rollouts, "n_rollouts")
        self._thompson = as_bool(thompson, "thompson")
        self._prior_alpha = prior(prior_alpha, "prior_alpha", n)
        self._prior_beta = prior(prior_beta, "prior_beta", n)
        self._estimator = as_estimator(evidence, n)
        self._seed = as_int(seed, "seed", minimum=0, maximum=_MAX_SEED)
        self._threads = _check_threads(threads)
        self._prefetch = as_bool(prefetch, "prefetch")
        self._adaptive_rho = as_bool(adaptive_rho, "adaptive_rho")
        # Times adaptive ρ has halved ρ: state, not a parameter (ρ in use = rho / 2**halvings).
        self._rho_halvings = 0
        self._adaptive_lam = as_bool(adaptive_lam, "adaptive_lam")
        self._lag_discount = _check_lag_discount(lag_discount)
        # Adaptive λ's smoothed drift statistic (None before the first update): state.
        self._drift: float | None = None
        self._num_selections = 0
        self._num_updates = 0
        self._lock = threading.RLock()

    # ----------------------------------------------------------------------------- presets
    @classmethod
    def mopps(cls: type[_SelectorT], num_tasks: int, **kwargs: Any) -> _SelectorT:
        """BOTS-MoPPS (paper appendix E.6): explicit evidence only, no discount, Thompson."""
        fixed = MOPPS_FIXED
        _reject_fixed(kwargs, "mopps", tuple(fixed))
        return cls(num_tasks, **fixed, **kwargs)

    @classmethod
    def dots(
        cls: type[_SelectorT], num_tasks: int, evidence: Estimator | ImplicitEvidence, **kwargs: Any
    ) -> _SelectorT:
        """BOTS-DOTS (paper appendix E.6): latest evidence only (λ=ρ=1), greedy on the mean."""
        fixed = DOTS_FIXED
        _reject_fixed(kwargs, "dots", (*fixed, "evidence"))
        if evidence is None:
            raise InvalidArgumentError("evidence: dots needs implicit evidence, got None", "evidence")
        return cls(num_tasks, **fixed, evidence=evidence, **kwargs)

    # ----------------------------------------------------------------------------- views
    @property
    def num_tasks(self) -> int:
        return self._num_tasks

    def __len__(self) -> int:
        return self._num_tasks

    @property
    def evidence(self) -> Estimator | ImplicitEvidence | None:
        """The estimator of implicit evidence, as passed (None: explicit evidence only)."""
        return user_object(self._estimator)

    @property
    def capability(self) -> float | None:
        """The interpolation estimator's current μ̃, or None (no estimate yet, or no
        interpolation evidence)."""
        return self._estimator.capability if self._estimator is not None else None

    @property
    def num_selections(self) -> int:
        return self._num_selections

    @property
    def num_updates(self) -> int:
        return self._num_updates

    @property
    def params(self) -> MappingProxyType[str, Any]:
        """λ, ρ, p*, n, the sampling rule and the seed (a read-only mapping: change them with
        :meth:`set_params`)."""
        return MappingProxyType(self._params_dict())

    def _params_dict(self) -> dict[str, Any]:
        return {
            "lam": self._lam,
            "rho": self._rho,
            "target": self._target,
            "n_rollouts": self._n_rollouts,
            "thompson": self._thompson,
            "seed": self._seed,
            "adaptive_rho": self._adaptive_rho,
            "tau": self._tau,
            "adaptive_lam": self._adaptive_lam,
            "lag_discount": self._lag_discount,
        }

    @property
    def lam(self) -> float:
        """λ, the discount toward the prior."""
        return self._lam

    @property
    def rho(self) -> float:
        """ρ, the weight of implicit evidence."""
        return self._rho

    @property
    def adaptive_lam(self) -> bool:
        """Whether λ follows the learner's drift (see :attr:`lam_in_use`)."""
        return self._adaptive_lam

    @property
    def lam_in_use(self) -> float:
        """The λ the next update uses: ``lam``, or with ``adaptive_lam`` ``lam`` scaled by the
        learner's observed drift.

        Adaptive λ: at each update, before it, each rolled-out task k's observed rate
        r_k = s_k / t_k is compared with its posterior predictive: mean m_k = α_k / (α_k + β_k),
        variance v_k = m_k (1 − m_k) (t_k + n_k) / (t_k (1 + n_k)) with n_k = α_k + β_k (the
        Beta-binomial). D = mean_k (r_k − m_k)² / v_k is about 1 when the posterior describes the
        learner, and grows when the learner has moved since the evidence was gathered. D̃ is D
        smoothed (D̃ ← 0.9 D̃ + 0.1 D; the first D as is), and the update uses
        λ_t = clip(λ · D̃, λ / 4, min(1, 4λ)): more forgetting while the learner drifts, less while
        it is steady. λ = 0 stays 0. Off by default."""
        return _lam_for(self._lam, self._drift) if self._adaptive_lam else self._lam

    @property
    def lag_discount(self) -> float:
        """δ in (0, 1]: evidence ``policy_lag`` policy versions old counts ``δ ** lag`` times (1:
        off, the default; see :meth:`update`)."""
        return self._lag_discount

    @property
    def tau(self) -> float:
        """τ: 0 for the nearest-to-target rule, > 0 for softmax sampling without replacement."""
        return self._tau

    @property
    def adaptive_rho(self) -> bool:
        """Whether ρ halves when the estimator's predictions miss (see :attr:`rho_in_use`)."""
        return self._adaptive_rho

    @property
    def rho_in_use(self) -> float:
        """The ρ updates use now: ``rho`` unless adaptive ρ has halved it.

        Adaptive ρ (``adaptive_rho=True``, as in the authors' ``difficulty_based`` selector): at
        each update, with the estimator's prediction p̃_k for the batch's tasks (after it has
        observed the batch) and their observed rates s_k / t_k,
        MAE = mean_k |p̃_k − s_k / t_k| over the batch's tasks that have a prediction; if
        MAE ≥ 0.25, ρ ← ρ / 2, starting with this update. ρ never grows back; ``set_params(rho=)``
        sets a new starting value and clears the halvings."""
        return self._rho * 0.5**self._rho_halvings

    @property
    def target(self) -> float:
        """p*, the target success rate."""
        return self._target

    @property
    def n_rollouts(self) -> float:
        """n, the pseudo sample size of implicit evidence."""
        return self._n_rollouts

    @property
    def thompson(self) -> bool:
        """Posterior sampling (True) or the posterior mean (False)."""
        return self._thompson

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def prior_alpha(self) -> float | FloatArray:
        return _readonly_prior(self._prior_alpha)

    @property
    def prior_beta(self) -> float | FloatArray:
        return _readonly_prior(self._prior_beta)

    @property
    def threads(self) -> int | None:
        return self._threads

    def set_params(self, **changes: Any) -> None:
        """Change any of :data:`SETTABLE_PARAMS` (``lam``, ``rho``, ``target``, ``n_rollouts``,
        ``thompson``, ``adaptive_rho``, ``tau``, ``adaptive_lam``, ``lag_discount``) between steps.

        Every value is validated before any is applied (a bad one raises and changes nothing).
        An update already made keeps the parameters it was made with; the new ones apply from the
        next ``select`` / ``update``, and :meth:`state_dict` records them, so a resumed run goes on
        with them.
        """
        unknown = sorted(set(changes) - set(SETTABLE_PARAMS))
        if unknown:
            name = unknown[0]
            why = (
                "is fixed for a selector's life"
                if name in ("seed", "prior_alpha", "prior_beta")
                else "is not a parameter"
            )
            raise InvalidArgumentError(
                f"{name}: {why}; set_params changes {', '.join(SETTABLE_PARAMS)}, got {name}={changes[name]!r}", name
            )
        checks = {
            "lam": in_closed_unit,
            "rho": in_closed_unit,
            "target": in_closed_unit,
            "n_rollouts": positive,
            "thompson": as_bool,
            "adaptive_rho": as_bool,
            "tau": lambda value, _name: _check_tau(value),
            "adaptive_lam": as_bool,
            "lag_discount": lambda value, _name: _check_lag_discount(value),
        }
        self._refuse_unsupported(changes)
        checked = {name: checks[name](value, name) for name, value in changes.items()}
        with self._lock:
            for name, value in checked.items():
                setattr(self, f"_{name}", value)
            if "rho" in checked:
                self._rho_halvings = 0
            self._params_changed()

    def _refuse_unsupported(self, changes: dict[str, Any]) -> None:
        """A backend that does not implement some of SETTABLE_PARAMS refuses them here."""

    def _params_changed(self) -> None:
        """Called under the lock after set_params applied its changes (a backend's hook)."""

    def _adopt_state(self, fresh: _SelectorParams, params: ParamsOnLoad, kept: tuple[str, ...]) -> None:
        """load_state_dict's last step, under the lock: refuse differing parameters
        (``params="error"``), keep this selector's ``kept`` attributes (``params="current"``), then
        become ``fresh`` (a selector built from the state) but for the lock and ``prefetch``."""
        differences = _param_differences(self, fresh)
        if differences and params == "error":
            raise CheckpointError(
                f"state: its parameters differ from this selector's ({'; '.join(differences)}); pass "
                "params='checkpoint' to take the state's, params='current' to keep this selector's"
            )
        if params == "current":
            for name in kept:
                setattr(fresh, f"_{name}", getattr(self, f"_{name}"))
        lock, prefetch = self._lock, self._prefetch
        self.__dict__.update(fresh.__dict__)
        self._lock, self._prefetch = lock, prefetch

    def _restore_counts(self, state: dict[str, Any]) -> None:
        """The selection and update counts of a checkpoint (``_from_state``)."""
        self._num_selections = as_int(state["num_selections"], "num_selections", minimum=0)
        self._num_updates = as_int(state["num_updates"], "num_updates", minimum=0)

    def _restore_adaptive(self, state: dict[str, Any]) -> None:
        """Adaptive ρ's halvings and adaptive λ's drift in a checkpoint (absent: an older state)."""
        self._rho_halvings = as_int(state.get("rho_halvings", 0), "rho_halvings", minimum=0)
        drift = state.get("drift")
        self._drift = None if drift is None else as_real(drift, "drift")

    def __setattr__(self, name: str, value: Any) -> None:
        # Assigning a parameter (sel.lam = 5) used to create a plain attribute the selector never
        # read; every property of the class is read-only, parameters change through set_params.
        # Internal state (a leading underscore) skips the check: it is set on every call.
        if name[0] != "_" and isinstance(getattr(type(self), name, None), property):
            hint = f"use set_params({name}=...)" if name in SETTABLE_PARAMS else "it is fixed for a selector's life"
            raise AttributeError(f"{name}: BOTS attributes are read-only; {hint}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if isinstance(getattr(type(self), name, None), property):
            raise AttributeError(f"{name}: BOTS attributes are read-only")
        object.__delattr__(self, name)


class BOTS(_SelectorParams):
    """Bayesian Online Task Selection over a pool of ``num_tasks`` tasks.

    Parameters map to the paper (section 3): ``lam`` is λ, the discount toward the prior;
    ``rho`` is ρ, the weight of implicit evidence; ``target`` is p* in [0, 1]; ``n_rollouts``
    is n, the pseudo sample size of implicit evidence; ``thompson`` picks posterior sampling
    (else the posterior mean); ``tau`` > 0 samples the batch without replacement from
    softmax(−|θ − p*| / τ) instead of taking the B tasks nearest p* (τ = 0, the paper's rule;
    τ → 0 reduces to it); ``adaptive_rho`` halves ρ when predictions miss (see
    :attr:`rho_in_use`); ``prior_alpha``/``prior_beta`` are α0/β0 (scalar or per task);
    ``evidence`` is an :class:`Interpolation`, any :class:`~bots_rft.evidence.Estimator`, or any
    :class:`ImplicitEvidence` plug-in (an object with ``predict``); the selector talks to all of
    them through the :class:`~bots_rft.evidence.Estimator` interface.
    ``threads=None`` uses every core; an int uses a pool of that size. Results never depend on it.
    ``backend="rust"`` (the default) runs on the Rust core; ``backend="torch"`` with
    ``device="cuda"`` (or ``"cpu"``) keeps the posterior in torch tensors on that device and
    returns a :class:`bots_rft.backends.torch.TorchBOTS` with the same API and checkpoints.
    ``prefetch=True`` (the default) runs each update's pass over the pool in the background,
    fused with the selection the next :meth:`select` is expected to ask for, so that ``select``
    finds it ready; ``prefetch=False`` runs that pass inside ``select``. Results are identical
    either way (same ids, same posterior, bit for bit); only where the time is spent differs.

    Parameters are read-only attributes (``sel.lam``, ``sel.rho``, ...): assigning one raises
    AttributeError. :meth:`set_params` changes λ, ρ, p*, n or the sampling rule between steps,
    validated and recorded in the next checkpoint.
    """

    def __new__(cls, *args: Any, backend: str = "rust", device: Any = None, **kwargs: Any) -> BOTS:
        # ``backend="torch"`` builds the torch implementation instead (same API, same checkpoint
        # layout; see :mod:`bots_rft.backends.torch`). It is a separate class, so Python does not
        # run this class's ``__init__`` on it.
        if _torch_backend(backend, device):
            from .backends.torch import TorchBOTS

            return TorchBOTS(*args, device=device, **kwargs)  # type: ignore[return-value]
        return super().__new__(cls)

    def __init__(
        self,
        num_tasks: int,
        *,
        backend: str = "rust",
        device: Any = None,
        lam: float = 0.1,
        rho: float = 0.1,
        target: float = 0.5,
        n_rollouts: float = 16,
        thompson: bool = True,
        prior_alpha: float | Any = 1.0,
        prior_beta: float | Any = 1.0,
        evidence: Estimator | ImplicitEvidence | None = None,
        seed: int = 0,
        threads: int | None = None,
        prefetch: bool = True,
        adaptive_rho: bool = False,
        tau: float = 0.0,
        adaptive_lam: bool = False,
        lag_discount: float = 1.0,
    ) -> None:
        self._init_params(
            num_tasks,
            lam=lam,
            rho=rho,
            target=target,
            n_rollouts=n_rollouts,
            thompson=thompson,
            prior_alpha=prior_alpha,
            prior_beta=prior_beta,
            evidence=evidence,
            seed=seed,
            threads=threads,
            prefetch=prefetch,
            adaptive_rho=adaptive_rho,
            tau=tau,
            adaptive_lam=adaptive_lam,
            lag_discount=lag_discount,
        )
        n = self._num_tasks
        self._prior_alpha, self._prior_beta = _frozen_prior(self._prior_alpha), _frozen_prior(self._prior_beta)
        alpha, beta = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
        alpha[:], beta[:] = self._prior_alpha, self._prior_beta
        self._posterior = _core.Posterior(alpha, beta)
        # An update is validated (and the estimator advanced) when `update` is called; its O(N)
        # pass then runs in the background (prefetch) fused with the next selection, or, without
        # prefetch, waits here for the next `select`, which runs both in one fused pass. Anything
        # that reads the posterior settles both first.
        self._pending: _core.UpdateSpec | None = None
        self._pass: _core.Pass | None = None
        self._pass_role: _Speculation | _Draw | None = None
        # The next selection computed ahead of time, for `select` to take if it asks for it.
        self._speculation: _Speculation | None = None
        # What the last `select` asked for (batch size, how many tasks it excluded): the shape of
        # the next speculation. None until the first `select`.
        self._last_request: tuple[int, int] | None = None
        # Loosened k-th distances of past selections by batch size: let a selection prune from its
        # first task. Only speed depends on them, so they are not checkpointed.
        self._bound_hints: dict[int, float] = {}
        self._stream = _Stream()

    # `__new__` takes (*args, backend=, device=, **kwargs) to pick the backend; without this,
    # `inspect.signature(BOTS)` (IDEs, help(), tools that read a class's parameters) would show that
    # instead of the constructor's real parameters.
    __signature__ = _constructor_signature(__init__)

    # ----------------------------------------------------------------------------- the core's posterior
    # α and β are memory the core owns (`_core.Posterior`); these four are the only places that
    # touch it. A view is a read-only snapshot: passes started later never change it.
    @property
    def _alpha(self) -> FloatArray:
        return self._posterior.alpha

    @property
    def _beta(self) -> FloatArray:
        return self._posterior.beta

    def _run_pass(
        self, update: _core.UpdateSpec | None, spec: _core.SelectSpec | None
    ) -> tuple[IntArray, float, FloatArray] | None:
        """One pass now: the update (if any), then the selection (if any); (ids, k-th distance,
        distances) or None."""
        return self._posterior.step(update, spec, threads=self._threads)

    def _start_pass(self, update: _core.UpdateSpec | None, spec: _core.SelectSpec | None) -> _core.Pass:
        """`_run_pass` in the background; whatever reads the posterior next waits for it."""
        return self._posterior.start_step(update, spec, threads=self._threads)

    # ----------------------------------------------------------------------------- views
    @property
    def alpha(self) -> FloatArray:
        """α of every task: a read-only snapshot (a copy), with every update made so far applied.
        The posterior itself is never shared, because background passes write it; for a few
        tasks use :meth:`posterior`."""
        with self._lock:
            self._flush_locked()
            return _readonly(self._alpha.copy())

    @property
    def beta(self) -> FloatArray:
        """β of every task (see :attr:`alpha`)."""
        with self._lock:
            self._flush_locked()
            return _readonly(self._beta.copy())

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
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Wait for any background pass and apply any pending update. The selector stays usable;
        this only guarantees that no work of it is running. Also called by ``with BOTS(...)``."""
        self.flush()

    def __enter__(self) -> BOTS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_locked(self) -> None:
        self._settle()
        if self._pending is not None:
            self._run_pass(self._pending, None)
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

    def _start(self, update: _core.UpdateSpec | None, role: _Speculation | _Draw | None) -> None:
        """Start a pass (the pending update, if any, and a selection, if any) in the background,
        or, without prefetch, run it now. Nothing else may be in flight."""
        assert self._pass is None
        spec = None if role is None else self._select_spec(role.k, role.counter)
        if update is None and spec is None:
            return
        if self._prefetch:
            self._pass = self._start_pass(update, spec)
            self._pass_role = role
            return
        self._file(role, self._run_pass(update, spec))

    def _select_spec(self, k: int, counter: int, mask: Any = None, ids: Any = None) -> _core.SelectSpec:
        return _core.SelectSpec(
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

    def _update_spec(self, batch: _core.Batch, evidence: dict[str, Any], rho: float, lam: float) -> _core.UpdateSpec:
        return _core.UpdateSpec(
            batch,
            prior_alpha=self._prior_alpha,
            prior_beta=self._prior_beta,
            lam=lam,
            rho=rho,
            n_rollouts=self._n_rollouts,
            **evidence,
        )

    def mean(self) -> FloatArray:
        """Posterior means α / (α + β) (a new array)."""
        with self._lock:
            self._flush_locked()
            return self._alpha / (self._alpha + self._beta)

    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        """(α, β) of the given tasks (new arrays): cheap per-pick information, where
        :attr:`alpha` and :attr:`beta` copy the whole pool."""
        ids = ids_in_pool(task_ids, self._num_tasks)
        with self._lock:
            self._flush_locked()
            return self._alpha[ids], self._beta[ids]

    def predicted(self) -> FloatArray | None:
        """p̃ the interpolation estimator would give every task now (NaN = none), or None."""
        with self._lock:
            return self._estimator.predict_all() if self._estimator is not None else None

    # ----------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """The ``batch_size`` distinct tasks whose sampled (or mean) success rate is nearest the
        target, best first, ties to the lower index. ``exclude``: task ids or a boolean mask of
        length ``num_tasks``. Never changes the posterior; advances the random stream.

        :meth:`explain` then says, for the picks, what was drawn and why.

        With prefetch, the answer is usually ready: computed in the background since the last
        update. It is used only if it provably equals what this call computes (same random stream
        position and parameters, and enough ranked tasks left after the exclusions); otherwise
        the selection is computed here. The ids are the same either way."""
        k = as_int(batch_size, "batch_size", minimum=0)
        mask, ids = _exclusion(exclude, self._num_tasks)
        with self._lock:
            chosen = self._take_prefetched(k) if mask is None and ids is None else None
            if chosen is None:
                self._settle()
                chosen = self._reuse(k, mask, ids)
            if chosen is None:
                spec = self._select_spec(k, self._num_selections, mask, ids)
                result = self._run_pass(self._pending, spec)
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

    def plan(self, rollout_budget: int, n_min: int, n_max: int, exclude: Any = None) -> Plan:
        """Tasks and a rollout count for each, chosen together: the plan that maximises the
        expected number of informative groups (0 < successes < n) under the draws, spending at
        most ``rollout_budget`` rollouts with ``n_min <= counts <= n_max``
        (:mod:`bots_rft.planning` has the objective and why the optimum is exact).

        The candidates are the selection rule's ranking (as :meth:`select` makes it, with
        ``exclude`` applied) and θ is what it ranked by, so a plan consumes one selection of the
        random stream, is deterministic per seed, and :meth:`explain` describes its picks. With
        ``n_min == n_max == n`` and ``rollout_budget == B * n`` it returns ``select(B)``'s ids,
        each with n rollouts. Returns a :class:`~bots_rft.planning.Plan` (``ids``, ``counts``)."""
        budget, lo, hi = check_plan_args(rollout_budget, n_min, n_max)
        mask, ids = _exclusion(exclude, self._num_tasks)
        excluded = int(ids.size) if ids is not None else (int(np.count_nonzero(mask)) if mask is not None else 0)
        k = min(budget // lo, self._num_tasks - excluded)
        with self._lock:
            ranked = self.select(k, exclude=exclude)
            self._flush_locked()
            theta = self._explain(ranked, self._num_selections - 1).theta
            counts = allocate_rollouts(theta, budget, lo, hi)
        return Plan(ranked[: counts.size].copy(), counts)

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
        alpha, beta = self._alpha[chosen], self._beta[chosen]
        theta: FloatArray
        if self._thompson:
            draws = _core.thompson_draws_at(self._alpha, self._beta, chosen, self._seed, counter)
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
        self._remember_hint(role.k, kth)
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
                    self._next_draw(size, skipped)
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
    def update(
        self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None, *, policy_lag: Any = None
    ) -> None:
        """Fold one step's rollout results into every task's posterior (the paper's eq. 1).

        ``task_ids`` may repeat (their counts are summed); ``successes`` and ``trials`` may be
        fractional (rewards in [0, 1]); ``trials`` is a scalar or one value per entry.
        ``predicted`` (length ``num_tasks``, NaN = none) replaces the configured estimator for
        this step: the estimator neither observes this batch nor predicts. Tasks in flight
        (:meth:`take`) that get evidence here are no longer in flight.

        ``policy_lag`` (asynchronous trainers): how many policy versions old the rollouts are, a
        non-negative int or one per entry. Each entry's successes and trials are scaled by
        ``lag_discount ** lag``: stale evidence counts as fewer rollouts of the same observed
        rate. With the default ``lag_discount=1`` it changes nothing; ``None`` means lag 0.
        """
        ids, succ, tri = feedback_arrays(task_ids, successes, trials)
        pred = None if predicted is None else as_floats(predicted, "predicted", self._num_tasks)
        succ, tri = self._lag_weighted(succ, tri, policy_lag, ids.size)
        self._apply(ids, succ, tri, pred)

    def _lag_weighted(
        self, succ: FloatArray, tri: FloatArray, policy_lag: Any, size: int
    ) -> tuple[FloatArray, FloatArray]:
        return lag_weighted(succ, tri, policy_lag, size, self._lag_discount)

    def update_rewards(
        self,
        task_ids: Any,
        rewards: Any,
        *,
        reward_range: tuple[float, float] | None = None,
        success_threshold: float | None = None,
        policy_lag: Any = None,
    ) -> None:
        """``update`` from a reward matrix [B, n] (or a list of per-task reward sequences of
        varying length): successes are row sums of the rewards as evidence, trials row lengths.

        Graded rewards in [0, 1] (partial credit, e.g. tests passed / total) are *fractional
        evidence*: a reward r adds r successes and 1 − r failures, the expected Bernoulli counts
        of a rollout that succeeds with probability r. For 0/1 rewards this is the plain count,
        and the Beta stays conjugate (the update is the same linear rule; see the README).

        Rewards outside [0, 1] (format penalties, rewards in [−1, 1]) need an explicit mapping,
        never a silent clip: ``reward_range=(low, high)`` declares their range and rescales them
        to (r − low) / (high − low) (a reward outside the declared range is an error);
        ``success_threshold=x`` counts a rollout as a success when its reward is ≥ x (any finite
        rewards). Without either, rewards must lie in [0, 1].
        ``policy_lag``: as in :meth:`update`."""
        ids = as_ids(task_ids, "task_ids")
        succ, tri = _reward_counts(rewards, len(ids), _reward_map(reward_range, success_threshold))
        succ, tri = self._lag_weighted(succ, tri, policy_lag, ids.size)
        self._apply(ids, succ, tri, None)

    def _apply(self, ids: IntArray, succ: FloatArray, tri: FloatArray, pred: FloatArray | None) -> None:
        with self._lock:
            batch = _core.aggregate(self._num_tasks, ids, succ, tri)  # validates, sums repeats
            estimator = self._estimator if pred is None else None
            if pred is not None:  # replaces the estimator for this step: it neither observes nor predicts
                step = StepEvidence({"predicted": checked_prediction(pred, self._num_tasks)})
            elif estimator is not None:
                step = estimator.observe(batch)
            else:
                step = StepEvidence()
            halvings = self._rho_halvings + int(self._adaptive_rho and _predictions_miss(step, batch))
            # Validated: from here on nothing can fail. Finish the work in flight and any older
            # pending update, then start this one's pass (with prefetch, fused with the selection
            # the next select is expected to ask for) or leave it pending for the next pass.
            self._flush_locked()
            drift = self._drift
            if self._adaptive_lam:  # reads the posterior the batch lands on: after the flush
                drift = _smoothed_drift(drift, self._alpha[batch.ids], self._beta[batch.ids], batch)
            spec = self._update_spec(
                batch,
                step.update_kwargs,
                rho=self._rho * 0.5**halvings,
                lam=_lam_for(self._lam, drift) if self._adaptive_lam else self._lam,
            )
            self._speculation = None
            if estimator is not None:
                estimator.commit(step)
            self._rho_halvings = halvings
            self._drift = drift
            self._num_updates += 1
            self._stream.in_flight.difference_update(batch.ids.tolist())
            if self._prefetch:
                self._start(spec, self._expected_selection())
            else:
                self._pending = spec

    # ----------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: posterior, priors, parameters, estimator, RNG position."""
        with self._lock:
            self._flush_locked()
            return selector_state(
                params=self._params_dict(),
                prior_alpha=self._prior_alpha,
                prior_beta=self._prior_beta,
                alpha=self._alpha,
                beta=self._beta,
                num_selections=self._num_selections,
                num_updates=self._num_updates,
                evidence=self._estimator.state_dict() if self._estimator is not None else None,
                rho_halvings=self._rho_halvings,
                drift=self._drift,
                stream=self._stream.state_dict(),
            )

    def load_state_dict(self, state: dict[str, Any], *, params: ParamsOnLoad = "error") -> None:
        """Restore a :meth:`state_dict` of a selector over the same number of tasks. Validates
        everything before changing anything.

        ``params`` says what happens when the state's parameters (λ, ρ, p*, n, sampling rule,
        seed, priors) differ from this selector's: ``"error"`` (the default) refuses with a
        :class:`CheckpointError` listing the differences; ``"checkpoint"`` takes the state's;
        ``"current"`` keeps this selector's and takes only the posterior, the random stream's
        position and the estimator's state. Equal parameters load the same way under all three.
        The default refuses because either silent choice is wrong for someone: a resume with a
        changed config would quietly run with the old values, or a mistyped config would quietly
        replace the values a run was tuned with.
        """
        _check_params_on_load(params)
        fresh = BOTS._from_state(state, threads=self._threads, evidence=user_object(self._estimator))
        if fresh._num_tasks != self._num_tasks:
            raise CheckpointError(f"state: has {fresh._num_tasks} tasks, this selector has {self._num_tasks}")
        with self._lock:
            self._flush_locked()
            self._adopt_state(fresh, params, (*SETTABLE_PARAMS, "seed", "prior_alpha", "prior_beta"))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically (temporary file, fsync, rename). ``path`` is a file;
        missing parent directories are created."""
        write_checkpoint(path, self.state_dict())

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
        if _torch_backend(backend, device):
            from .backends.torch import TorchBOTS

            return TorchBOTS.load(path, device=device, evidence=evidence)  # type: ignore[return-value]
        return cls._from_state(read_checkpoint(path), threads=threads, evidence=evidence, prefetch=prefetch)

    @classmethod
    def _from_state(cls, state: dict[str, Any], *, threads: int | None, evidence: Any, prefetch: bool = True) -> BOTS:
        _check_state_header(state)
        try:
            n = int(state["num_tasks"])
            sel = cls(n, threads=threads, prefetch=prefetch, **_state_params(state, state["params"], evidence, n))
            alpha, beta = _state_posterior(state, n)
            sel._posterior.assign(
                np.ascontiguousarray(alpha, dtype=np.float64), np.ascontiguousarray(beta, dtype=np.float64)
            )
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
        state["threads"] = self._threads
        state["prefetch"] = self._prefetch
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        fresh = BOTS._from_state(
            state,
            threads=state.get("threads"),
            evidence=state.get("evidence_object"),
            prefetch=state.get("prefetch", True),
        )
        self.__dict__.update(fresh.__dict__)


#: Adaptive λ's smoothing of the drift statistic, and how far λ may move from its setting.
DRIFT_MOMENTUM = 0.9
LAM_RANGE = 4.0


def _torch_backend(backend: Any, device: Any) -> bool:
    """Whether ``backend`` names the torch backend; refuses an unknown backend, and a device
    given to the Rust one (it has none to put the posterior on)."""
    if backend == "torch":
        return True
    if backend != "rust":
        raise InvalidArgumentError(f"backend: expected 'rust' or 'torch', got {backend!r}", "backend")
    if device is not None:
        raise InvalidArgumentError(
            f"device: only the torch backend takes a device (backend='torch'), got {device!r}", "device"
        )
    return False


def lag_weighted(
    succ: FloatArray, tri: FloatArray, policy_lag: Any, size: int, lag_discount: float
) -> tuple[FloatArray, FloatArray]:
    """Successes and trials scaled by ``lag_discount ** lag`` (unchanged when it is 1): the
    weighting of evidence from stale policies, shared by BOTS and the sharded selector."""
    lag = _check_policy_lag(policy_lag, size)
    if lag is None or lag_discount == 1.0 or not np.any(lag):
        return succ, tri
    if succ.size != size or tri.size not in (1, size):
        return succ, tri  # the core reports the length mismatch with its own message
    # Clamped above 0: evidence of any age stays evidence (trials must be > 0), just negligible.
    weight = np.maximum(lag_discount ** lag.astype(np.float64), np.finfo(np.float64).tiny)
    return succ * weight, np.broadcast_to(tri, (size,)) * weight


def _smoothed_drift(previous: float | None, alpha: FloatArray, beta: FloatArray, batch: _core.Batch) -> float | None:
    """Adaptive λ's statistic after this batch (see :attr:`BOTS.lam_in_use`)."""
    n = alpha + beta
    mean = alpha / n
    trials = batch.trials
    variance = mean * (1.0 - mean) * (trials + n) / (trials * (1.0 + n))
    ok = variance > 0
    if not ok.any():
        return previous
    d = float(np.mean((batch.successes[ok] / trials[ok] - mean[ok]) ** 2 / variance[ok]))
    return d if previous is None else DRIFT_MOMENTUM * previous + (1.0 - DRIFT_MOMENTUM) * d


def _lam_for(lam: float, drift: float | None) -> float:
    if drift is None or lam == 0.0:
        return lam
    return float(min(max(lam * drift, lam / LAM_RANGE), min(1.0, LAM_RANGE * lam)))


def _check_lag_discount(value: Any) -> float:
    delta = as_real(value, "lag_discount")
    if not (0.0 < delta <= 1.0):
        raise InvalidArgumentError(f"lag_discount: must be in (0, 1], got {value!r}", "lag_discount")
    return delta


def _check_policy_lag(value: Any, size: int) -> IntArray | None:
    """``policy_lag`` as one non-negative int per entry (None: no lag)."""
    if value is None:
        return None
    if np.ndim(value) == 0:
        scalar = value.item() if isinstance(value, np.ndarray | np.generic) else value
        lag = as_int(scalar, "policy_lag", minimum=0)
        return np.full(size, lag, dtype=np.int64)
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise InvalidTypeError(
            f"policy_lag: must be an int or a 1-D array of ints, got {arr.dtype} of shape {arr.shape}", "policy_lag"
        )
    if arr.size != size:
        raise InvalidArgumentError(
            f"policy_lag: has {arr.size} entries, expected {size} (one per task id)", "policy_lag"
        )
    if arr.size and int(arr.min()) < 0:
        raise InvalidArgumentError(f"policy_lag: must be >= 0, got {int(arr.min())}", "policy_lag")
    return arr.astype(np.int64)


def _check_tau(value: Any) -> float:
    tau = as_real(value, "tau")
    if not (math.isfinite(tau) and tau >= 0.0):
        raise InvalidArgumentError(f"tau: must be a finite number >= 0, got {value!r}", "tau")
    return tau


def selector_state(
    *,
    params: dict[str, Any],
    prior_alpha: float | FloatArray,
    prior_beta: float | FloatArray,
    alpha: FloatArray,
    beta: FloatArray,
    num_selections: int,
    num_updates: int,
    evidence: dict[str, Any] | None,
    rho_halvings: int = 0,
    drift: float | None = None,
    stream: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A selector's checkpoint state (:meth:`BOTS.state_dict`'s layout, with copies of the arrays):
    the one place that layout is written, for any holder of a BOTS posterior."""
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "num_tasks": len(alpha),
        "params": dict(params),
        "prior_alpha": _copy(prior_alpha),
        "prior_beta": _copy(prior_beta),
        "alpha": np.array(alpha, dtype=np.float64),
        "beta": np.array(beta, dtype=np.float64),
        "num_selections": num_selections,
        "num_updates": num_updates,
        "evidence": evidence,
        "rho_halvings": rho_halvings,
        "drift": drift,
        "stream": stream,
    }


def _predictions_miss(step: StepEvidence, batch: _core.Batch) -> bool:
    """Adaptive ρ's test: the step's predictions for the batch's tasks are off by ≥ 0.25 on
    average (tasks without a prediction left out; no prediction at all: no)."""
    ids = batch.ids
    predicted = step.predictions_at(ids)
    if predicted is None:
        return False
    has = ~np.isnan(predicted)
    if not has.any():
        return False
    observed = batch.successes[has] / batch.trials[has]
    return bool(np.mean(np.abs(predicted[has] - observed)) >= ADAPTIVE_RHO_MAE)


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def _frozen_prior(p: float | FloatArray) -> float | FloatArray:
    """A per-task prior as read-only memory the core shares with every update's pass."""
    return _core.frozen(p) if isinstance(p, np.ndarray) else p


def _readonly_prior(p: float | FloatArray) -> float | FloatArray:
    return _readonly(p) if isinstance(p, np.ndarray) else p


def _param_differences(ours: _SelectorParams, theirs: _SelectorParams) -> list[str]:
    """'name: this selector's value vs the state's' for every parameter that differs."""
    out = []
    mine, other = ours._params_dict(), theirs._params_dict()
    for name in mine:
        if mine[name] != other[name]:
            out.append(f"{name}: {mine[name]!r} here, {other[name]!r} in the state")
    for name in ("prior_alpha", "prior_beta"):
        a, b = getattr(ours, f"_{name}"), getattr(theirs, f"_{name}")
        if np.shape(a) != np.shape(b) or not np.array_equal(a, b):
            out.append(f"{name}: differs ({_prior_text(a)} here, {_prior_text(b)} in the state)")
    return out


def _prior_text(p: float | FloatArray) -> str:
    return repr(p) if not isinstance(p, np.ndarray) else f"an array of {p.size} values"


def _copy(p: float | FloatArray) -> float | FloatArray:
    return p.copy() if isinstance(p, np.ndarray) else p


def _check_params_on_load(params: Any) -> None:
    if params not in _PARAMS_ON_LOAD:
        raise InvalidArgumentError(
            f"params: must be one of {', '.join(map(repr, _PARAMS_ON_LOAD))}, got {params!r}", "params"
        )


def _check_state_header(state: Any) -> None:
    """A selector state of a version this code reads, or CheckpointError."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise CheckpointError(f"state: not a bots-rft selector state (format {_get(state, 'format')!r})")
    version = state.get("version")
    if not isinstance(version, int) or version > STATE_VERSION:
        raise CheckpointError(f"state: version {version!r} is newer than this bots-rft reads ({STATE_VERSION})")


def _state_params(state: dict[str, Any], p: dict[str, Any], evidence: Any, n: int) -> dict[str, Any]:
    """The constructor arguments a checkpoint records (``p``: its params), the estimator rebuilt
    from it; parameters newer than the state take their defaults."""
    ev = user_object(estimator_from_state(state.get("evidence"), evidence, n))
    return {
        "lam": p["lam"],
        "rho": p["rho"],
        "target": p["target"],
        "n_rollouts": p["n_rollouts"],
        "thompson": p["thompson"],
        "prior_alpha": state["prior_alpha"],
        "prior_beta": state["prior_beta"],
        "evidence": ev,
        "seed": p["seed"],
        "adaptive_rho": p.get("adaptive_rho", False),
        "tau": p.get("tau", 0.0),
        "adaptive_lam": p.get("adaptive_lam", False),
        "lag_discount": p.get("lag_discount", 1.0),
    }


def _state_posterior(state: dict[str, Any], n: int) -> tuple[FloatArray, FloatArray]:
    """α and β of a checkpoint, checked finite and positive."""
    alpha = as_floats(state["alpha"], "alpha", n)
    beta = as_floats(state["beta"], "beta", n)
    for name, arr in (("alpha", alpha), ("beta", beta)):
        if not np.all(np.isfinite(arr) & (arr > 0)):
            raise CheckpointError(f"{name}: the state holds non-positive or non-finite values")
    return alpha, beta


def _get(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else type(state).__name__


def _reject_fixed(kwargs: dict[str, Any], preset: str, fixed: tuple[str, ...]) -> None:
    clash = sorted(set(kwargs) & set(fixed))
    if clash:
        raise InvalidArgumentError(
            f"{clash[0]}: the {preset} preset fixes {', '.join(fixed)}; got {clash[0]}={kwargs[clash[0]]!r}", clash[0]
        )


def _check_threads(threads: Any) -> int | None:
    if threads is None:
        return None
    t = as_int(threads, "threads", minimum=1, maximum=1024)
    return t


def feedback_arrays(task_ids: Any, successes: Any, trials: Any) -> tuple[IntArray, FloatArray, FloatArray]:
    """``update``'s inputs as arrays (trials: one value, or one per entry), each checked and
    named; the lengths are the core's to check. Shared by every backend's ``update``."""
    ids = as_ids(task_ids, "task_ids")
    succ = as_floats(successes, "successes")
    if np.ndim(trials) == 0:
        return ids, succ, np.array([_scalar_trials(trials)], dtype=np.float64)
    return ids, succ, as_floats(trials, "trials")


def _scalar_trials(trials: Any) -> float:
    value = trials.item() if isinstance(trials, np.ndarray | np.generic) else trials
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidTypeError(f"trials: must be a number or an array, got {value!r}", "trials")
    return float(value)


class _RewardMap(NamedTuple):
    """How rewards become evidence in [0, 1]: rescaled from [low, high], or thresholded."""

    low: float = 0.0
    high: float = 1.0
    threshold: float | None = None

    def evidence(self, values: np.ndarray, row: int | None = None) -> np.ndarray:
        if self.threshold is not None:
            bad = ~np.isfinite(values)
            if bad.any():
                _reject_reward(values, bad, row, "must be finite")
            return (values >= self.threshold).astype(np.float64)
        bad = ~((values >= self.low) & (values <= self.high))  # NaN fails both comparisons
        if bad.any():
            _reject_reward(values, bad, row, f"must be in [{self.low:g}, {self.high:g}]")
        if (self.low, self.high) == (0.0, 1.0):
            return values
        return (values - self.low) / (self.high - self.low)


def _reward_map(reward_range: Any, success_threshold: Any) -> _RewardMap:
    if reward_range is not None and success_threshold is not None:
        raise InvalidArgumentError("reward_range: give reward_range or success_threshold, not both", "reward_range")
    if success_threshold is not None:
        threshold = as_real(success_threshold, "success_threshold")
        if not math.isfinite(threshold):
            raise InvalidArgumentError(f"success_threshold: must be finite, got {threshold}", "success_threshold")
        return _RewardMap(threshold=threshold)
    if reward_range is None:
        return _RewardMap()
    try:
        low, high = (as_real(v, "reward_range") for v in reward_range)
    except (TypeError, ValueError):
        raise InvalidTypeError(
            f"reward_range: must be a pair (low, high), got {reward_range!r}", "reward_range"
        ) from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise InvalidArgumentError(
            f"reward_range: must be finite with low < high, got {reward_range!r}", "reward_range"
        )
    return _RewardMap(low, high)


def _reject_reward(values: np.ndarray, bad: np.ndarray, row: int | None, why: str) -> None:
    where = tuple(int(x) for x in np.argwhere(bad)[0])
    pos = where if row is None else (row, *where)
    raise InvalidArgumentError(f"rewards: {why}, got {values[where]} at {pos}", "rewards")


def _reward_counts(rewards: Any, b: int, mapping: _RewardMap | None = None) -> tuple[FloatArray, FloatArray]:
    """Successes (row sums of the rewards as evidence) and trials (row lengths), from a [B, n]
    array or B sequences of varying length."""
    mapping = mapping or _RewardMap()
    try:
        arr: np.ndarray | None = np.asarray(rewards, dtype=np.float64)
    except (ValueError, TypeError):  # rows of different lengths
        arr = None
    if arr is not None:  # the common case, checked and summed without a loop over rows
        if arr.ndim != 2:
            raise InvalidTypeError(f"rewards: must be 2-D [batch, rollouts], got shape {arr.shape}", "rewards")
        if arr.shape[0] != b:
            raise InvalidTypeError(f"rewards: has {arr.shape[0]} rows, expected {b} (one per task id)", "rewards")
        if arr.shape[1] == 0 and b:
            raise InvalidArgumentError("rewards: rows are empty (no rollouts)", "rewards")
        return mapping.evidence(arr).sum(axis=1), np.full(b, float(arr.shape[1]))
    if not isinstance(rewards, (list, tuple)) or len(rewards) != b:
        raise InvalidTypeError(f"rewards: must be a [batch, rollouts] array, got {type(rewards).__name__}", "rewards")
    rows = [as_floats(r, "rewards") for r in rewards]
    for i, r in enumerate(rows):
        if r.size == 0:
            raise InvalidArgumentError(f"rewards: row {i} is empty (no rollouts)", "rewards")
    evidence = [mapping.evidence(r, row=i) for i, r in enumerate(rows)]
    return np.array([e.sum() for e in evidence]), np.array([float(r.size) for r in rows])


# At most this many tasks beyond the batch size are ranked ahead of time to absorb exclusions.
_MAX_SPECULATIVE_EXTRA = 65_536


@dataclass(eq=False)
class _Speculation:
    """A selection computed ahead of time for the `select` expected next."""

    k: int  # tasks ranked
    counter: int
    target: float
    thompson: bool
    tau: float
    seed: int
    candidates: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    kth: float = math.inf


@dataclass(eq=False)
class _Draw:
    """One draw of `take`: a ranking of `k` tasks from which at most `quota` are handed out."""

    k: int  # tasks ranked
    counter: int
    quota: int
    candidates: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    kth: float = math.inf
    cursor: int = 0  # next rank to look at
    handed: int = 0
    # Tasks in flight when the draw was made or handed out since: the draw's ranking of them
    # predates evidence that is on its way, so it never hands them out.
    blocked: set[int] = field(default_factory=set)
    _ranked: list[int] | None = None

    def left(self) -> int:
        return self.quota - self.handed

    def exhausted(self) -> bool:
        return self.handed >= self.quota or self.cursor >= len(self.candidates)

    def hand_out(self, n: int, skip: _Skip) -> list[int]:
        """Up to ``n`` tasks, best first, none skipped; marks them in flight."""
        if self._ranked is None:
            self._ranked = self.candidates.tolist()
        ranked, out = self._ranked, list[int]()
        while len(out) < n and self.handed < self.quota and self.cursor < len(ranked):
            task = ranked[self.cursor]
            self.cursor += 1
            if task not in self.blocked and not skip.skips(task):
                skip.in_flight.add(task)
                out.append(task)
                self.handed += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "counter": self.counter,
            "quota": self.quota,
            "candidates": np.asarray(self.candidates, dtype=np.int64).copy(),
            "kth": self.kth,
            "cursor": self.cursor,
            "handed": self.handed,
            "blocked": np.array(sorted(self.blocked), dtype=np.int64),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any], n: int) -> _Draw:
        candidates = _stored_ids(state, "candidates", n)
        draw = cls(
            as_int(state["k"], "k", minimum=0),
            as_int(state["counter"], "counter", minimum=0),
            as_int(state["quota"], "quota", minimum=1),
            candidates,
            float(state["kth"]),
        )
        draw.cursor = as_int(state["cursor"], "cursor", minimum=0, maximum=candidates.size)
        draw.handed = as_int(state["handed"], "handed", minimum=0, maximum=draw.quota)
        draw.blocked = set(_stored_ids(state, "blocked", n).tolist())
        return draw


class _Skip:
    """The tasks one `take` call may not hand out: those in flight and those it excludes."""

    def __init__(self, in_flight: set[int], mask: np.ndarray | None, ids: np.ndarray | None) -> None:
        self.in_flight = in_flight
        self._mask = mask
        self._ids: set[int] = set(ids.tolist()) if ids is not None else set()

    def skips(self, task: int) -> bool:
        if task in self.in_flight or task in self._ids:
            return True
        return bool(self._mask[task]) if self._mask is not None else False

    def count(self) -> int:
        """How many distinct tasks are skipped (O(pool size) for a mask)."""
        if self._mask is not None:
            return int(np.count_nonzero(self._mask)) + sum(1 for t in self.in_flight if not self._mask[t])
        return len(self.in_flight | self._ids) if self._ids else len(self.in_flight)


@dataclass(eq=False)
class _Stream:
    """`take`'s state: tasks handed out and awaiting evidence, the draw being handed out, and the
    next draw once made."""

    in_flight: set[int] = field(default_factory=set)
    current: _Draw | None = None
    prepared: _Draw | None = None

    def state_dict(self) -> dict[str, Any] | None:
        if not self.in_flight and self.current is None and self.prepared is None:
            return None
        return {
            "in_flight": np.array(sorted(self.in_flight), dtype=np.int64),
            "current": None if self.current is None else self.current.state_dict(),
            "prepared": None if self.prepared is None else self.prepared.state_dict(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any] | None, n: int) -> _Stream:
        if state is None:
            return cls()
        in_flight = _stored_ids(state, "in_flight", n)
        return cls(
            set(in_flight.tolist()),
            None if state.get("current") is None else _Draw.from_state_dict(state["current"], n),
            None if state.get("prepared") is None else _Draw.from_state_dict(state["prepared"], n),
        )


def _stored_ids(state: dict[str, Any], key: str, n: int) -> IntArray:
    """The task ids a checkpoint's stream holds under ``key``; ids outside the pool mean the
    checkpoint is not this selector's (or is corrupt)."""
    try:
        return ids_in_pool(state[key], n, key)
    except InvalidArgumentError as exc:
        raise CheckpointError(f"stream: {exc}") from None


def _sorted_contains(sorted_ids: IntArray, values: IntArray) -> npt.NDArray[np.bool_]:
    """For each value, whether it is in ``sorted_ids`` (ascending, distinct)."""
    at = np.searchsorted(sorted_ids, values)
    return sorted_ids[np.minimum(at, sorted_ids.size - 1)] == values
