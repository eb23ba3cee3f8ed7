"""Selectors across processes: a Ray actor that owns one, and a check that moving one is cheap.

A :class:`bots_rft.BOTS` pickles through its state dict: a few hundred bytes of parameters plus
its arrays (α, β, per-task priors, the estimator's float32 references), which numpy hands to
pickle protocol 5 as out-of-band buffers. Ray (whose object store uses protocol 5 that way) and
``multiprocessing`` therefore move a selector as raw buffers, never as per-task Python objects;
:func:`pickled_sizes` shows the split. The samplers of the TRL and verl integrations pickle the
same way (a selector plus int64 arrays).

Where the selector should live in a Ray job: next to the trainer's driver loop if that loop
selects and updates (verl's single-controller trainer does; there the sampler already lives in the
driver). When rollouts are produced by several actors that report results on their own, keep one
:class:`SelectorActor` (``remote_selector(sel)``) so every update and selection is serialised
through one owner, in one order.

When the pool itself outgrows one process (10^8–10^9 tasks), :class:`ShardedBOTS` spreads it
over Ray actors, one contiguous shard each, with selections identical to one :class:`BOTS`.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from .. import _core
from .._validation import as_bool, as_floats, as_ids, as_int, in_closed_unit, positive, prior
from .._validation import exclusion as _exclusion
from ..checkpoint import read_checkpoint, write_checkpoint
from ..errors import BotsError, InvalidArgumentError
from ..evidence import Interpolation, smoothed_capability

__all__ = ["SelectorActor", "remote_selector", "pickled_sizes", "ShardedBOTS", "ShardLostError"]


class SelectorActor:
    """Owns one selector and exposes its API; wrap with ``ray.remote`` (see :func:`remote_selector`).

    Calls on one actor run one at a time in arrival order, which keeps the selector's
    select/update sequence, and so its results, deterministic for a given call order.
    """

    def __init__(self, selector: Any) -> None:
        self.selector = selector

    def select(self, batch_size: int, exclude: Any = None) -> Any:
        return self.selector.select(batch_size, exclude=exclude)

    def update(self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None) -> None:
        self.selector.update(task_ids, successes, trials, predicted)

    def update_rewards(self, task_ids: Any, rewards: Any) -> None:
        self.selector.update_rewards(task_ids, rewards)

    def state_dict(self) -> dict[str, Any]:
        return dict(self.selector.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selector.load_state_dict(state)

    def save(self, path: str) -> None:
        self.selector.save(path)

    def get(self) -> Any:
        """The selector itself (pickled back to the caller)."""
        return self.selector


def remote_selector(selector: Any, **actor_options: Any) -> Any:
    """A Ray actor handle owning ``selector`` (``ray.init`` must have run). ``actor_options`` go
    to ``ray.remote`` (e.g. ``num_cpus=1``; the core uses that many threads only if the
    selector was built with ``threads=``)."""
    import ray

    cls = ray.remote(**actor_options)(SelectorActor) if actor_options else ray.remote(SelectorActor)
    return cls.remote(selector)


def pickled_sizes(obj: Any) -> tuple[int, int, int]:
    """``(in-band bytes, out-of-band bytes, out-of-band buffers)`` of ``obj`` under pickle
    protocol 5 with a ``buffer_callback``: how much is Python-pickled vs passed as raw buffers."""
    buffers: list[pickle.PickleBuffer] = []
    inband = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return len(inband), sum(memoryview(b).nbytes for b in buffers), len(buffers)


# ------------------------------------------------------------------------------- sharded pool


class ShardLostError(BotsError, RuntimeError):
    """A shard's actor of a :class:`ShardedBOTS` died: its part of the posterior is gone.
    Rebuild the selector from the last checkpoint (:meth:`ShardedBOTS.load`)."""

    def __init__(self, message: str, shard: int) -> None:
        super().__init__(message)
        self.shard = shard


class _Shard:
    """One contiguous shard [lo, hi) of a sharded pool: its posterior, priors and references,
    and the core's passes over them. Batch ids and exclusions it receives are slice positions;
    the selections it returns carry global ids (the core draws with global indices)."""

    def __init__(self, lo: int, state: dict[str, Any], params: dict[str, Any], threads: int | None) -> None:
        self.lo = lo
        # Own, writable copies: arrays arriving through Ray's object store are read-only views.
        self.alpha = np.array(state["alpha"], dtype=np.float64)
        self.beta = np.array(state["beta"], dtype=np.float64)
        self.prior_alpha = state["prior_alpha"]
        self.prior_beta = state["prior_beta"]
        self.weak = state.get("weak")
        self.strong = state.get("strong")
        self.params = params
        self.threads = threads
        # The last update, run fused with the next selection's pass (as BOTS without prefetch).
        self.pending: _core.UpdateSpec | None = None

    def ping(self) -> int:
        return int(self.alpha.size)

    def references_at(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert self.weak is not None and self.strong is not None
        return self.weak[ids], self.strong[ids]

    def _flush(self) -> None:
        if self.pending is not None:
            _core.step(self.alpha, self.beta, self.pending, threads=self.threads)
            self.pending = None

    def update(self, ids: np.ndarray, successes: np.ndarray, trials: np.ndarray, capability: float | None) -> None:
        self._flush()
        batch = _core.aggregate(self.alpha.size, ids, successes, trials)
        evidence: dict[str, Any] = {}
        if capability is not None:
            evidence = {"weak": self.weak, "strong": self.strong, "capability": capability}
        p = self.params
        self.pending = _core.UpdateSpec(
            batch,
            prior_alpha=self.prior_alpha,
            prior_beta=self.prior_beta,
            lam=p["lam"],
            rho=p["rho"],
            n_rollouts=p["n_rollouts"],
            **evidence,
        )

    def select(
        self, k: int, counter: int, mask: np.ndarray | None, ids: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        p = self.params
        spec = _core.SelectSpec(
            k,
            target=p["target"],
            thompson=p["thompson"],
            seed=p["seed"],
            counter=counter,
            exclude_mask=mask,
            exclude_ids=ids,
            tau=p["tau"] if p["tau"] > 0 else None,
            first_index=self.lo,
        )
        result = _core.step_ranked(self.alpha, self.beta, self.pending, spec, threads=self.threads)
        self.pending = None
        assert result is not None
        return result

    def state(self) -> dict[str, Any]:
        self._flush()
        return {"alpha": self.alpha, "beta": self.beta, "weak": self.weak, "strong": self.strong}


class ShardedBOTS:
    """A :class:`~bots_rft.BOTS` whose pool is split over ``shards`` Ray actors, each holding a
    contiguous shard of tasks (posterior, per-task priors, interpolation references) and running
    the core on it. ``ray.init`` must have run; ``actor_options`` go to ``ray.remote`` (e.g.
    ``num_cpus``, a ``scheduling_strategy`` spreading the shards over nodes).

    Same selections as one ``BOTS`` with the same seed and arguments, for any shard count: task
    j's draw depends only on (seed, selection count, j, α_j, β_j), each shard draws with its
    tasks' global indices, and :meth:`select` merges the shards' local top-B by (distance, id),
    the order the core ranks by. Updates go to the shards that hold the batch's tasks (every
    shard applies the discount and the implicit evidence to all its tasks); the interpolation
    estimator's capability μ̃ is a statistic of the whole batch, computed here from the batch's
    references (fetched from their shards) and sent to every shard.

    Supported arguments: those of ``BOTS`` except ``adaptive_rho``, ``adaptive_lam``, ``prefetch``
    and estimators other than :class:`~bots_rft.Interpolation`. :meth:`save` writes the whole
    state to one checkpoint in ``BOTS``'s format: ``BOTS.load`` reads it, and so does
    :meth:`load` with any shard count. An actor that died raises :class:`ShardLostError`
    naming its shard; :meth:`load` of the last checkpoint rebuilds the selector.
    """

    def __init__(
        self,
        num_tasks: int,
        *,
        shards: int = 2,
        lam: float = 0.1,
        rho: float = 0.1,
        target: float = 0.5,
        n_rollouts: float = 16,
        thompson: bool = True,
        prior_alpha: float | Any = 1.0,
        prior_beta: float | Any = 1.0,
        evidence: Interpolation | None = None,
        seed: int = 0,
        threads: int | None = None,
        tau: float = 0.0,
        actor_options: dict[str, Any] | None = None,
        _posterior: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        n = as_int(num_tasks, "num_tasks", minimum=1)
        k = as_int(shards, "shards", minimum=1, maximum=n)
        tau_value = float(tau) if isinstance(tau, (int, float)) and not isinstance(tau, bool) else float("nan")
        if not (np.isfinite(tau_value) and tau_value >= 0):
            raise InvalidArgumentError(f"tau: must be a finite number >= 0, got {tau!r}", "tau")
        if evidence is not None and not isinstance(evidence, Interpolation):
            raise InvalidArgumentError(
                f"evidence: ShardedBOTS supports the Interpolation estimator only, got {type(evidence).__name__}",
                "evidence",
            )
        if evidence is not None and len(evidence) != n:
            raise InvalidArgumentError(f"evidence: has references for {len(evidence)} tasks, expected {n}", "evidence")
        self._num_tasks = n
        self._params = {
            "lam": in_closed_unit(lam, "lam"),
            "rho": in_closed_unit(rho, "rho"),
            "target": in_closed_unit(target, "target"),
            "n_rollouts": positive(n_rollouts, "n_rollouts"),
            "thompson": as_bool(thompson, "thompson"),
            "seed": as_int(seed, "seed", minimum=0, maximum=2**64 - 1),
            "tau": tau_value,
        }
        self._threads = None if threads is None else as_int(threads, "threads", minimum=1)
        pa, pb = prior(prior_alpha, "prior_alpha", n), prior(prior_beta, "prior_beta", n)
        # The estimator's scalar state lives here; its references live in the shards.
        self._momentum = evidence.momentum if evidence is not None else None
        self._min_gap = evidence.min_gap if evidence is not None else None
        self._capability = evidence.capability if evidence is not None else None
        self._num_selections = 0
        self._num_updates = 0
        # Shard s holds tasks [bounds[s], bounds[s + 1]).
        self._bounds = np.linspace(0, n, k + 1).round().astype(np.int64)
        self._actor_options = dict(actor_options or {})
        weak, strong = evidence.references32() if evidence is not None else (None, None)
        if _posterior is not None:  # from_bots: a validated posterior to resume
            alpha, beta = _posterior
        else:
            alpha, beta = np.empty(n), np.empty(n)
            alpha[:] = pa
            beta[:] = pb
        self._start_shards(alpha, beta, pa, pb, weak, strong)

    # ------------------------------------------------------------------------- shard plumbing
    def _start_shards(self, alpha: Any, beta: Any, pa: Any, pb: Any, weak: Any, strong: Any) -> None:
        import ray

        remote = ray.remote(**self._actor_options)(_Shard) if self._actor_options else ray.remote(_Shard)
        self._prior_alpha, self._prior_beta = pa, pb
        self._shards: list[Any] = []
        for s in range(self.num_shards):
            lo, hi = self._span(s)

            def part(x: Any, lo: int = lo, hi: int = hi) -> Any:
                return x if x is None or np.ndim(x) == 0 else np.ascontiguousarray(x[lo:hi])

            state = {
                "alpha": part(alpha),
                "beta": part(beta),
                "prior_alpha": part(pa),
                "prior_beta": part(pb),
                "weak": part(weak),
                "strong": part(strong),
            }
            self._shards.append(remote.remote(lo, state, self._params, self._threads))
        self._gather([a.ping.remote() for a in self._shards])

    def _span(self, s: int) -> tuple[int, int]:
        return int(self._bounds[s]), int(self._bounds[s + 1])

    def _gather(self, refs: list[Any]) -> list[Any]:
        """Each shard's answer; a dead actor is a ShardLostError naming its shard."""
        import ray

        out = []
        for s, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                lo, hi = self._span(s)
                raise ShardLostError(
                    f"shard {s} (tasks [{lo}, {hi})) is lost: its actor died ({type(exc).__name__}); "
                    "rebuild the selector from the last checkpoint with ShardedBOTS.load(path)",
                    s,
                ) from None
        return out

    def _split(self, sorted_ids: np.ndarray) -> list[slice]:
        """Positions of sorted global ids falling in each shard."""
        cuts = np.searchsorted(sorted_ids, self._bounds)
        return [slice(int(cuts[s]), int(cuts[s + 1])) for s in range(self.num_shards)]

    # ------------------------------------------------------------------------- properties
    @property
    def num_tasks(self) -> int:
        return self._num_tasks

    @property
    def num_shards(self) -> int:
        return len(self._bounds) - 1

    @property
    def bounds(self) -> list[tuple[int, int]]:
        """The task range [lo, hi) of each shard."""
        return [self._span(s) for s in range(self.num_shards)]

    @property
    def num_selections(self) -> int:
        return self._num_selections

    @property
    def num_updates(self) -> int:
        return self._num_updates

    @property
    def capability(self) -> float | None:
        return self._capability

    def __len__(self) -> int:
        return self._num_tasks

    def __repr__(self) -> str:
        return f"ShardedBOTS(num_tasks={self._num_tasks}, shards={self.num_shards})"

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
        counter = self._num_selections
        refs = [a.select.remote(min(k, free), counter, m, i) for a, (m, i, free) in zip(self._shards, parts)]
        ranked = self._gather(refs)
        chosen = np.concatenate([r[0] for r in ranked])
        distances = np.concatenate([r[1] for r in ranked])
        # The core's order: distance, then id.
        order = np.lexsort((chosen, distances))[:k]
        self._num_selections += 1
        return chosen[order]

    # ------------------------------------------------------------------------- update
    def update(self, task_ids: Any, successes: Any, trials: Any) -> None:
        """As :meth:`BOTS.update` (without ``predicted``): each shard gets its tasks' entries;
        every shard decays all its tasks and applies the implicit evidence (μ̃ computed here)."""
        ids = as_ids(task_ids, "task_ids")
        succ = as_floats(successes, "successes")
        if np.ndim(trials) == 0:
            tri = np.array([positive(trials, "trials")], dtype=np.float64)
        else:
            tri = as_floats(trials, "trials")
        batch = _core.aggregate(self._num_tasks, ids, succ, tri)  # validates, sums repeats, sorts
        pieces = self._split(batch.ids)
        capability = self._capability
        if self._momentum is not None:
            capability = self._propose_capability(batch, pieces)
        refs = []
        for s, actor in enumerate(self._shards):
            lo, _ = self._span(s)
            piece = pieces[s]
            refs.append(
                actor.update.remote(batch.ids[piece] - lo, batch.successes[piece], batch.trials[piece], capability)
            )
        self._gather(refs)
        self._capability = capability
        self._num_updates += 1

    def _propose_capability(self, batch: _core.Batch, pieces: list[slice]) -> float | None:
        """μ̃ after this batch, as :meth:`Interpolation.propose` computes it, from the batch's
        references only (one small request per shard holding batch tasks)."""
        asks = {
            s: self._shards[s].references_at.remote(batch.ids[p] - self._span(s)[0])
            for s, p in enumerate(pieces)
            if p.stop > p.start
        }
        got = dict(zip(asks, self._gather(list(asks.values()))))
        weak = np.concatenate([got[s][0] for s in sorted(got)]) if got else np.empty(0, np.float32)
        strong = np.concatenate([got[s][1] for s in sorted(got)]) if got else np.empty(0, np.float32)
        m = len(batch.ids)
        # The batch re-indexed 0..m-1 (already summed and sorted, so the same sums in the same order).
        local = _core.aggregate(m, np.arange(m, dtype=np.int64), batch.successes, batch.trials)
        assert self._min_gap is not None and self._momentum is not None
        mu = _core.batch_capability(local, weak, strong, self._min_gap)
        return smoothed_capability(self._capability, mu, self._momentum)

    # ------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """The whole state, gathered, in :meth:`BOTS.state_dict`'s format."""
        from ..selector import selector_state

        states = self._gather([a.state.remote() for a in self._shards])
        evidence = None
        if self._momentum is not None:
            assert self._min_gap is not None
            weak = np.concatenate([s["weak"] for s in states])
            strong = np.concatenate([s["strong"] for s in states])
            interpolation = Interpolation(weak, strong, self._momentum, min_gap=self._min_gap)
            interpolation.commit(self._capability)
            evidence = interpolation.state_dict()
        return selector_state(
            params={**self._params, "adaptive_rho": False, "adaptive_lam": False},
            prior_alpha=self._prior_alpha,
            prior_beta=self._prior_beta,
            alpha=np.concatenate([s["alpha"] for s in states]),
            beta=np.concatenate([s["beta"] for s in states]),
            num_selections=self._num_selections,
            num_updates=self._num_updates,
            evidence=evidence,
        )

    def save(self, path: str) -> None:
        """One checkpoint file of the whole pool (``BOTS``'s format; any shard count loads it)."""
        write_checkpoint(path, self.state_dict())

    @classmethod
    def load(
        cls, path: str, *, shards: int = 2, threads: int | None = None, actor_options: dict[str, Any] | None = None
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
        from ..selector import BOTS

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
        params = dict(selector.params)
        if params["adaptive_rho"] or params["adaptive_lam"] or selector.rho_in_use != params["rho"]:
            raise InvalidArgumentError(
                "selector: ShardedBOTS does not support adaptive_rho or adaptive_lam", "selector"
            )
        if selector.in_flight.size:
            raise InvalidArgumentError(
                "selector: has tasks in flight (take); ShardedBOTS has no take stream", "selector"
            )
        ev = selector.evidence
        if ev is not None and not isinstance(ev, Interpolation):
            raise InvalidArgumentError(
                f"selector: ShardedBOTS supports the Interpolation estimator only, got {type(ev).__name__}", "selector"
            )
        out = cls(
            selector.num_tasks,
            shards=shards,
            lam=params["lam"],
            rho=params["rho"],
            target=params["target"],
            n_rollouts=params["n_rollouts"],
            thompson=params["thompson"],
            seed=params["seed"],
            tau=params["tau"],
            prior_alpha=selector.prior_alpha,
            prior_beta=selector.prior_beta,
            evidence=ev,
            threads=threads,
            actor_options=actor_options,
            _posterior=(selector.alpha, selector.beta),
        )
        out._num_selections = selector.num_selections
        out._num_updates = selector.num_updates
        return out
