"""DAPO's task order and its dynamic sampling (Yu et al., 2025), the oldest of the peers.

- :class:`EpochOrder`: DAPO's data-loader order: the pool walked in epochs, a fresh random
  permutation each. It is the one implementation of that walk: the trainer's ``method=dynamic``
  draws its generation batches from it (the trainer runs the dynamic-sampling filter itself),
  :class:`DynamicSampling` draws from it when no proposer is given, and the other peers that
  follow DAPO's loader (DPS, GRESO, SPEED-RL, Knapsack-RL, Reinforce-Ada) draw their candidates
  from it.
- :class:`DynamicSampling`: DAPO's dynamic sampling: oversample, roll out, keep tasks whose
  rollouts disagree (0 < successes < n) until the batch is full; every rollout it spends beyond
  ``batch_size * n`` is counted as extra cost. Its generation batches come from an
  :class:`EpochOrder`, or from another selector (``proposer=``, e.g. BOTS), which then learns
  from every rolled-out group, the filtered ones included. It rolls out through a callback, as
  the simulator does; the trainer fills its batches itself (``bots_rft.train.trainer``), and it
  hands its batch over through ``take_rollouts`` (it predates the
  :class:`~bots_rft.selector.protocol.RollsOut` protocol the other peers follow).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._validation import as_int, feedback, selectable
from ..._validation import batch_size as _check_batch
from ...errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from ...parameters import MAX_ROUNDS, OVERSAMPLE, ROLLOUTS, SEED
from ..method import Method, RolloutMode
from ..protocol import IdArray, RolloutFn, Selector, check_num_tasks, check_state

__all__ = ["EpochOrder", "DynamicSampling", "Filled", "fill_batch"]


@dataclass(frozen=True)
class Filled:
    """What :func:`fill_batch` found: every group rolled out, the kept ones first (in the order
    rolled out), then the dropped ones (likewise); the batch is the first ``batch_size`` of them."""

    ids: list[int]
    successes: list[float]
    batch_size: int
    rounds: int

    @property
    def batch(self) -> list[int]:
        return self.ids[: self.batch_size]


def fill_batch(
    propose: Callable[[int, npt.NDArray[np.bool_]], Iterable[Any]],
    roll_out: Callable[[list[int]], Iterable[Any]],
    num_tasks: int,
    batch_size: int,
    n_rollouts: int,
    per_round: int,
    max_rounds: int,
) -> Filled:
    """DAPO's dynamic sampling loop (Yu et al., 2025), written once for the selector below and the
    trainer's fill strategy: ``propose(count, rolled)`` gives up to ``count`` tasks not in the
    boolean mask ``rolled`` (the tasks already rolled out this step); ``roll_out(ids)`` rolls
    them out and returns each one's successes out of ``n_rollouts``. Groups whose rewards
    disagree (0 < successes < n: a group with all-equal rewards has zero advantage and teaches
    nothing) are kept, until ``batch_size`` are kept or ``max_rounds`` rounds were spent or
    nothing is left to propose; dropped groups then top a short batch up."""
    rolled = np.zeros(num_tasks, dtype=bool)  # no task is rolled out twice in a step
    kept: list[tuple[int, float]] = []
    dropped: list[tuple[int, float]] = []
    rounds = 0
    while len(kept) < batch_size and rounds < max_rounds:
        ids = [int(i) for i in propose(per_round, rolled)]
        if not ids:
            break
        rolled[ids] = True
        successes = [float(x) for x in roll_out(ids)]
        if len(successes) != len(ids):
            raise InvalidArgumentError(f"rollout: returned {len(successes)} counts for {len(ids)} tasks", "rollout")
        rounds += 1
        for tid, k in zip(ids, successes):
            (kept if 0 < k < n_rollouts else dropped).append((tid, k))
    groups = kept + dropped
    return Filled([t for t, _ in groups], [k for _, k in groups], batch_size, rounds)


class EpochOrder:
    """DAPO's data-loader order (Yu et al., 2025): the pool walked in epochs, a fresh random
    permutation each, handing out the next tasks not excluded.

    Unlike other selectors, :meth:`select` hands out *up to* ``batch_size`` tasks: fewer when
    fewer are selectable, as a data loader hands out what is left. Its state is the walk (``rng``,
    ``perm``, ``cursor``); :meth:`load_state_dict` also reads the state of a
    :class:`DynamicSampling` without a proposer, whose walk this is, so a ``method=dynamic``
    training run checkpointed with that selector resumes on the same task order."""

    kind = "epoch_order"

    def __init__(self, num_tasks: int, *, seed: int = SEED.default) -> None:
        self.num_tasks = check_num_tasks(num_tasks)
        self.seed = SEED.check(seed)
        self._rng = np.random.default_rng(self.seed)
        self._perm: IdArray = self._rng.permutation(self.num_tasks).astype(np.int64)
        self._cursor = 0

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        """The next ``batch_size`` tasks not in ``exclude`` (ids or a bool mask), in epoch order;
        fewer when fewer are selectable."""
        need = as_int(batch_size, "batch_size", minimum=1)
        allowed = selectable(exclude, self.num_tasks)
        return self._walk(need, np.ones(self.num_tasks, dtype=bool) if allowed is None else allowed)

    def _walk(self, need: int, mask: npt.NDArray[np.bool_]) -> IdArray:
        """Up to ``need`` tasks of ``mask`` from the cursor on. Crossing the end of the
        permutation starts a new epoch with a fresh permutation. A walk that finds too few tasks
        draws a fresh permutation at each of its two passes (checkpointed runs depend on this
        exact sequence of draws, so it stays)."""
        out: list[IdArray] = []
        for _ in range(2):  # one epoch boundary at most: a draw never repeats a task
            rest = self._perm[self._cursor :]
            ok = np.flatnonzero(mask[rest])[:need]
            out.append(rest[ok])
            need -= ok.size
            if need == 0:
                self._cursor += int(ok[-1]) + 1
                break
            mask = mask.copy()
            mask[rest[ok]] = False  # no task twice in one draw across the boundary
            self._perm = self._rng.permutation(self.num_tasks).astype(np.int64)
            self._cursor = 0
        return np.concatenate(out).astype(np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        # The order ignores outcomes, but still rejects malformed feedback like every selector.
        feedback(task_ids, successes, trials, self.num_tasks)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "rng": self._rng.bit_generator.state,
            "perm": self._perm.copy(),
            "cursor": self._cursor,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output, or the state of a :class:`DynamicSampling` without
        a proposer (the same walk under that selector's kind)."""
        legacy = isinstance(state, dict) and state.get("kind") == DynamicSampling.kind
        st = check_state(state, DynamicSampling.kind if legacy else self.kind, self.num_tasks)
        if legacy and st.get("proposer") is not None:
            raise CheckpointError("state: is a dynamic-sampling state with a proposer, whose picks are no epoch order")
        try:
            perm = np.asarray(st["perm"], dtype=np.int64)
            cursor = int(st["cursor"])
            rng = np.random.default_rng()
            rng.bit_generator.state = st["rng"]
            seed = int(st.get("seed", self.seed))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has a malformed epoch walk ({exc})") from exc
        if perm.shape != (self.num_tasks,) or not 0 <= cursor <= self.num_tasks:
            raise CheckpointError(
                f"state: has an invalid permutation (shape {perm.shape}) or cursor {cursor} for {self.num_tasks} tasks"
            )
        self._perm, self._cursor, self._rng, self.seed = perm, cursor, rng, seed


