"""What every selector backend shares beyond its parameters: feedback in (``update`` and
``update_rewards``: checked, reward-mapped and lag-weighted the same way whatever holds the
posterior), checkpoints out (``save``), and the lifecycle (``flush``, ``close``, ``with``).

A backend implements how a checked batch of evidence is applied (``_apply``), how the pool is
ranked (``select``, ``explain``), how the posterior is read (``posterior``) and how its state is
written and read (``state_dict``, ``load``)."""

from __future__ import annotations

import os
import threading
from abc import ABCMeta, abstractmethod
from typing import Any, TypeVar

import numpy as np

from ..._validation import FloatArray, IntArray, as_floats, as_ids, exclusion
from ...checkpoint import write_checkpoint
from ...errors import CheckpointError
from ...estimators import user_object
from ..plan import Plan, allocate_rollouts, check_plan_args
from ..protocol import ParamsOnLoad
from ..protocol import Picks as Picks
from .feedback import feedback_arrays, nonempty, reward_counts, reward_map
from .params import SETTABLE_PARAMS, SelectorParams
from .rules import lag_weighted
from .state import check_params_on_load, selector_state

_SelectorT = TypeVar("_SelectorT", bound="SelectorBase")


class SelectorBase(SelectorParams, metaclass=ABCMeta):
    """The shared part of every selector backend (:class:`~bots_rft.BOTS` on the Rust core or on
    torch, and the Ray-sharded selector): the parameters (:class:`SelectorParams`), feedback
    checked and weighted once for all of them, and checkpoints written in one layout. A backend
    applies a checked batch in ``_apply`` and provides the ranking and the state."""

    # ----------------------------------------------------------------------------- feedback
    def update(
        self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None, *, policy_lag: Any = None
    ) -> None:
        """Fold one step's rollout results into every task's posterior (the paper's eq. 1).

        ``task_ids`` may repeat (their counts are summed); ``successes`` and ``trials`` may be
        fractional (rewards in [0, 1]); ``trials`` is a scalar or one value per entry.
        ``predicted`` (length ``num_tasks``, NaN = none) replaces the configured estimator for
        this step: the estimator neither observes this batch nor predicts. Tasks in flight
        (:meth:`BOTS.take`) that get evidence here are no longer in flight.

        ``policy_lag`` (asynchronous trainers): how many policy versions old the rollouts are, a
        non-negative int or one per entry. Each entry's successes and trials are scaled by
        ``lag_discount ** lag``: stale evidence counts as fewer rollouts of the same observed
        rate. With the default ``lag_discount=1`` it changes nothing; ``None`` means lag 0.
        """
        ids, succ, tri = feedback_arrays(task_ids, successes, trials)
        pred = None if predicted is None else as_floats(predicted, "predicted", self._num_tasks)
        succ, tri = lag_weighted(succ, tri, policy_lag, ids.size, self._lag_discount)
        self._apply(ids, succ, tri, pred)

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
        ids = nonempty(as_ids(task_ids, "task_ids"))
        succ, tri = reward_counts(rewards, len(ids), reward_map(reward_range, success_threshold))
        succ, tri = lag_weighted(succ, tri, policy_lag, ids.size, self._lag_discount)
        self._apply(ids, succ, tri, None)

    @abstractmethod
    def _apply(self, ids: IntArray, succ: FloatArray, tri: FloatArray, pred: FloatArray | None) -> None:
        """Apply one checked, lag-weighted batch (``pred``: a prediction replacing the estimator
        for this step, checked as floats of length ``num_tasks``)."""

    # ----------------------------------------------------------------------------- ranking
    @abstractmethod
    def select(self, batch_size: int, exclude: Any = None) -> IntArray:
        """The ``batch_size`` tasks nearest the target, best first, ties to the lower id."""

    def plan(self, rollout_budget: int, n_min: int, n_max: int, exclude: Any = None) -> Plan:
        """Tasks and a rollout count for each, chosen together: the plan that maximises the
        expected number of informative groups (0 < successes < n) under the draws, spending at
        most ``rollout_budget`` rollouts with ``n_min <= counts <= n_max``
        (:mod:`bots_rft.selector.plan` has the objective and why the optimum is exact).

        The candidates are the selection rule's ranking (as :meth:`select` makes it, with
        ``exclude`` applied) and θ is what it ranked by, so a plan consumes one selection of the
        random stream (none when the budget buys no task, as ``select(0)``), is deterministic per seed, and :meth:`explain` describes its picks. With
        ``n_min == n_max == n`` and ``rollout_budget == B * n`` it returns ``select(B)``'s ids,
        each with n rollouts. Returns a :class:`~bots_rft.selector.plan.Plan` (``ids``, ``counts``).
        Every backend plans with this one method (the same plan as ``BOTS``)."""
        budget, lo, hi = check_plan_args(rollout_budget, n_min, n_max)
        k = min(budget // lo, self._selectable(exclude))
        with self._lock:
            ranked = self.select(k, exclude=exclude)
            if ranked.size == 0:  # as select(0): a plan of no task draws nothing from the stream
                return Plan(ranked.copy(), np.zeros(0, dtype=np.int64))
            counts = allocate_rollouts(self._ranked_theta(ranked), budget, lo, hi)
        return Plan(ranked[: counts.size].copy(), counts)

    def _selectable(self, exclude: Any) -> int:
        """How many tasks ``exclude`` leaves selectable (checked as :meth:`select` checks it)."""
        mask, ids = exclusion(exclude, self._num_tasks)
        excluded = int(ids.size) if ids is not None else (int(np.count_nonzero(mask)) if mask is not None else 0)
        return self._num_tasks - excluded

    @abstractmethod
    def _ranked_theta(self, ranked: IntArray) -> FloatArray:
        """The θ the last selection ranked ``ranked`` by (as :meth:`explain` recomputes it)."""

    @abstractmethod
    def explain(self, task_ids: Any) -> Picks:
        """What the last selection drew for ``task_ids`` and why."""

    @abstractmethod
    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        """(α, β) of the given tasks (new arrays)."""

    # ----------------------------------------------------------------------------- state
    #: What ``load_state_dict(..., params="current")`` keeps of this selector.
    _KEPT_ON_LOAD: tuple[str, ...] = (*SETTABLE_PARAMS, "seed", "prior_alpha", "prior_beta")
    #: How a selector runs, beside its state (``threads``, a device, ...): kept by
    #: ``load_state_dict``, carried by pickling. Each names an attribute ``_<name>``.
    _OPTIONS: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: posterior, priors, parameters, estimator, RNG position,
        in the one checkpoint layout every backend writes and reads."""
        with self._lock:
            alpha, beta, evidence = self._state_parts()
            return selector_state(
                params=self._params_dict(),
                prior_alpha=self._prior_alpha,
                prior_beta=self._prior_beta,
                alpha=alpha,
                beta=beta,
                num_selections=self._num_selections,
                num_updates=self._num_updates,
                evidence=evidence,
                rho_halvings=self._rho_halvings,
                drift=self._drift,
                stream=self._stream_state(),
            )

    @abstractmethod
    def _state_parts(self) -> tuple[FloatArray, FloatArray, dict[str, Any] | None]:
        """α and β of every task with every update applied (float64), and the estimator's
        state (None: no estimator); under the lock."""

    def _estimator_state(self) -> dict[str, Any] | None:
        return self._estimator.state_dict() if self._estimator is not None else None

    def _stream_state(self) -> dict[str, Any] | None:
        """The state of the task stream (None: nothing handed out, or no stream)."""
        return None

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
        check_params_on_load(params)
        fresh = self._rebuilt(state, user_object(self._estimator), self._options())
        if fresh._num_tasks != self._num_tasks:
            raise CheckpointError(f"state: has {fresh._num_tasks} tasks, this selector has {self._num_tasks}")
        with self._lock:
            self._flush_locked()
            self._adopt_state(fresh, params, self._KEPT_ON_LOAD)

    def _rebuilt(self, state: dict[str, Any], evidence: Any, options: dict[str, Any]) -> SelectorBase:
        """A selector of this backend built from ``state`` (validated), with ``evidence`` as its
        custom estimator and these :data:`_OPTIONS`: what ``load_state_dict`` and unpickling
        adopt."""
        raise NotImplementedError(f"{type(self).__name__} is not rebuilt from a state in place")

    def _options(self) -> dict[str, Any]:
        return {name: getattr(self, f"_{name}") for name in self._OPTIONS}

    def _pickled_options(self) -> dict[str, Any]:
        """:meth:`_options` as they travel in a pickle (plain values)."""
        return self._options()

    def _flush_locked(self) -> None:
        """Finish every update made so far (under the lock); a backend that defers work does it
        here."""

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically (temporary file, fsync, rename). ``path`` is a file;
        missing parent directories are created. Every backend writes the same layout, and
        reads the others'."""
        write_checkpoint(path, self.state_dict())

    # Pickled as its attributes, but for the lock, which is rebuilt on the other side (a backend
    # whose state has a more compact form, BOTS, pickles that instead).
    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in self.__dict__.items() if name != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    # ----------------------------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """Finish any update now (never needed for correctness: every read does it)."""
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Finish any work in flight; the selector stays usable. Also called by ``with``."""
        self.flush()

    def __enter__(self: _SelectorT) -> _SelectorT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
