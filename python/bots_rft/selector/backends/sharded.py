"""The Ray-sharded backend: a pool too large for one process (10^8–10^9 tasks) spread over Ray
actors, one contiguous shard each, with selections and posteriors identical to one
:class:`~bots_rft.BOTS` (also importable from :mod:`bots_rft.integrations.ray`)."""

from __future__ import annotations

import inspect
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _core
from ..._validation import FloatArray, IntArray, as_bool, as_int, ids_in_pool
from ..._validation import exclusion as _exclusion
from ...checkpoint import read_checkpoint
from ...errors import BotsError, InvalidArgumentError, UnsupportedByBackendError
from ...estimators import Interpolation, StepEvidence, checked_prediction, smoothed_capability
from ..bots import (
    BOTS,
    DEFAULT_PRIOR,
    SETTABLE_PARAMS,
    BOTSParams,
    ParamsOnLoad,
    Picks,
    SelectorBase,
    lam_for,
    predictions_miss,
    smoothed_drift,
)
from ..bots.feedback import aggregate
from .rust import RustShard, thompson_draw

__all__ = ["ShardedBOTS", "ShardLostError", "SHARDED_PARAMS"]

#: The BOTS parameters a :class:`ShardedBOTS` applies; any other BOTS argument is refused by name
#: unless it is at its default (a parameter BOTS gains later is never silently ignored).
SHARDED_PARAMS = BOTSParams.names()  # all of them


class ShardLostError(BotsError, RuntimeError):
    """A shard's actor of a :class:`ShardedBOTS` died: its part of the posterior is gone.
    Rebuild the selector from the last checkpoint (:meth:`ShardedBOTS.load`)."""

    def __init__(self, message: str, shard: int) -> None:
        super().__init__(message)
        self.shard = shard


