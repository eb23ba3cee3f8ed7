"""Simulator scenarios beyond the paper's single pool: several task sets mixed by weights, and
graded rewards (``bots simulate --scenario multipool|graded``).

Both reuse the default world and learner (:mod:`.learner`) unchanged and run every arm on the
same world per seed, each arm's rollouts on a stream named by the arm.

**multipool**: the world's tasks are split by initial difficulty (the latent logit ``b_k``) into
three task sets, ``easy`` (top 30%), ``medium`` (middle 40%) and ``hard`` (bottom 30%), laid out
as contiguous id ranges (as concatenated datasets are), and the user asks for them in proportions
``pool_weights``. Arms: Random over the concatenation (ignores the weights); *fixed mix*, the
weights' quotas filled uniformly at random within each set (Trinity-RFT's taskset scheduling with
weights); BOTS over the concatenation (one posterior, ignores the weights); and
:class:`~bots_rft.selector.multipool.MultiPool`, one BOTS per set with the weights' quotas.

**graded**: each rollout's reward is the fraction of ``checks`` sub-checks it passes, each check
passing independently with the task's success probability ``p``, so the mean reward is ``p``. The
learner learns from a group as from a binary one with rate ``r̄`` (its mean reward; GRPO's
signal ``4 r̄ (1 − r̄)``). Arms: Random; BOTS fed the rewards as fractional evidence
(:meth:`BOTS.update_rewards`); BOTS fed ``success_threshold=1`` (success = every check passed,
probability ``p^checks``) and ``success_threshold=0.5`` (at least half passed). A group is
effective when its rewards are not all equal.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from ..estimators import Interpolation
from ..parameters import LAM, MIN_GAP, MOMENTUM, RHO, TARGET
from ..selector.bots import BOTS
from ..selector.multipool import MultiPool
from ..selector.static import RandomSelector
from .learner import LearnerConfig, SimulatedLearner, TaskWorld, make_world

__all__ = [
    "SCENARIOS",
    "POOL_NAMES",
    "ScenarioConfig",
    "ScenarioRun",
    "split_world",
    "graded_rewards",
    "run_scenario",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SCENARIOS = ("multipool", "graded")
POOL_NAMES = ("easy", "medium", "hard")
#: Each set's share of the world's tasks, easiest first.
POOL_FRACTIONS = (0.3, 0.4, 0.3)

MULTIPOOL_ARMS = ("Random", "Fixed mix", "BOTS (one pool)", "MultiPool")
GRADED_ARMS = ("Random", "BOTS fractional", "BOTS threshold 1", "BOTS threshold 0.5")


@dataclass(frozen=True)
class ScenarioConfig:
    """One scenario run: the world, the schedule, the seeds and the scenario's own setting."""

    scenario: str
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    steps: int = 100
    batch_size: int = 256
    seeds: tuple[int, ...] = (0, 1, 2)
    lam: float = LAM.default
    rho: float = RHO.default
    pool_weights: tuple[float, ...] = (0.2, 0.4, 0.4)  # easy, medium, hard
    checks: int = 4  # sub-checks per rollout (graded)
    threads: int | None = 1

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ConfigError(f"scenario: expected one of {list(SCENARIOS)}, got {self.scenario!r}")
        for name in ("steps", "batch_size", "checks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(f"{name}: must be a positive int, got {v!r}")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ConfigError(f"seeds: must be non-negative ints, got {self.seeds!r}")
        w = self.pool_weights
        if len(w) != len(POOL_NAMES) or any(not np.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
            raise ConfigError(
                f"pool_weights: must be {len(POOL_NAMES)} finite numbers >= 0, not all 0 "
                f"({', '.join(POOL_NAMES)}), got {w!r}"
            )
        smallest = min(_pool_sizes(self.learner.num_tasks))
        if self.batch_size > smallest:
            raise ConfigError(f"batch_size: must be at most the smallest task set ({smallest}), got {self.batch_size}")

    @property
    def arms(self) -> tuple[str, ...]:
        return MULTIPOOL_ARMS if self.scenario == "multipool" else GRADED_ARMS


@dataclass
class ScenarioRun:
    """Per-step measurements of one arm on one seed."""

    arm: str
    seed: int
    perf: FloatArray  # [T+1] held-out score before training and after each step
    etr: FloatArray  # [T] effective share of the batch
    shares: FloatArray  # [T, pools] each task set's share of the batch (multipool; else [T, 0])


def _pool_sizes(num_tasks: int) -> list[int]:
    sizes = [int(num_tasks * f) for f in POOL_FRACTIONS[:-1]]
    return [*sizes, num_tasks - sum(sizes)]


def split_world(world: TaskWorld) -> tuple[TaskWorld, IntArray]:
    """The world with its tasks reordered into the task sets easy, medium, hard (by initial
    logit, highest first; ties by id), and the sets' sizes. Held-out tasks are unchanged."""
    order = np.lexsort((np.arange(world.num_tasks), -world.base_logit))
    perm = {
        name: getattr(world, name)[order]
        for name in ("group", "base_logit", "pace", "weak_true", "strong_true", "weak", "strong")
    }
    return replace(world, **perm), np.asarray(_pool_sizes(world.num_tasks), dtype=np.int64)


def graded_rewards(p: FloatArray, rollouts: int, checks: int, rng: np.random.Generator) -> FloatArray:
    """[B, rollouts] rewards: the fraction of ``checks`` independent checks passed, each with the
    task's probability ``p`` (so a reward's mean is ``p``)."""
    return rng.binomial(checks, np.repeat(p[:, None], rollouts, axis=1)) / checks


def _quotas(weights: FloatArray, batch: int) -> IntArray:
    """Largest-remainder split of ``batch`` by ``weights`` (ties: lower index)."""
    owed = weights / weights.sum() * batch
    q = np.floor(owed).astype(np.int64)
    order = np.lexsort((np.arange(q.size), -(owed - q)))
    q[order[: batch - int(q.sum())]] += 1
    return q


class _FixedMix:
    """Uniform random tasks within each set, the sets' quotas fixed by the weights."""

    def __init__(self, sizes: IntArray, weights: FloatArray, batch: int, seed: int) -> None:
        self._offsets = np.concatenate(([0], np.cumsum(sizes)))
        self._pools = [RandomSelector(int(n), seed=seed * 31 + i) for i, n in enumerate(sizes)]
        self._quotas = _quotas(weights, batch)

    def select(self, batch: int) -> IntArray:
        return np.concatenate(
            [
                sel.select(int(q)) + self._offsets[i]
                for i, (sel, q) in enumerate(zip(self._pools, self._quotas))
                if q > 0
            ]
        )

    def update(self, ids: Any, succ: Any, trials: Any) -> None:  # random: nothing to learn
        pass


def _bots(world: TaskWorld, lo: int, hi: int, config: ScenarioConfig, seed: int) -> BOTS:
    evidence = Interpolation(world.weak[lo:hi], world.strong[lo:hi], MOMENTUM.default, min_gap=MIN_GAP.default)
    return BOTS(
        hi - lo,
        lam=config.lam,
        rho=config.rho,
        target=TARGET.default,
        n_rollouts=world.config.n_rollouts,
        evidence=evidence,
        seed=seed,
        threads=config.threads,
    )


def _multipool_selector(arm: str, world: TaskWorld, sizes: IntArray, config: ScenarioConfig, seed: int) -> Any:
    weights = np.asarray(config.pool_weights, dtype=np.float64)
    if arm == "Random":
        return RandomSelector(world.num_tasks, seed=seed)
    if arm == "Fixed mix":
        return _FixedMix(sizes, weights, config.batch_size, seed)
    if arm == "BOTS (one pool)":
        return _bots(world, 0, world.num_tasks, config, seed)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    pools = [_bots(world, int(offsets[i]), int(offsets[i + 1]), config, seed * 31 + i) for i in range(sizes.size)]
    return MultiPool(pools, weights=list(config.pool_weights), names=POOL_NAMES)


def _run_arm(arm: str, world: TaskWorld, sizes: IntArray, seed: int, config: ScenarioConfig) -> ScenarioRun:
    T, B, n = config.steps, config.batch_size, world.config.n_rollouts
    stream = zlib.crc32(f"{config.scenario}:{arm}".encode())
    learner = SimulatedLearner(world, seed, stream=stream)
    rng = np.random.default_rng([int(seed), 0x67AD, stream])
    multipool = config.scenario == "multipool"
    if multipool:
        selector = _multipool_selector(arm, world, sizes, config, seed)
    elif arm == "Random":
        selector = RandomSelector(world.num_tasks, seed=seed)
    else:
        selector = _bots(world, 0, world.num_tasks, config, seed)
    threshold = {"BOTS threshold 1": 1.0, "BOTS threshold 0.5": 0.5}.get(arm)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    run = ScenarioRun(
        arm, seed, np.full(T + 1, np.nan), np.full(T, np.nan), np.zeros((T, sizes.size if multipool else 0))
    )
    run.perf[0] = learner.evaluate()
    for t in range(T):
        ids = selector.select(B)
        if multipool:
            succ = learner.rollout(ids)
            run.etr[t] = float(np.mean((succ > 0) & (succ < n)))
            run.shares[t] = (
                np.bincount(np.searchsorted(offsets, ids, side="right") - 1, minlength=sizes.size) / ids.size
            )
            selector.update(ids, succ, n)
            learner.train(ids, succ)
        else:
            rewards = graded_rewards(learner.success_prob(ids), n, config.checks, rng)
            run.etr[t] = float(np.mean(rewards.max(axis=1) > rewards.min(axis=1)))
            if isinstance(selector, BOTS):
                selector.update_rewards(ids, rewards, success_threshold=threshold)
            learner.train(ids, rewards.mean(axis=1) * n)
        run.perf[t + 1] = learner.evaluate()
    return run


def run_scenario(config: ScenarioConfig) -> list[ScenarioRun]:
    """Every arm of the scenario on every seed (all arms of a seed share one world)."""
    runs = []
    for seed in config.seeds:
        world = make_world(config.learner, seed)
        sizes = np.asarray([world.num_tasks], dtype=np.int64)
        if config.scenario == "multipool":
            world, sizes = split_world(world)
        for arm in config.arms:
            runs.append(_run_arm(arm, world, sizes, seed, config))
    return runs
