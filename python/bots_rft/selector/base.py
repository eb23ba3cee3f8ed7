"""What every selector backend shares beyond its parameters: feedback in (``update`` and
``update_rewards``: checked, reward-mapped and lag-weighted the same way whatever holds the
posterior), checkpoints out (``save``), and the lifecycle (``flush``, ``close``, ``with``).

A backend implements how a checked batch of evidence is applied (``_apply``), how the pool is
ranked (``select``, ``explain``), how the posterior is read (``posterior``) and how its state is
written and read (``state_dict``, ``load``)."""

from __future__ import annotations

import os
from abc import abstractmethod
from typing import Any, NamedTuple

from .._validation import FloatArray, IntArray, as_floats, as_ids
from ..checkpoint import write_checkpoint
from ..planning import Plan
from .feedback import feedback_arrays, reward_counts, reward_map
from .params import SelectorParams
from .rules import lag_weighted


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


class SelectorBase(SelectorParams):
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
        ids = as_ids(task_ids, "task_ids")
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

    @abstractmethod
    def plan(self, rollout_budget: int, n_min: int, n_max: int, exclude: Any = None) -> Plan:
        """Tasks and a rollout count for each under ``rollout_budget`` (see :meth:`BOTS.plan`)."""

    @abstractmethod
    def explain(self, task_ids: Any) -> Picks:
        """What the last selection drew for ``task_ids`` and why."""

    @abstractmethod
    def posterior(self, task_ids: Any) -> tuple[FloatArray, FloatArray]:
        """(α, β) of the given tasks (new arrays)."""

    # ----------------------------------------------------------------------------- state
    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume, in the one checkpoint layout every backend reads."""

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint atomically (temporary file, fsync, rename). ``path`` is a file;
        missing parent directories are created. Every backend writes the same layout, and
        reads the others'."""
        write_checkpoint(path, self.state_dict())

    # ----------------------------------------------------------------------------- lifecycle
    def flush(self) -> None:
        """Finish any update now (a backend that defers work does it here; never needed for
        correctness)."""

    def close(self) -> None:
        """Finish any work in flight; the selector stays usable. Also called by ``with``."""
        self.flush()

    def __enter__(self) -> SelectorBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