class ShardedBOTS(SelectorBase):
    """A :class:`~bots_rft.BOTS` whose pool is split over ``shards`` Ray actors, each holding a
    contiguous shard of tasks (posterior, per-task priors, interpolation references) and running
    the core on it. ``ray.init`` must have run; ``actor_options`` go to ``ray.remote`` (e.g.
    ``num_cpus``, a ``scheduling_strategy`` spreading the shards over nodes).

    Same selections and posteriors as one ``BOTS`` with the same seed and arguments, for any shard
    count: task j's draw depends only on (seed, selection count, j, α_j, β_j), each shard draws
    with its tasks' global indices, and :meth:`select` merges the shards' local top-B by
    (distance, id), the order the core ranks by. Updates go to the shards that hold the batch's
    tasks (every shard applies the discount and the implicit evidence to all its tasks). What
    depends on the whole batch is computed here from the batch's values, fetched from their
    shards in one request each: the interpolation estimator's capability μ̃, adaptive ρ's test of
    the predictions, adaptive λ's drift statistic. The driver owns the parameters and sends them
    with every call, so :meth:`set_params` applies to all shards from the next call on.

    Arguments: those of ``BOTS``; it applies the parameters in :data:`SHARDED_PARAMS`. Refused
    with :class:`~bots_rft.errors.InvalidArgumentError` naming the argument: an estimator other
    than :class:`~bots_rft.Interpolation` (its state would have to be split or gathered every
    step), ``prefetch=True`` (each shard runs an update's pass fused with the next selection, as
    ``prefetch=False``; the picks are the same either way), ``backend`` other than ``"rust"``, any
    ``device``, and any other ``BOTS`` argument at a value other than its default.
    :meth:`save` writes the whole state to one checkpoint in ``BOTS``'s format: ``BOTS.load``
    reads it, and so does :meth:`load` with any shard count. An actor that died raises
    :class:`ShardLostError` naming its shard; :meth:`load` of the last checkpoint rebuilds the
    selector. Not provided: ``take``/``release`` (the task stream), ``alpha``/``beta`` of the
    whole pool (use :meth:`state_dict`, or :meth:`posterior` for a few tasks).
    """

    def __init__(
        self,
        num_tasks: int,
        *,
        shards: int = 2,
        prior_alpha: float | Any = DEFAULT_PRIOR,
        prior_beta: float | Any = DEFAULT_PRIOR,
        evidence: Interpolation | None = None,
        threads: int | None = None,
        prefetch: bool = False,
        backend: str = "rust",
        device: Any = None,
        actor_options: dict[str, Any] | None = None,
        _posterior: tuple[np.ndarray, np.ndarray] | None = None,
        **parameters: Any,
    ) -> None:
        # BOTS's parameters (lam, rho, ...: the fields of BOTSParams) arrive in ``parameters``,
        # with any other BOTS argument, which is refused unless at its default.
        params_given, other_bots_arguments = BOTSParams.split_names(parameters)
        n = as_int(num_tasks, "num_tasks", minimum=1)
        k = as_int(shards, "shards", minimum=1, maximum=n)
        _refuse_unsupported(evidence, prefetch, backend, device)
        for name, value in other_bots_arguments.items():
            _refuse_other_argument(name, value)
        if evidence is not None and len(evidence) != n:
            raise InvalidArgumentError(f"evidence: has references for {len(evidence)} tasks, expected {n}", "evidence")
        # The parameters are validated and held as every backend holds them. The estimator is not
        # kept whole here: its scalar state lives in this object, its references in the shards.
        self._init_params(
            n,
            BOTSParams(**params_given),
            prior_alpha=prior_alpha,
            prior_beta=prior_beta,
            evidence=None,
            threads=None,
            prefetch=False,
        )
        self._threads = None if threads is None else as_int(threads, "threads", minimum=1)
        pa, pb = self._prior_alpha, self._prior_beta
        # The estimator's scalar state lives here; its references live in the shards.
        self._momentum = evidence.momentum if evidence is not None else None
        self._min_gap = evidence.min_gap if evidence is not None else None
        self._capability = evidence.capability if evidence is not None else None
        # Shard s holds tasks [bounds[s], bounds[s + 1]).
        self._bounds = np.linspace(0, n, k + 1).round().astype(np.int64)
        self._actor_options = dict(actor_options or {})
        weak, strong = evidence.references32() if evidence is not None else (None, None)
        # from_bots: a validated posterior to resume; else each shard starts at the prior.
        alpha, beta = _posterior if _posterior is not None else (None, None)
        self._start_shards(alpha, beta, pa, pb, weak, strong)

    # ------------------------------------------------------------------------- shard plumbing
    def _start_shards(self, alpha: Any, beta: Any, pa: Any, pb: Any, weak: Any, strong: Any) -> None:
        import ray

        remote = ray.remote(**self._actor_options)(RustShard) if self._actor_options else ray.remote(RustShard)
        self._prior_alpha, self._prior_beta = pa, pb
        self._shards: list[Any] = []
        for s in range(self.num_shards):
            lo, hi = self._span(s)

            def part(x: Any, lo: int = lo, hi: int = hi) -> Any:
                return x if x is None or np.ndim(x) == 0 else np.ascontiguousarray(x[lo:hi])

            state = {
                "size": hi - lo,
                "alpha": part(alpha),
                "beta": part(beta),
                "prior_alpha": part(pa),
                "prior_beta": part(pb),
                "weak": part(weak),
                "strong": part(strong),
            }
            self._shards.append(remote.remote(lo, state, self._threads))
        self._gather([a.ping.remote() for a in self._shards])

    def _span(self, s: int) -> tuple[int, int]:
        return int(self._bounds[s]), int(self._bounds[s + 1])

    def _gather(self, refs: list[Any], shards: list[int] | None = None) -> list[Any]:
        """Each shard's answer (``refs[i]`` from shard ``shards[i]``, by default shard i); a dead
        actor is a ShardLostError naming its shard."""
        import ray

        out = []
        for s, ref in zip(range(len(refs)) if shards is None else shards, refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                lo, hi = self._span(s)
                why = next(iter(str(exc).strip().splitlines()), "")[:200]  # Ray's first line says why
                raise ShardLostError(
                    f"shard {s} (tasks [{lo}, {hi})) is lost: its actor died ({type(exc).__name__}: {why}); "
                    "rebuild the selector from the last checkpoint with ShardedBOTS.load(path)",
                    s,
                ) from None
        return out

    def _split(self, sorted_ids: np.ndarray) -> list[slice]:
        """Positions of sorted global ids falling in each shard."""
        cuts = np.searchsorted(sorted_ids, self._bounds)
        return [slice(int(cuts[s]), int(cuts[s + 1])) for s in range(self.num_shards)]

    def _at(self, ids: np.ndarray, *, references: bool, posterior: bool) -> tuple[Any, Any, Any, Any]:
        """(weak, strong, α, β) of the tasks ``ids`` (any order, repeats allowed), in that order:
        one request to each shard holding some of them. Fields not asked for (references of a
        pool without them) are None."""
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        pieces = self._split(ordered)
        asked = [s for s, p in enumerate(pieces) if p.stop > p.start]
        refs = [self._shards[s].at.remote(ordered[pieces[s]] - self._span(s)[0], references, posterior) for s in asked]
        got = self._gather(refs, asked)
        has_references = references and self._momentum is not None
        wanted = (has_references, has_references, posterior, posterior)
        out: list[Any] = []
        for field, (want, dtype) in enumerate(zip(wanted, (np.float32, np.float32, np.float64, np.float64))):
            if not want:
                out.append(None)
                continue
            values = np.concatenate([g[field] for g in got]) if got else np.empty(0, dtype)
            unsorted = np.empty_like(values)
            unsorted[order] = values
            out.append(unsorted)
        return out[0], out[1], out[2], out[3]

    # ------------------------------------------------------------------------- properties
    @property
    def num_shards(self) -> int:
        return len(self._bounds) - 1

    @property
    def bounds(self) -> list[tuple[int, int]]:
        """The task range [lo, hi) of each shard."""
        return [self._span(s) for s in range(self.num_shards)]

    @property
    def actors(self) -> list[Any]:
        """The shards' Ray actor handles, shard 0 first (to monitor or place them; calling
        their methods directly bypasses this selector's bookkeeping)."""
        return list(self._shards)

    @property
    def capability(self) -> float | None:
        return self._capability

    @property
    def evidence(self) -> Any:
        """Not provided: the estimator is not kept whole here (its references live in the shards;
        :attr:`capability` is its state, :meth:`state_dict` rebuilds it)."""
        raise UnsupportedByBackendError("evidence", "sharded", instead="read capability, or state_dict()['evidence']")

    @property
    def _params(self) -> dict[str, Any]:
        params = self._params_dict()
        return {name: params[name] for name in SHARDED_PARAMS}

    def __repr__(self) -> str:
        return f"ShardedBOTS(num_tasks={self._num_tasks}, shards={self.num_shards})"

    def set_params(self, **changes: Any) -> None:
        """As :meth:`BOTS.set_params`: change ``lam``, ``rho``, ``target``, ``n_rollouts``,
        ``thompson``, ``adaptive_rho``, ``tau``, ``adaptive_lam`` or ``lag_discount`` between
        steps. Validated exactly as ``BOTS`` validates them (the same code), all before any is
        applied; an update already made keeps the parameters it was
        made with. They reach every shard with the next call and :meth:`state_dict` records them."""
        for name in sorted((changes.keys() & set(SETTABLE_PARAMS)) - set(SHARDED_PARAMS)):
            _refuse_other_argument(name, changes[name])  # settable in BOTS, not applied here
        super().set_params(**changes)

    # ------------------------------------------------------------------------- selection
    def select(self, batch_size: int, exclude: Any = None) -> np.ndarray:
        """As :meth:`BOTS.select`: the ``batch_size`` tasks nearest the target, best first, ties
        to the lower id; ``exclude`` is task ids or a mask of length ``num_tasks``. Each shard
        sends its local top-B (ids and distances); they are merged here."""
        k = as_int(batch_size, "batch_size", minimum=0)
        mask, ids = _exclusion(exclude, self._num_tasks)
        parts: list[tuple[np.ndarray | None, np.ndarray | None, int]] = []
        pieces = self._split(ids) if ids is not None else None
        for s in range(self.num_shards):
            lo, hi = self._span(s)
            if mask is not None:
                local_mask = np.ascontiguousarray(mask[lo:hi])
                parts.append((local_mask, None, hi - lo - int(np.count_nonzero(local_mask))))
            elif ids is not None and pieces is not None:
                local_ids = ids[pieces[s]] - lo
                parts.append((None, local_ids, hi - lo - local_ids.size))
            else:
                parts.append((None, None, hi - lo))
        selectable = sum(p[2] for p in parts)
        if k > selectable:
            raise InvalidArgumentError(
                f"batch_size: {k} exceeds the selectable pool of {selectable} tasks", "batch_size"
            )
        if k == 0:  # as BOTS.select(0): nothing drawn, the random stream stays where it is
            return np.empty(0, dtype=np.int64)
        counter = self._num_selections
        p = self._params
        rule = {"target": p["target"], "thompson": p["thompson"], "seed": p["seed"], "tau": p["tau"]}
        refs = [a.select.remote(min(k, free), counter, m, i, rule) for a, (m, i, free) in zip(self._shards, parts)]
        ranked = self._gather(refs)
        chosen = np.concatenate([r[0] for r in ranked])
        distances = np.concatenate([r[1] for r in ranked])
        # The core's order: distance, then id.
        order = np.lexsort((chosen, distances))[:k]
        self._num_selections += 1
        return chosen[order]

    def _ranked_theta(self, ranked: IntArray) -> FloatArray:
        return self.explain(ranked).theta

    def explain(self, task_ids: Any) -> Picks:
        """As :meth:`BOTS.explain`: what the last selection drew for ``task_ids`` and why (θ, its
        score, α, β, p̃), computed for those tasks only. One request to each shard holding some
        of them fetches their posterior and references; the draws are recomputed here."""
        chosen = ids_in_pool(task_ids, self._num_tasks)
        weak, strong, alpha, beta = self._at(chosen, references=True, posterior=True)
        p = self._params
        counter = max(self._num_selections - 1, 0)
        theta: np.ndarray
        if p["thompson"]:
            draws = np.array(
                [thompson_draw(a, b, j, p["seed"], counter) for a, b, j in zip(alpha, beta, chosen.tolist())],
                dtype=np.float32,
            )
            theta = draws.astype(np.float64)
            distance = np.abs(draws - np.float32(p["target"])).astype(np.float64)  # as the core ranks
        else:
            theta = alpha / (alpha + beta)
            distance = np.abs(theta - p["target"])
        predicted = None
        if self._capability is not None and weak is not None:
            evidence = StepEvidence({"weak": weak, "strong": strong, "capability": self._capability})
            predicted = evidence.predictions_at(np.arange(chosen.size))
        if predicted is None:
            predicted = np.full(chosen.size, np.nan)
        return Picks(chosen, theta, -distance, alpha, beta, predicted)

    def posterior(self, task_ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """(α, β) of the given tasks, as :meth:`BOTS.posterior` (one request to each shard holding
        some of them)."""
        ids = ids_in_pool(task_ids, self._num_tasks)
        _, _, alpha, beta = self._at(ids, references=False, posterior=True)
        return alpha, beta

    # ------------------------------------------------------------------------- update
    def _apply(self, ids: np.ndarray, succ: np.ndarray, tri: np.ndarray, predicted: np.ndarray | None) -> None:
        """Each shard gets its tasks' entries (and, with ``predicted``, its slice of it); every
        shard decays all its tasks and applies the implicit evidence."""
        if predicted is not None:
            predicted = checked_prediction(predicted, self._num_tasks)
        p = self._params
        batch = aggregate(self._num_tasks, ids, succ, tri)  # validates, sums repeats, sorts
        interpolating = predicted is None and self._momentum is not None
        weak, strong, alpha, beta = self._at(batch.ids, references=interpolating, posterior=p["adaptive_lam"])
        capability = self._capability
        # The step's implicit evidence (adaptive ρ tests its predictions for the batch's tasks).
        if predicted is not None:  # replaces the estimator for this step: it neither observes nor predicts
            step, observed = StepEvidence({"predicted": predicted}), batch
        elif interpolating:
            # The batch re-indexed 0..m-1 over its own references (already summed and sorted, so
            # the same sums in the same order): μ̃ exactly as Interpolation.observe computes it.
            m = len(batch.ids)
            observed = aggregate(m, np.arange(m, dtype=np.int64), batch.successes, batch.trials)
            assert self._min_gap is not None and self._momentum is not None
            mu = _core.batch_capability(observed, weak, strong, self._min_gap)
            capability = smoothed_capability(self._capability, mu, self._momentum)
            step = StepEvidence(
                {} if capability is None else {"weak": weak, "strong": strong, "capability": capability}
            )
        else:
            step, observed = StepEvidence(), batch
        halvings = self._rho_halvings + int(p["adaptive_rho"] and predictions_miss(step, observed))
        drift = self._drift
        if p["adaptive_lam"]:  # the posterior the batch lands on (every earlier update applied)
            drift = smoothed_drift(drift, alpha, beta, batch)
        rule = {
            "lam": lam_for(p["lam"], drift) if p["adaptive_lam"] else p["lam"],
            "rho": p["rho"] * 0.5**halvings,
            "n_rollouts": p["n_rollouts"],
        }
        pieces = self._split(batch.ids)
        refs = []
        for s, actor in enumerate(self._shards):
            lo, hi = self._span(s)
            evidence: dict[str, Any] = {}
            if predicted is not None:
                evidence = {"predicted": np.ascontiguousarray(predicted[lo:hi])}
            elif interpolating and capability is not None:
                evidence = {"capability": capability}
            piece = pieces[s]
            local = batch.ids[piece] - lo
            refs.append(actor.update.remote(local, batch.successes[piece], batch.trials[piece], rule, evidence))
        self._gather(refs)
        self._capability = capability
        self._rho_halvings = halvings
        self._drift = drift
        self._num_updates += 1

    # ------------------------------------------------------------------------- state
    def _state_parts(self) -> tuple[np.ndarray, np.ndarray, dict[str, Any] | None]:
        """The whole posterior and the estimator's state, gathered from the shards in one request
        each (:meth:`state_dict` writes them in :meth:`BOTS.state_dict`'s layout)."""
        states = self._gather([a.state.remote() for a in self._shards])
        evidence = None
        if self._momentum is not None:
            assert self._min_gap is not None
            weak = np.concatenate([s["weak"] for s in states])
            strong = np.concatenate([s["strong"] for s in states])
            interpolation = Interpolation(weak, strong, self._momentum, min_gap=self._min_gap)
            interpolation.commit(self._capability)
            evidence = interpolation.state_dict()
        alpha = np.concatenate([s["alpha"] for s in states])
        beta = np.concatenate([s["beta"] for s in states])
        return alpha, beta, evidence

    def load_state_dict(self, state: dict[str, Any], *, params: ParamsOnLoad = "error") -> None:
        """Not provided: a sharded selector is rebuilt from a state (its shards are new actors)
        with :meth:`from_state_dict` or :meth:`load`."""
        raise UnsupportedByBackendError(
            "load_state_dict", "sharded", instead="rebuild it with ShardedBOTS.from_state_dict(state) or .load(path)"
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        shards: int = 2,
        threads: int | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> ShardedBOTS:
        """A sharded selector from a checkpoint of :meth:`save` or :meth:`BOTS.save`."""
        return cls.from_state_dict(read_checkpoint(path), shards=shards, threads=threads, actor_options=actor_options)

    @classmethod
    def from_state_dict(
        cls,
        state: dict[str, Any],
        *,
        shards: int = 2,
        threads: int | None = None,
        actor_options: dict[str, Any] | None = None,
    ) -> ShardedBOTS:
        """A sharded selector resuming a :meth:`BOTS.state_dict` (validated by ``BOTS`` itself)."""
        n = as_int(state.get("num_tasks") if isinstance(state, dict) else None, "num_tasks", minimum=1)
        plain = BOTS(n, prefetch=False)
        plain.load_state_dict(state, params="checkpoint")
        return cls.from_bots(plain, shards=shards, threads=threads, actor_options=actor_options)

    @classmethod
    def from_bots(
        cls, selector: Any, *, shards: int = 2, threads: int | None = None, actor_options: dict[str, Any] | None = None
    ) -> ShardedBOTS:
        """The state of a plain ``BOTS`` spread over ``shards`` actors; it continues exactly as the
        plain one would."""
        if selector.in_flight.size:
            raise InvalidArgumentError(
                "selector: has tasks in flight (take); ShardedBOTS has no take stream", "selector"
            )
        ev = selector.evidence
        if ev is not None and not isinstance(ev, Interpolation):
            raise InvalidArgumentError(
                f"selector: ShardedBOTS supports the Interpolation estimator only, got {type(ev).__name__}", "selector"
            )
        # Parameters this class does not apply (BOTS's newer ones) go through the same refusal
        # as the constructor's: accepted at their default, refused by name otherwise.
        out = cls(
            selector.num_tasks,
            shards=shards,
            **selector.params,
            prior_alpha=selector.prior_alpha,
            prior_beta=selector.prior_beta,
            evidence=ev,
            threads=threads,
            actor_options=actor_options,
            _posterior=(selector.alpha, selector.beta),
        )
        out._num_selections = selector.num_selections
        out._num_updates = selector.num_updates
        # Adaptive ρ's and λ's state (BOTS exposes it only through its checkpoint; same package).
        out._rho_halvings = selector._rho_halvings
        out._drift = selector._drift
        return out


def _refuse_unsupported(evidence: Any, prefetch: Any, backend: Any, device: Any) -> None:
    """The BOTS arguments a ShardedBOTS cannot honour, refused by name (never ignored)."""
    if evidence is not None and not isinstance(evidence, Interpolation):
        raise InvalidArgumentError(
            f"evidence: ShardedBOTS supports the Interpolation estimator only, got {type(evidence).__name__}",
            "evidence",
        )
    if as_bool(prefetch, "prefetch"):
        raise InvalidArgumentError(
            "prefetch: ShardedBOTS runs each update's pass fused with the next selection on every shard "
            "(BOTS's prefetch=False, same picks); got True",
            "prefetch",
        )
    if backend != "rust":
        raise InvalidArgumentError(
            f"backend: ShardedBOTS's shards run the Rust core ('rust'), got {backend!r}", "backend"
        )
    if device is not None:
        raise InvalidArgumentError(
            f"device: ShardedBOTS's shards run the Rust core on CPU and take no device, got {device!r}", "device"
        )


def _refuse_other_argument(name: str, value: Any) -> None:
    """A BOTS argument ShardedBOTS does not apply: accepted at BOTS's default (it changes nothing),
    refused by name at any other value; a name BOTS does not take either is a TypeError."""
    parameters = inspect.signature(BOTS.__init__).parameters
    if name not in parameters or parameters[name].kind is not inspect.Parameter.KEYWORD_ONLY:
        raise TypeError(f"ShardedBOTS() got an unexpected keyword argument {name!r}")
    default = parameters[name].default
    try:
        at_default = isinstance(value, bool) == isinstance(default, bool) and bool(value == default)
    except (TypeError, ValueError):  # an array, or a value without a plain truth value
        at_default = False
    if not at_default:
        raise InvalidArgumentError(
            f"{name}: ShardedBOTS does not support this BOTS argument (only its default {default!r}), got {value!r}",
            name,
        )


if TYPE_CHECKING:
    from ..bots import PosteriorSelector

    def _keeps_the_selector_contract(sel: ShardedBOTS) -> PosteriorSelector:
        return sel  # mypy checks ShardedBOTS against the PosteriorSelector protocol here
