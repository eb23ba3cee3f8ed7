"""The parameters every selector backend shares: validated once, exposed as read-only
properties, changed between steps with ``set_params`` (validated before any is applied), and the
paper's presets (``mopps``, ``dots``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ... import _core
from ..._validation import FloatArray, as_bool, as_int, as_real, prior
from ...errors import CheckpointError, InvalidArgumentError
from ...estimators import Estimator, ImplicitEvidence, as_estimator, user_object
from ...parameters import (
    ADAPTIVE_LAM,
    ADAPTIVE_RHO,
    DOTS_FIXED,
    LAG_DISCOUNT,
    LAM,
    MOPPS_FIXED,
    PARAMETERS,
    PSEUDO_ROLLOUTS,
    RHO,
    SEED,
    TARGET,
    TAU,
    THOMPSON,
)
from .rules import lam_for
from .state import ParamsOnLoad

#: α0 = β0 = 1 when no prior is given: the uniform prior, every pass rate equally likely.
DEFAULT_PRIOR = 1.0

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

_SelectorT = TypeVar("_SelectorT", bound="SelectorParams")


@dataclass(frozen=True)
class BOTSParams:
    """BOTS's tunable parameters as one frozen, validated value: what every BOTS backend (the
    Rust core, torch, the Ray shards) takes. Each field's default and range are the catalogue's
    (:mod:`bots_rft.parameters`), and each value is checked by its
    :meth:`~bots_rft.parameters.Parameter.check` when the value is made, so an invalid
    value raises a typed error naming the field and never exists. The priors, the estimator and
    how the selector runs (threads, prefetch) are not parameters of the rule and are not here."""

    lam: float = LAM.default
    rho: float = RHO.default
    target: float = TARGET.default
    tau: float = TAU.default
    n_rollouts: float = PSEUDO_ROLLOUTS.default
    thompson: bool = THOMPSON.default
    seed: int = SEED.default
    adaptive_rho: bool = ADAPTIVE_RHO.default
    adaptive_lam: bool = ADAPTIVE_LAM.default
    lag_discount: float = LAG_DISCOUNT.default

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, PARAMETERS[f.name].check(getattr(self, f.name)))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The fields' names, in the order they are validated."""
        return tuple(f.name for f in fields(cls))

    @classmethod
    def split_names(cls, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``arguments`` in two: those named like a parameter, and the rest (nothing validated:
        the first go to :class:`BOTSParams` when the caller is ready to validate them)."""
        names = set(cls.names())
        return {k: v for k, v in arguments.items() if k in names}, {
            k: v for k, v in arguments.items() if k not in names
        }

    def changed(self, **changes: Any) -> BOTSParams:
        """A copy with ``changes`` applied, every one validated (an invalid one raises)."""
        return replace(self, **changes)


class SelectorParams:
    """What every selector backend shares first (:class:`~bots_rft.BOTS` on the Rust core or on
    torch, and the Ray-sharded selector): the validated parameters, their read-only properties,
    :meth:`set_params` and the presets. A backend's ``__init__`` calls :meth:`_init_params`, then
    builds only its own state (the posterior, passes, device). Hooks: ``_params_changed`` (after
    :meth:`set_params`) and ``_refuse_unsupported`` (for a backend that lacks a parameter)."""

    if TYPE_CHECKING:
        # Every backend is built as ``cls(num_tasks, **parameters)`` (what the presets call).
        def __init__(self, num_tasks: int, **parameters: Any) -> None: ...

    def _init_params(
        self,
        num_tasks: int,
        params: BOTSParams,
        *,
        prior_alpha: float | Any,
        prior_beta: float | Any,
        evidence: Estimator | ImplicitEvidence | None,
        threads: int | None,
        prefetch: bool,
    ) -> None:
        """Hold ``params`` (validated when it was made: a backend builds it from its arguments
        before anything else, so a call wrong in several places names the same argument on every
        backend) and check the rest."""
        n = as_int(num_tasks, "num_tasks", minimum=1)
        self._num_tasks = n
        # The parameters live as attributes (set_params replaces them together, under the lock).
        self._lam = params.lam
        self._rho = params.rho
        self._target = params.target
        self._tau = params.tau
        self._n_rollouts = params.n_rollouts
        self._thompson = params.thompson
        self._seed = params.seed
        self._adaptive_rho = params.adaptive_rho
        self._adaptive_lam = params.adaptive_lam
        self._lag_discount = params.lag_discount
        # Per-task priors as frozen memory (read-only, owned by the core): every update's pass
        # shares them instead of copying them.
        self._prior_alpha = frozen(prior(prior_alpha, "prior_alpha", n))
        self._prior_beta = frozen(prior(prior_beta, "prior_beta", n))
        self._estimator = as_estimator(evidence, n)
        self._threads = check_threads(threads)
        self._prefetch = as_bool(prefetch, "prefetch")
        # Times adaptive ρ has halved ρ: state, not a parameter (ρ in use = rho / 2**halvings).
        self._rho_halvings = 0
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
        reject_fixed(kwargs, "mopps", tuple(fixed))
        return cls(num_tasks, **fixed, **kwargs)

    @classmethod
    def dots(
        cls: type[_SelectorT], num_tasks: int, evidence: Estimator | ImplicitEvidence, **kwargs: Any
    ) -> _SelectorT:
        """BOTS-DOTS (paper appendix E.6): latest evidence only (λ=ρ=1), greedy on the mean."""
        fixed = DOTS_FIXED
        reject_fixed(kwargs, "dots", (*fixed, "evidence"))
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

    def _bots_params(self) -> BOTSParams:
        """The parameters in use now, as one value."""
        return BOTSParams(**{name: getattr(self, f"_{name}") for name in BOTSParams.names()})

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
        return lam_for(self._lam, self._drift) if self._adaptive_lam else self._lam

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
        self._refuse_unsupported(changes)
        params = self._bots_params().changed(**changes)  # every change validated, none applied yet
        checked = {name: getattr(params, name) for name in changes}
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

    def _adopt_state(self, fresh: SelectorParams, params: ParamsOnLoad, kept: tuple[str, ...]) -> None:
        """load_state_dict's last step, under the lock: refuse differing parameters
        (``params="error"``), keep this selector's ``kept`` attributes (``params="current"``), then
        become ``fresh`` (a selector built from the state) but for the lock and ``prefetch``."""
        differences = param_differences(self, fresh)
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
        # Assigning a parameter (sel.lam = 5) would otherwise create a plain attribute the selector
        # never reads; every property of the class is read-only, parameters change through set_params.
        # Internal state (a leading underscore) skips the check: it is set on every call.
        if name[0] != "_" and isinstance(getattr(type(self), name, None), property):
            hint = f"use set_params({name}=...)" if name in SETTABLE_PARAMS else "it is fixed for a selector's life"
            raise AttributeError(f"{name}: BOTS attributes are read-only; {hint}")
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if isinstance(getattr(type(self), name, None), property):
            raise AttributeError(f"{name}: BOTS attributes are read-only")
        object.__delattr__(self, name)


def readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


def frozen(value: Any, dtype: Any = np.float64) -> Any:
    """An array as read-only memory the core owns (``_core.frozen``: a spec given it shares it
    instead of copying it); a scalar or None as is."""
    return _core.frozen(np.ascontiguousarray(value, dtype=dtype)) if isinstance(value, np.ndarray) else value


def _readonly_prior(p: float | FloatArray) -> float | FloatArray:
    return readonly(p) if isinstance(p, np.ndarray) else p


def param_differences(ours: SelectorParams, theirs: SelectorParams) -> list[str]:
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


def reject_fixed(kwargs: dict[str, Any], preset: str, fixed: tuple[str, ...]) -> None:
    clash = sorted(set(kwargs) & set(fixed))
    if clash:
        raise InvalidArgumentError(
            f"{clash[0]}: the {preset} preset fixes {', '.join(fixed)}; got {clash[0]}={kwargs[clash[0]]!r}", clash[0]
        )


def check_threads(threads: Any) -> int | None:
    if threads is None:
        return None
    t = as_int(threads, "threads", minimum=1, maximum=1024)
    return t
