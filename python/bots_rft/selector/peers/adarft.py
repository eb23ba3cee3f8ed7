"""AdaRFT, adaptive curriculum reinforcement finetuning (Shi et al., arXiv 2504.05520).

Every task has a fixed difficulty score ``d`` in [0, 100]; AdaRFT keeps one target difficulty
``T`` and trains each step on the ``batch_size`` tasks whose difficulty is nearest it. After the
step it moves the target with the batch's average reward ``R``:

    T <- clip(T + eta * tanh(alpha * (R - beta)), d_min, d_max)

so the target rises while the learner solves more than ``beta`` of its batch and falls otherwise.

Difficulty, as in the paper, is 100 x (1 - a reference model's pass rate): here the strong
reference pass rate (the weak one where the strong is unknown; 50 where both are). The paper's
reference pass rates come from 128 rollouts of a 7B model; the pool's references usually come
from fewer, so many tasks share a score. Ties in |d - T| are broken at random each step (seeded);
the reference sampler takes the first tasks of ``argsort(|d - T|)``, the same ones step after
step while T stands still, so this choice favours AdaRFT slightly.

Defaults: eta = 50, alpha = 2, beta = 0.5 (the paper's and the code's), and T starts at 0 (the
easiest difficulty), as in the authors' code.

Reference lines (uscnlp-lime/verl@bf2dd7e, the authors' code): ``verl/trainer/ppo/custom_sampler.py:L24-39``
(the batch nearest T by ``argsort(|d - T|)``), ``verl/trainer/ppo/ray_trainer.py:L426-437`` (T
starts at 0), ``L956-966`` (R = the batch's mean sequence reward, tanh step, clip);
``verl/trainer/config/ppo_trainer.yaml:L18-24`` (beta 0.5, alpha 2, eta 50, d in [0, 100]);
``examples/adarft/run_qwen2.5-1.5b_seq_balance.sh:L13-21,L39`` (batch 1024, one rollout per prompt;
every method here uses the pool's n).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..._validation import as_int, feedback, rates_or_nan, selectable
from ..._validation import batch_size as _check_batch
from ...errors import CheckpointError, InvalidArgumentError
from ...parameters import SEED, Parameter
from ..method import Method, one_per_task, references
from .base import FloatArray, IdArray, check_state, restore_rng

__all__ = ["AdaRFT", "difficulty_scores"]

STEP_SIZE = Parameter("step_size", "float", 50.0, "AdaRFT: η, the step of the target difficulty (0-100 scale)", 0.0)
SENSITIVITY = Parameter("sensitivity", "float", 2.0, "AdaRFT: α, the sensitivity of the step to the reward gap", 0.0)
TARGET_REWARD = Parameter("target_reward", "float", 0.5, "AdaRFT: β, the batch reward the target aims at", 0.0, 1.0)
INITIAL_DIFFICULTY = Parameter(
    "initial_difficulty",
    "float",
    0.0,
    "AdaRFT: the target difficulty at the start (0 easiest, 100 hardest)",
    0.0,
    100.0,
)


def difficulty_scores(weak: object, strong: object) -> FloatArray:
    """100 x (1 - pass rate) from the strong reference, the weak where the strong is NaN, 50 where
    both are."""
    w = rates_or_nan(weak, "weak")
    s = rates_or_nan(strong, "strong", len(w))
    rate = np.where(np.isnan(s), w, s)
    return np.asarray(100.0 * (1.0 - np.where(np.isnan(rate), 0.5, rate)), dtype=np.float64)


class AdaRFT:
    """AdaRFT as a :class:`~bots_rft.selector.protocol.Selector` (module docstring: rule and
    defaults)."""

    kind = "adarft"

    def __init__(
        self,
        weak: object,
        strong: object,
        *,
        step_size: float = STEP_SIZE.default,
        sensitivity: float = SENSITIVITY.default,
        target_reward: float = TARGET_REWARD.default,
        initial_difficulty: float = INITIAL_DIFFICULTY.default,
        seed: int = SEED.default,
    ) -> None:
        self.difficulty = difficulty_scores(weak, strong)
        if self.difficulty.size == 0:
            raise InvalidArgumentError("weak: must hold the pass rates of at least one task, got none", "weak")
        self.num_tasks = as_int(self.difficulty.size, "num_tasks", minimum=1)
        self.step_size = STEP_SIZE.check(step_size)
        self.sensitivity = SENSITIVITY.check(sensitivity)
        self.target_reward = TARGET_REWARD.check(target_reward)
        self.low, self.high = float(self.difficulty.min()), float(self.difficulty.max())
        self.target = min(self.high, max(self.low, INITIAL_DIFFICULTY.check(initial_difficulty)))
        self.seed = SEED.check(seed)
        self._rng = np.random.default_rng(self.seed)

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        pool = np.arange(self.num_tasks) if allowed is None else np.flatnonzero(allowed)
        b = _check_batch(batch_size, pool.size)
        gap = np.abs(self.difficulty[pool] - self.target)
        # Nearest first; a fresh random order inside each tie.
        order = np.lexsort((self._rng.random(pool.size), gap))
        return np.asarray(pool[order[:b]], dtype=np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        """Move the target difficulty with the batch's average reward."""
        _, succ, tri = feedback(task_ids, successes, trials, self.num_tasks)
        if succ.size == 0:
            return
        reward = float(np.mean(succ / tri))
        moved = self.target + self.step_size * math.tanh(self.sensitivity * (reward - self.target_reward))
        self.target = min(self.high, max(self.low, moved))

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "rng": self._rng.bit_generator.state,
            "target": self.target,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        rng = restore_rng(st.get("rng"))
        target = st.get("target")
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not math.isfinite(target):
            raise CheckpointError(f"state: has an invalid target difficulty {target!r}")
        self._rng, self.target = rng, float(target)
        self.seed = int(st.get("seed", self.seed))


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    refs = references(m, weak, strong)
    assert refs is not None  # required
    return one_per_task(AdaRFT(*refs, **p), n)


METHOD = Method(
    name="adarft",
    label="AdaRFT",
    summary="a target difficulty that moves with the batch reward; the tasks nearest it by reference difficulty",
    params=(STEP_SIZE, SENSITIVITY, TARGET_REWARD, INITIAL_DIFFICULTY, SEED),
    references="required",
    implementation="bots_rft.selector.peers.adarft:AdaRFT",
    builder=_build,
)
