"""SPEED-RL, selective prompting with efficient estimation of difficulty (Zhang et al., arXiv
2506.09016; code: Zanette-Labs/speed-rl, ``verl/trainer/ppo/data_controller.py``).

SPEED screens before it commits: every new prompt gets ``n_init`` rollouts; a prompt whose
screening rollouts disagree (0 < successes < n_init, i.e. nonzero reward variance) *qualifies* and,
in the next generation call, gets ``n_continue`` more; it is then ready for training on all
``n_init + n_continue`` rollouts. Each generation call screens a fresh batch of
``gen_ratio x batch_size`` prompts (the data loader's order) together with the continuation of the
prompts qualified by earlier calls. Calls repeat until ``batch_size`` prompts are ready; a step
whose queue already holds a batch makes no call and trains on it at no rollout cost, as the
reference does. Qualified prompts and ready prompts beyond the batch stay queued for the next
step, as in the reference data controller (nothing rolled out is thrown away except failed
screenings).

Published defaults (``recipe/dapo/src/config/fast_dapo_trainer.yaml``): n_init = 4,
n_continue = 12 (so a trained prompt has 16 rollouts, the pool's usual n), a generation batch
equal to the training batch (``gen_ratio`` 1; both shipped scripts use 4). The reference raises an error
after ``max_num_gen_batches`` calls (50 in its scripts); here, after ``max_gen_batches`` calls, the
batch is topped up with failed screenings (their n_init rollouts) so the step still trains on
``batch_size`` prompts. Screening rollouts are charged to the budget like every other.

Reference lines (Zanette-Labs/speed-rl@80e47b5): ``verl/trainer/ppo/data_controller.py:L80-121``
(one generation call: the fresh screening batch plus the qualified prompts, replicated
n_continue / n_init times, their count rounded down to a multiple of the GPUs), ``L152-159``
(qualify on std > 0), ``L145-149,L182-190`` (continued prompts become ready), ``L49-55`` (ready at
a training batch), ``L192-230`` (train on the first complete prompts, the rest stay queued),
``L85-87`` (error once the calls reach ``max_num_gen_batches``);
``recipe/dapo/src/fast_dapo_ray_trainer.py:L129-200`` (generate while not ready), ``L202-206``
(train from the queue without generating); ``recipe/dapo/src/config/fast_dapo_trainer.yaml:L9-10,
L34-37`` (generation batch = training batch, n 4, n_continue 12); ``run_fast_rloo_7b.sh:L31-40`` and
``recipe/rloo/test_fast_rloo_1.5b_math.sh:L36-45`` (64 screened per 16 trained, 4 + 20 and
8 + 16 rollouts, 50 calls). One difference: a reference step that trains takes a loader batch
and never screens it (``batch_dict`` unused at L202-206), so each training step skips
``gen_batch_size`` prompts of the epoch; here no prompt is skipped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ...errors import CheckpointError, InvalidArgumentError
from ...parameters import GEN_RATIO, MAX_GEN_BATCHES, N_CONTINUE, N_INIT, SEED
from ..method import Method, RolloutMode, needs_rollout
from ..protocol import RolledBatch
from .base import FloatArray, Groups, IdArray, SelfRolling
from .dapo import EpochOrder

__all__ = ["SpeedRL"]


class SpeedRL(SelfRolling):
    """SPEED-RL as a selector that rolls out itself (module docstring: rule, defaults, choices)."""

    kind = "speed"

    def __init__(
        self,
        num_tasks: int,
        rollout: Any,
        *,
        n_init: int = N_INIT.default,
        n_continue: int = N_CONTINUE.default,
        gen_ratio: float = GEN_RATIO.default,
        max_gen_batches: int = MAX_GEN_BATCHES.default,
        seed: int = SEED.default,
    ) -> None:
        super().__init__(num_tasks, rollout, seed=seed)
        self.n_init = N_INIT.check(n_init)
        self.n_continue = N_CONTINUE.check(n_continue)
        if self.n_continue % self.n_init:
            # The reference controller replicates each qualified prompt n_continue / n_init times.
            raise InvalidArgumentError(
                f"n_continue: must be a multiple of n_init={self.n_init}, got {self.n_continue}", "n_continue"
            )
        self.gen_ratio = GEN_RATIO.check(gen_ratio)
        self.max_gen_batches = MAX_GEN_BATCHES.check(max_gen_batches)
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        # Qualified prompts awaiting continuation, and prompts ready for training (successes so far).
        self.qualified: tuple[IdArray, FloatArray] = (np.zeros(0, np.int64), np.zeros(0))
        self.ready: tuple[IdArray, FloatArray] = (np.zeros(0, np.int64), np.zeros(0))
        #: Prompts screened, and prompts that qualified, summed over all selections.
        self.screened = 0
        self.passed = 0

    @property
    def total_n(self) -> int:
        return self.n_init + self.n_continue

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        b = batch_size
        ok = np.ones(self.num_tasks, dtype=bool) if allowed is None else allowed
        # Queued prompts an exclusion now forbids wait for a later step.
        q_ids, q_succ = self.qualified
        r_ids, r_succ = self.ready
        busy = np.zeros(self.num_tasks, dtype=bool)
        busy[q_ids] = busy[r_ids] = True
        gen = max(1, math.ceil(self.gen_ratio * b))
        failed_ids: list[IdArray] = []
        failed_succ: list[FloatArray] = []
        calls = 0
        # Generation calls until a batch is ready; none when the queue already holds one (the
        # reference then trains without generating, and the step costs no rollouts).
        while int(ok[r_ids].sum()) < b and calls < self.max_gen_batches:
            calls += 1
            # One generation call: the continuation of the prompts qualified so far (those the
            # exclusion allows) together with the screening of a fresh generation batch.
            go = ok[q_ids]
            free = ok & ~busy
            new = self._order.select(gen, exclude=~free) if free.any() else np.zeros(0, np.int64)
            if new.size == 0 and not go.any():
                break
            cont = q_ids[go]
            both = self._roll(
                np.concatenate([cont, new]),
                np.concatenate([np.full(cont.size, self.n_continue), np.full(new.size, self.n_init)]),
            )
            more, succ = both[: cont.size], both[cont.size :]
            r_ids = np.concatenate([r_ids, cont])
            r_succ = np.concatenate([r_succ, q_succ[go] + more])
            q_ids, q_succ = q_ids[~go], q_succ[~go]
            busy[new] = True
            self.screened += int(new.size)
            passed = (succ > 0) & (succ < self.n_init)
            self.passed += int(passed.sum())
            q_ids, q_succ = np.concatenate([q_ids, new[passed]]), np.concatenate([q_succ, succ[passed]])
            failed_ids.append(new[~passed])
            failed_succ.append(succ[~passed])
        usable = np.flatnonzero(ok[r_ids])[:b]
        take_ids, take_succ = r_ids[usable], r_succ[usable]
        trials = np.full(take_ids.size, float(self.total_n))
        if take_ids.size < b:  # out of generation calls: top up with failed screenings
            f_ids = np.concatenate(failed_ids) if failed_ids else np.zeros(0, np.int64)
            f_succ = np.concatenate(failed_succ) if failed_succ else np.zeros(0)
            short = b - take_ids.size
            take_ids = np.concatenate([take_ids, f_ids[:short]])
            take_succ = np.concatenate([take_succ, f_succ[:short]])
            trials = np.concatenate([trials, np.full(min(short, f_ids.size), float(self.n_init))])
        rest = np.ones(r_ids.size, dtype=bool)
        rest[usable] = False
        self.ready = (r_ids[rest], r_succ[rest])
        self.qualified = (q_ids, q_succ)
        batch = RolledBatch(take_ids.astype(np.int64), take_succ, trials, rollouts=self._spent)
        return batch, (take_ids.astype(np.int64), take_succ, trials)

    def queued_ids(self) -> IdArray:
        """The prompts queued with rollouts of earlier selections (qualified ∪ ready), whose
        rollouts a trainer must keep for the steps that train on them."""
        return np.union1d(self.qualified[0], self.ready[0]).astype(np.int64)

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        return None  # SPEED keeps no statistics across steps beyond its queues

    def _extra_state(self) -> dict[str, Any]:
        return {"order": self._order.state_dict(), **self._queue_state()}

    def _queue_state(self) -> dict[str, Any]:
        """The queues and counters (everything but the order prompts are drawn in)."""
        return {
            "qualified_ids": self.qualified[0].copy(),
            "qualified_successes": self.qualified[1].copy(),
            "ready_ids": self.ready[0].copy(),
            "ready_successes": self.ready[1].copy(),
            "screened": self.screened,
            "passed": self.passed,
        }

    def _load_queue_state(self, state: dict[str, Any]) -> None:
        """The queues and counters of ``state``, checked, then set (nothing set when invalid)."""
        try:
            q = (np.array(state["qualified_ids"], dtype=np.int64), np.array(state["qualified_successes"], np.float64))
            r = (np.array(state["ready_ids"], dtype=np.int64), np.array(state["ready_successes"], np.float64))
            screened, passed = int(state["screened"]), int(state["passed"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has malformed SPEED queues ({exc})") from exc
        for ids, succ in (q, r):
            if ids.shape != succ.shape or ids.ndim != 1 or np.any((ids < 0) | (ids >= self.num_tasks)):
                raise CheckpointError("state: has a SPEED queue with mismatched or out-of-range entries")
        self.qualified, self.ready = q, r
        self.screened, self.passed = screened, passed

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        order = EpochOrder(self.num_tasks, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._load_queue_state(state)
        self._order = order


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    return SpeedRL(n, needs_rollout(m, rollout), **p)


METHOD = Method(
    name="speed",
    label="SPEED-RL",
    summary="screening rollouts for every candidate, full rollouts only for those whose screening disagrees",
    params=(N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES, SEED),
    references="unused",
    rollout_mode=RolloutMode.CALLBACK,
    aliases=("speed-rl",),
    implementation="bots_rft.selector.peers.speed:SpeedRL",
    builder=_build,
)