class DynamicSampling:
    """DAPO's dynamic sampling (Yu et al., 2025) as a selector.

    Each :meth:`select` draws generation batches of ``ceil(oversample * batch_size)`` tasks from
    an :class:`EpochOrder` (a fresh random permutation of the pool each epoch, as DAPO's data
    loader), rolls each out with ``rollout`` and keeps the tasks whose rollouts disagree, until
    ``batch_size`` are kept or ``max_rounds`` generation batches were spent; then the batch is
    topped up with the rolled-out ineffective tasks (so it always has ``batch_size`` entries).
    The rollouts of the returned batch are handed over through :meth:`take_rollouts`, so the
    caller does not roll them out again; all other rollouts are waste, counted in
    :attr:`extra_rollouts`.

    ``proposer``: a selector (BOTS, or any :class:`Selector`) that chooses each generation batch
    instead of the epoch order, never proposing a task twice in one step. :meth:`update` then hands
    it the outcome of **every** group rolled out for the step, the all-correct and all-wrong
    groups the filter dropped included, in one update (one step of the proposer's clock, whatever
    the number of rounds). Filtered groups are the most informative evidence a selector gets: a
    selector that never saw them would keep proposing tasks it already knows to be solved or
    hopeless.
    """

    kind = "dynamic_sampling"

    def __init__(
        self,
        num_tasks: int,
        rollout: RolloutFn,
        *,
        n_rollouts: int = ROLLOUTS.default,
        oversample: float = OVERSAMPLE.default,
        max_rounds: int = MAX_ROUNDS.default,
        seed: int = SEED.default,
        proposer: Selector | None = None,
    ) -> None:
        self.num_tasks = check_num_tasks(num_tasks)
        if proposer is not None and not isinstance(proposer, Selector):
            raise InvalidTypeError(f"proposer: must be a task selector, got {type(proposer).__name__}", "proposer")
        if proposer is not None and int(getattr(proposer, "num_tasks", -1)) != self.num_tasks:
            raise InvalidArgumentError(
                f"proposer: has {getattr(proposer, 'num_tasks', None)!r} tasks, this selector {self.num_tasks}",
                "proposer",
            )
        self.proposer = proposer
        if not callable(rollout):
            raise InvalidTypeError(f"rollout: must be callable, got {rollout!r}", "rollout")
        n_rollouts = ROLLOUTS.check(n_rollouts)
        oversample = OVERSAMPLE.check(oversample)
        max_rounds = MAX_ROUNDS.check(max_rounds)
        self.rollout = rollout
        self.n_rollouts = n_rollouts
        self.oversample = float(oversample)
        self.max_rounds = max_rounds
        self.seed = SEED.check(seed)
        # The generation batches' order when no proposer picks them. It is checkpointed with a
        # proposer too, so that one checkpoint layout serves both and a resume reads the same keys.
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        self._pending: npt.NDArray[np.float64] | None = None
        # Every group rolled out by the last selection (kept and filtered), for the proposer.
        self._rolled: tuple[IdArray, npt.NDArray[np.float64]] | None = None
        #: Rollouts spent beyond ``batch_size * n_rollouts``, summed over all selections.
        self.extra_rollouts = 0
        #: All rollouts spent, summed over all selections.
        self.total_rollouts = 0
        #: Generation batches drawn in the last selection.
        self.last_rounds = 0

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        available = self.num_tasks if allowed is None else int(allowed.sum())
        b = _check_batch(batch_size, available)
        # A failing rollout callback must not leave the epoch half-consumed, nor the proposer
        # a selection further on (its random stream is numbered by selections).
        order_saved = self._order.state_dict()
        proposer_saved = None if self.proposer is None else self.proposer.state_dict()
        try:
            return self._select(b, allowed)
        except BaseException:
            self._order.load_state_dict(order_saved)
            if self.proposer is not None:
                self.proposer.load_state_dict(proposer_saved)  # type: ignore[arg-type]
            raise

    def _select(self, b: int, allowed: npt.NDArray[np.bool_] | None) -> IdArray:
        # Each round rolls out >= b fresh tasks, so after the first there are always b to return.
        def propose(count: int, rolled: npt.NDArray[np.bool_]) -> IdArray:
            return self._propose(count, ~rolled if allowed is None else (allowed & ~rolled))

        def roll_out(ids: list[int]) -> npt.NDArray[np.float64]:
            batch = np.asarray(ids, dtype=np.int64)
            succ = np.asarray(self.rollout(batch), dtype=np.float64)
            if succ.shape != batch.shape:
                raise InvalidArgumentError(f"rollout: returned shape {succ.shape} for {batch.size} tasks", "rollout")
            return succ

        gen = max(b, int(np.ceil(self.oversample * b)))
        found = fill_batch(propose, roll_out, self.num_tasks, b, self.n_rollouts, gen, self.max_rounds)
        rolled = len(found.ids)
        self._rolled = (np.asarray(found.ids, dtype=np.int64), np.asarray(found.successes, dtype=np.float64))
        self.total_rollouts += rolled * self.n_rollouts
        self.extra_rollouts += (rolled - b) * self.n_rollouts
        self.last_rounds = found.rounds
        self._pending = self._rolled[1][:b]
        return self._rolled[0][:b].copy()

    def _propose(self, count: int, open_tasks: npt.NDArray[np.bool_]) -> IdArray:
        """The next generation batch: up to ``count`` of the ``open_tasks`` (a bool mask)."""
        if self.proposer is None:
            return self._order.select(count, exclude=~open_tasks)
        available = int(open_tasks.sum())
        if available == 0:
            return np.empty(0, dtype=np.int64)
        return np.asarray(self.proposer.select(min(count, available), exclude=~open_tasks), dtype=np.int64)

    def take_rollouts(self) -> npt.NDArray[np.float64] | None:
        """Success counts of the last selected batch (already rolled out), once; then None."""
        pending, self._pending = self._pending, None
        return pending

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """Checks the feedback; with a proposer, feeds it every group of the last selection.

        The trainer reports the batch it trained on (the kept groups); the proposer also gets the
        groups the filter dropped, with the success counts the rollout callback returned."""
        ids, _, _ = feedback(task_ids, successes, trials, self.num_tasks)
        if self.proposer is None:
            return
        if self._rolled is None:
            raise InvalidArgumentError("update: no selection is waiting for feedback", "task_ids")
        rolled_ids, rolled_succ = self._rolled
        stray_ids = ids[~np.isin(ids, rolled_ids)]
        if stray_ids.size:
            stray = int(stray_ids[0])
            raise InvalidArgumentError(f"task_ids: task {stray} was not rolled out by the last selection", "task_ids")
        self.proposer.update(rolled_ids, rolled_succ, float(self.n_rollouts))
        self._rolled = None

    def state_dict(self) -> dict[str, Any]:
        order = self._order.state_dict()  # the epoch walk's fields, flat, as since the first release
        return {
            "kind": self.kind,
            "proposer": None if self.proposer is None else self.proposer.state_dict(),
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "rng": order["rng"],
            "perm": order["perm"],
            "cursor": order["cursor"],
            "extra_rollouts": self.extra_rollouts,
            "total_rollouts": self.total_rollouts,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        order = EpochOrder(self.num_tasks, seed=self.seed)
        order.load_state_dict({**st, "kind": EpochOrder.kind})  # the walk, checked before anything changes
        try:
            extra, total = int(st["extra_rollouts"]), int(st["total_rollouts"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has malformed rollout counts ({exc})") from exc
        proposer_state = st.get("proposer")
        if (proposer_state is None) != (self.proposer is None):
            saved = "without" if proposer_state is None else "with"
            ours = "has one" if self.proposer is not None else "has none"
            raise CheckpointError(f"state: saved {saved} a proposer, this selector {ours}")
        if self.proposer is not None and proposer_state is not None:
            self.proposer.load_state_dict(proposer_state)
        self._order = order
        self.extra_rollouts, self.total_rollouts = extra, total
        self._pending = None
        self._rolled = None


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> DynamicSampling:
    if rollout is None:
        raise InvalidArgumentError(
            f"rollout: the {m.name} method rolls out inside select and needs a rollout callback", "rollout"
        )
    return DynamicSampling(
        n, rollout, n_rollouts=p["n_rollouts"], oversample=p["oversample"], max_rounds=p["max_rounds"], seed=p["seed"]
    )


def _unrolled(m: Method, n: int, weak: Any, strong: Any, threads: Any, p: dict[str, Any]) -> EpochOrder:
    """DAPO-DS without its callback: the epoch walk that proposes its generation batches (a trainer
    fills the batch itself)."""
    return EpochOrder(n, seed=p["seed"])


METHOD = Method(
    name="dynamic",
    label="DAPO-DS",
    summary="DAPO's dynamic sampling: roll out generation batches in epoch order, keep "
    "the tasks whose rollouts disagree",
    params=(ROLLOUTS, OVERSAMPLE, MAX_ROUNDS, SEED),
    references="unused",
    rollout_mode=RolloutMode.DAPO_FILL,
    aliases=("dapo",),
    implementation="bots_rft.selector.peers.dapo:DynamicSampling",
    builder=_build,
    unrolled=_unrolled,
)
