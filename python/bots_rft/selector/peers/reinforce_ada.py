"""Reinforce-Ada, adaptive sampling with early stopping per prompt (Xiong et al., arXiv 2510.04996;
code: RLHFlow/Reinforce-Ada, ``_generate_multi_round_adaptive_downsampling`` in
``verl/trainer/ppo/ray_trainer.py``).

The batch is the data loader's (an epoch-order walk of the pool); what adapts is how many
rollouts each prompt gets. Sampling goes in rounds: every still-active prompt gets
``round_repeat`` rollouts; a prompt stops ("is deactivated") once it has enough signal, and after
``rounds`` rounds the rest stop anyway. The published exit rule "balanced" stops a prompt once it
has ``keep // 2`` correct and ``keep - keep // 2`` incorrect rollouts; the update then uses a
balanced subset of ``keep`` rollouts per prompt.

Published defaults (``scripts/run_reinforce_ada.sh`` and ``ppo_trainer.yaml``): rounds = 4,
round_repeat = 8, keep = 4 (the script's n), exit rule "balanced".

What the step trains on: the reference keeps a subset of ``keep`` rollouts per prompt (balanced:
``keep // 2`` correct and the rest incorrect when the prompt has them, else as balanced as its
rollouts allow) and computes advantages ``r - p_hat`` with ``p_hat`` from *all* the prompt's
rollouts (``global_stat_est=True``) and no division by the group's std
(``norm_adv_by_std_in_grpo=False``). The simulated learner therefore trains on that kept subset
(its successes out of ``keep``): a stopped prompt is a 2-of-4 group, whose learning signal under
the learner's 4r(1 - r) proxy (twice the mean |advantage| of an unnormalised group) is 1, as the
reference's mean |r - p_hat| of 1/2 says. Every rollout of every round is charged.

Reference lines (RLHFlow/Reinforce-Ada@05be605): ``verl/trainer/ppo/ray_trainer.py:L929-1221``
(``_generate_multi_round_adaptive_downsampling``): ``L978-997`` (rounds of ``round_repeat`` per
active prompt), ``L1054-1067`` (every rollout of the round counted), ``L1085-1096`` with
``L1069-1083`` (balanced exit, ``keep // 2`` correct and the rest incorrect kept), ``L1139-1186``
(the subset of a prompt still active after ``max_rounds``), ``L1209-1216`` (all-rollout counts
for the baseline), ``L1303-1313`` (keep = ``rollout.n``); ``verl/trainer/ppo/core_algos.py:L305-325,
L360-369`` (``p_hat`` from all rollouts, no std division); ``verl/trainer/config/ppo_trainer.yaml:L87-93``
(threshold 0.7, 4 rounds of 8); ``scripts/run_reinforce_ada.sh:L22,L46-59`` (batch 512, n 4,
balanced, global_stat_est, no std). Difference: a prompt left with exactly one correct (or one
incorrect) rollout after the last round trains here as a 1-of-4 group at its subset's rate; the
reference subtracts the all-rollout rate (1/32), which gives it less signal.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ...parameters import SEED, Parameter
from ..method import Method, RolloutMode, needs_rollout
from ..protocol import RolledBatch
from .base import FloatArray, Groups, IdArray, SelfRolling
from .dapo import EpochOrder

__all__ = ["ReinforceAda", "kept_subset"]

ROUNDS = Parameter("rounds", "int", 4, "Reinforce-Ada: sampling rounds per step at most", 1)
ROUND_REPEAT = Parameter("round_repeat", "int", 8, "Reinforce-Ada: rollouts per active prompt and round", 1)
KEEP = Parameter("keep", "int", 4, "Reinforce-Ada: a prompt stops with keep/2 correct and keep/2 incorrect rollouts", 2)


def kept_subset(successes: FloatArray, rollouts: FloatArray, keep: int) -> tuple[FloatArray, FloatArray]:
    """``(correct, size)`` of the balanced subset of ``min(keep, rollouts)`` rollouts the reference
    trains on per prompt: ``size // 2`` correct and the rest incorrect when the prompt has enough of
    both, else all of the scarce kind and the rest from the other."""
    size = np.minimum(float(keep), rollouts)
    wrong_wanted = size - size // 2
    return np.minimum(successes, size - np.minimum(rollouts - successes, wrong_wanted)), size


class ReinforceAda(SelfRolling):
    """Reinforce-Ada (balanced) as a selector that rolls out itself (module docstring)."""

    kind = "reinforce_ada"

    def __init__(
        self,
        num_tasks: int,
        rollout: Any,
        *,
        rounds: int = ROUNDS.default,
        round_repeat: int = ROUND_REPEAT.default,
        keep: int = KEEP.default,
        seed: int = SEED.default,
    ) -> None:
        super().__init__(num_tasks, rollout, seed=seed)
        self.rounds = ROUNDS.check(rounds)
        self.round_repeat = ROUND_REPEAT.check(round_repeat)
        self.keep = KEEP.check(keep)
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        #: Prompts that stopped early (reached the exit rule), summed over all selections.
        self.stopped_early = 0

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        ids = self._order.select(batch_size, exclude=None if allowed is None else ~allowed)
        need_pos, need_neg = self.keep // 2, self.keep - self.keep // 2
        pos = np.zeros(ids.size)
        seen = np.zeros(ids.size)
        active = np.ones(ids.size, dtype=bool)
        for _ in range(self.rounds):
            if not active.any():
                break
            succ = self._roll(ids[active], self.round_repeat)
            pos[active] += succ
            seen[active] += self.round_repeat
            done = (pos >= need_pos) & (seen - pos >= need_neg)
            self.stopped_early += int((done & active).sum())
            active &= ~done
        kept, size = kept_subset(pos, seen, self.keep)
        batch = RolledBatch(ids, kept, size, rollouts=self._spent)
        return batch, (ids, pos, seen)

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        return None  # the batch comes from the data loader; nothing is learned across steps

    def _extra_state(self) -> dict[str, Any]:
        return {"order": self._order.state_dict(), "stopped_early": self.stopped_early}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        order = EpochOrder(self.num_tasks, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._order, self.stopped_early = order, int(state.get("stopped_early", 0))


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    return ReinforceAda(n, needs_rollout(m, rollout), **p)


METHOD = Method(
    name="reinforce-ada",
    label="Reinforce-Ada",
    summary="sequential sampling in rounds; a prompt stops once it has both correct and incorrect rollouts",
    params=(ROUNDS, ROUND_REPEAT, KEEP, SEED),
    references="unused",
    rollout_mode=RolloutMode.CALLBACK,
    aliases=("reinforce_ada", "reinforceada"),
    implementation="bots_rft.selector.peers.reinforce_ada:ReinforceAda",
    builder=_build,
)
