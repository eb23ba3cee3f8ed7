"""GRESO, pre-rollout filtering of prompts by their reward history (Zheng et al., arXiv 2506.02177;
code: Infini-AI-Lab/GRESO, ``verl/trainer/ttis/presampling_selector.py`` and ``ray_trainer.py``).

GRESO is DAPO's dynamic sampling with a cheap filter *before* rollout. A prompt whose latest ``c``
rollout groups (consecutively) all had zero reward variance is skipped with probability
``1 - max(p**c, 0.01)``, where ``p`` is an exploration probability kept separately for prompts that
were always solved (``p_easy``) and never solved (``p_hard``). Prompts that pass the filter are
rolled out ``n`` times and the groups with 0 < successes < n are kept, in generation rounds, until
a training batch is full. The exploration probabilities tune themselves once per step: when the
share of all-correct (all-wrong) groups among the groups rolled out in that step is above its
target (``ray_trainer.py`` resets its counts after every step, L1234-1237),
``p_easy`` (``p_hard``) drops by 0.01, else it rises by 0.01, within [0.05, 0.95]. The targets are
``target_zero_variance / 3`` for easy and ``2 x target_zero_variance / 3`` for hard prompts.

Published defaults (``train-scripts/math_qwen_1_5b_dm_greso.sh`` and the trainer): p_easy = p_hard
= 0.5, target_zero_variance = 0.25, adjustment step 0.01 within [0.05, 0.95], a generation batch
of 384 prompts for a training batch of 256 (``sampling_ratio`` 1.5), and later rounds sized to the
prompts still missing: ``remaining / (1 - zero-variance ratio) x 1.25``, at least 64/256 of the
batch, at most the generation batch; the round whose estimate is within the generation batch is
the last. The exploration probabilities are adapted only after the first epoch, as in the code.

Simulator choices, named: "zero variance" is 0 or n successes (the code's thresholds, mean reward
>= 0.98 / <= 0.11, are the same thing at its n = 8); a batch that is not full after the last round
is topped up with rolled-out zero-variance groups (as this package's DAPO-DS does) so that every
step trains on ``batch_size`` tasks; at most ``max_rounds`` generation rounds per step. Every
rollout is charged.

Reference lines (Infini-AI-Lab/GRESO@b277843): ``verl/trainer/ttis/presampling_selector.py:L102-122``
(easy skip: consecutive mean reward >= 0.98, ``1 - max(p**c, 0.01)``), ``L124-147`` (hard skip:
latest and consecutive <= 0.11), ``L230-255`` (easy test first, then hard), ``L257-260``
(history); ``verl/trainer/ppo/ray_trainer.py:L298-299`` (targets), ``L988-1016`` (filter each
loader batch, accumulate to the round size), ``L1110-1114`` (easy/hard/total counts),
``L1119-1132`` (history of every rolled-out prompt), ``L1141-1147`` (zero-variance filter,
``verl/trainer/ttis/ttis.py:L24-39``), ``L1149-1169`` (next round size and the last round),
``L1170-1182`` (train on the first 256, or on fewer after the last round), ``L1199-1219`` (p
tuning after the first epoch), ``L1234-1237`` (counts reset per step);
``train-scripts/math_qwen_1_5b_dm_greso.sh:L16-23,L43`` (loader batch 32, p 0.5, target 0.25,
384 per 256, n 8). Differences beyond those above (docs/peers.md says whom each favours): the
reference rolls out every filtered prompt accumulated, in loader batches of 32, so a round can
exceed its size by up to 31 prompts; its round estimate truncates where this one rounds up; its
rewards have three levels (1, 0.1 wrong answer, 0 bad format), so an all-wrong group mixing the
two is trained on there and is not counted as hard for ``p_hard``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ..._portable import int_power
from ...errors import CheckpointError
from ...parameters import MAX_ROUNDS, ROLLOUTS, SEED, Parameter
from ..method import Method, RolloutMode, needs_rollout
from ..protocol import RolledBatch
from .base import FloatArray, Groups, IdArray, SelfRolling, saved_array
from .dapo import EpochOrder

__all__ = ["GRESO"]

P_EASY = Parameter("p_easy", "float", 0.5, "GRESO: initial exploration probability of always-solved prompts", 0.0, 1.0)
P_HARD = Parameter("p_hard", "float", 0.5, "GRESO: initial exploration probability of never-solved prompts", 0.0, 1.0)
TARGET_ZERO_VARIANCE = Parameter(
    "target_zero_variance", "float", 0.25, "GRESO: target share of zero-variance groups rolled out", 0.0, 1.0
)
SAMPLING_RATIO = Parameter(
    "sampling_ratio",
    "float",
    1.5,
    "GRESO: generation batch as a multiple of the batch size (384/256)",
    0.0,
    low_open=True,
)

P_STEP, P_MIN, P_MAX = 0.01, 0.05, 0.95
SKIP_FLOOR = 0.01  # a prompt is always kept with probability at least 1%
MIN_ROUND_SHARE = 64 / 256  # the smallest generation round, as a share of the batch


class GRESO(SelfRolling):
    """GRESO as a selector that rolls out itself (module docstring: rule, defaults, choices)."""

    kind = "greso"

    def __init__(
        self,
        num_tasks: int,
        rollout: Any,
        *,
        n_rollouts: int = ROLLOUTS.default,
        p_easy: float = P_EASY.default,
        p_hard: float = P_HARD.default,
        target_zero_variance: float = TARGET_ZERO_VARIANCE.default,
        sampling_ratio: float = SAMPLING_RATIO.default,
        max_rounds: int = MAX_ROUNDS.default,
        seed: int = SEED.default,
    ) -> None:
        super().__init__(num_tasks, rollout, seed=seed)
        self.n_rollouts = ROLLOUTS.check(n_rollouts)
        self.p_easy = P_EASY.check(p_easy)
        self.p_hard = P_HARD.check(p_hard)
        self.target_zero_variance = TARGET_ZERO_VARIANCE.check(target_zero_variance)
        self.sampling_ratio = SAMPLING_RATIO.check(sampling_ratio)
        self.max_rounds = MAX_ROUNDS.check(max_rounds)
        self._order = EpochOrder(self.num_tasks, seed=self.seed)
        self.walked = 0  # prompts handed out by the data-loader walk (epoch = walked // num_tasks)
        self.easy_streak = np.zeros(self.num_tasks, dtype=np.int64)
        self.hard_streak = np.zeros(self.num_tasks, dtype=np.int64)
        self.easy_groups = self.hard_groups = self.total_groups = 0
        #: Prompts skipped before rollout, summed over all selections.
        self.skipped = 0

    @property
    def epoch(self) -> int:
        return self.walked // self.num_tasks

    def skip_probability(self, task_ids: IdArray) -> FloatArray:
        """Each prompt's probability of being skipped before rollout."""
        easy, hard = self.easy_streak[task_ids], self.hard_streak[task_ids]
        streak = np.where(easy > 0, easy, hard)
        p = np.where(easy > 0, self.p_easy, self.p_hard)
        keep = np.maximum(int_power(p, streak), SKIP_FLOOR)  # the same bits on every CPU
        return np.asarray(np.where(streak > 0, 1.0 - keep, 0.0), dtype=np.float64)

    def _draw(self, count: int, free: npt.NDArray[np.bool_], filtered: bool) -> IdArray:
        """Up to ``count`` prompts of ``free`` from the walk, those the filter skips dropped (and
        consumed, as the data loader consumes them) until ``count`` survive or none is left."""
        out: list[IdArray] = []
        got = 0
        while got < count and free.any():
            draw = self._order.select(count - got, exclude=~free)
            if draw.size == 0:
                break
            free[draw] = False
            self.walked += draw.size
            if filtered:
                skip = self._rng.random(draw.size) < self.skip_probability(draw)
                self.skipped += int(skip.sum())
                draw = draw[~skip]
            out.append(draw)
            got += draw.size
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def _roll_step(self, batch_size: int, allowed: npt.NDArray[np.bool_] | None) -> tuple[RolledBatch, Groups]:
        b, n = batch_size, self.n_rollouts
        free = np.ones(self.num_tasks, dtype=bool) if allowed is None else allowed.copy()
        default_round = max(1, math.ceil(self.sampling_ratio * b))
        min_round = max(1, math.ceil(MIN_ROUND_SHARE * b))
        size, last = default_round, False
        rolled_ids: list[IdArray] = []
        rolled_succ: list[FloatArray] = []
        kept = 0
        for _ in range(self.max_rounds):
            ids = self._draw(size, free, filtered=True)
            if ids.size == 0:
                break
            succ = self._roll(ids, n)
            rolled_ids.append(ids)
            rolled_succ.append(succ)
            effective = (succ > 0) & (succ < n)
            kept += int(effective.sum())
            if kept >= b or last:
                break
            share = float(effective.mean())
            estimate = math.ceil((b - kept) / share * 1.25) if share > 0 else default_round
            last = estimate <= default_round
            size = max(min(estimate, default_round), min_round)
        ids_all = np.concatenate(rolled_ids) if rolled_ids else np.zeros(0, dtype=np.int64)
        if ids_all.size < b:  # too few rolled out to fill the batch: roll out unfiltered prompts
            extra = self._draw(b - ids_all.size, free, filtered=False)
            rolled_ids.append(extra)
            rolled_succ.append(self._roll(extra, n))
            ids_all = np.concatenate(rolled_ids)
        succ_all = np.concatenate(rolled_succ)
        effective = (succ_all > 0) & (succ_all < n)
        # The effective groups in rollout order, topped up with zero-variance ones.
        order = np.concatenate([np.flatnonzero(effective), np.flatnonzero(~effective)])[:b]
        batch = RolledBatch(ids_all[order], succ_all[order], np.full(b, float(n)), rollouts=self._spent)
        return batch, (ids_all, succ_all, np.full(ids_all.size, float(n)))

    def _learn(self, task_ids: IdArray, successes: FloatArray, trials: FloatArray) -> None:
        """Extend each rolled-out prompt's reward history; then tune the exploration probabilities."""
        solved, failed = successes >= trials, successes <= 0
        self.easy_streak[task_ids] = np.where(solved, self.easy_streak[task_ids] + 1, 0)
        self.hard_streak[task_ids] = np.where(failed, self.hard_streak[task_ids] + 1, 0)
        self.easy_groups += int(solved.sum())
        self.hard_groups += int(failed.sum())
        self.total_groups += int(task_ids.size)
        # The shares of this step's groups, as the reference computes them: ray_trainer.py resets
        # its easy/hard/total counts after every training step ("reset ratio statistics").
        # (The running totals above are kept as diagnostics only.)
        if self.epoch > 0 and task_ids.size:
            easy_share, hard_share = float(solved.mean()), float(failed.mean())
            self.p_easy = _nudge(self.p_easy, easy_share >= self.target_zero_variance / 3)
            self.p_hard = _nudge(self.p_hard, hard_share >= self.target_zero_variance * 2 / 3)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "order": self._order.state_dict(),
            "walked": self.walked,
            "easy_streak": self.easy_streak.copy(),
            "hard_streak": self.hard_streak.copy(),
            "p_easy": self.p_easy,
            "p_hard": self.p_hard,
            "groups": [self.easy_groups, self.hard_groups, self.total_groups],
            "skipped": self.skipped,
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        n = self.num_tasks
        easy = saved_array(state, "easy_streak", (n,), np.int64)
        hard = saved_array(state, "hard_streak", (n,), np.int64)
        groups = saved_array(state, "groups", (3,), np.int64)
        try:
            walked, skipped = int(state["walked"]), int(state["skipped"])
            p_easy, p_hard = float(state["p_easy"]), float(state["p_hard"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has a malformed GRESO entry ({exc})") from exc
        if not (0.0 <= p_easy <= 1.0 and 0.0 <= p_hard <= 1.0):
            raise CheckpointError(f"state: has exploration probabilities outside [0, 1] ({p_easy}, {p_hard})")
        order = EpochOrder(n, seed=self.seed)
        order.load_state_dict(state.get("order"))  # type: ignore[arg-type]
        self._order, self.walked, self.skipped = order, walked, skipped
        self.easy_streak, self.hard_streak = easy, hard
        self.p_easy, self.p_hard = p_easy, p_hard
        self.easy_groups, self.hard_groups, self.total_groups = (int(g) for g in groups)


def _nudge(p: float, too_many: bool) -> float:
    """GRESO's self-tuning step: explore less when too many zero-variance groups get through."""
    return max(p - P_STEP, P_MIN) if too_many else min(p + P_STEP, P_MAX)


def _build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Any:
    return GRESO(n, needs_rollout(m, rollout), **p)


METHOD = Method(
    name="greso",
    label="GRESO",
    summary="DAPO dynamic sampling that skips, before rollout, prompts whose recent groups had zero "
    "reward variance, with self-tuning exploration probabilities",
    params=(ROLLOUTS, P_EASY, P_HARD, TARGET_ZERO_VARIANCE, SAMPLING_RATIO, MAX_ROUNDS, SEED),
    references="unused",
    rollout_mode=RolloutMode.CALLBACK,
    implementation="bots_rft.selector.peers.greso:GRESO",
    builder=_build,
)
