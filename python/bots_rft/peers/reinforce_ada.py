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

Simulator choice, named: the published script estimates each prompt's baseline from *all* its
rollouts (``global_stat_est=True``), so the simulated learner takes each prompt's learning signal
from all its rollouts (successes / rollouts generated), not from the balanced subset of ``keep``,
which would read every stopped prompt as a perfect 50% group. Every rollout is charged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..baselines import EpochOrder, RolledBatch
from ..methods import KEEP, ROUND_REPEAT, ROUNDS
from .base import FloatArray, Groups, IdArray, SelfRolling

__all__ = ["ReinforceAda"]


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
        seed: int = 0,
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
        batch = RolledBatch(ids, pos, seen, rollouts=self._spent)
        return batch, (ids, pos, seen)

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        return None  # the batch comes from the data loader; nothing is learned across steps

    def _extra_state(self) -> dict[str, Any]:
        return {"order": self._order.state_dict(), "stopped_early": self.stopped_early}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        order = EpochOrder(self.num_tasks, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._order, self.stopped_early = order, int(state.get("stopped_early", 0))
