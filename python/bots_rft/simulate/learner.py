"""A fast simulated RFT learner: a stand-in for "GRPO on an LLM" that runs in milliseconds.

The model (docs/what-bots-does.md explains it at length):

- Every task k belongs to one of G skill groups g(k) and has a latent initial logit b_k (its
  difficulty, with a per-group offset) and a pace v_k > 0 (how strongly it responds to skill).
- The policy has one ability a_g per group, starting at 0. Its success probability on task k is
  ``p_k = sigmoid(b_k + m_k + v_k * a_{g(k)})``, where m_k is what the policy memorised from
  training on task k itself.
- A GRPO step on a batch learns in proportion to each task's learning signal, taken from its
  rollouts as ``4 r (1 - r)`` with r the empirical rate: 0 when all rollouts agree (GRPO's
  advantages vanish), 1 at r = 1/2. Methods may roll out tasks a different number of times
  (``rollout(ids, counts)``); each task's r is then its own k / trials, and every task weighs the
  same in the batch unless ``rollout_weighting`` > 0 (then tasks with more rollouts weigh more)
  or ``group_noise`` > 0 (then a group of n rollouts counts n / (n + group_noise) of its signal:
  its gradient is less noisy). How a step's progress scales with the batch's summed signal S is
  ``step_rule``: "saturating" (the default) moves by S / (S + saturation_k) whatever B, as an
  optimizer that normalises its step does; the default K is far above any batch's signal, so a
  step's progress is proportional to S and zero-variance groups neither help nor dilute it: the
  rule the real trainer followed in the dilution test (docs/training.md), with the per-step
  trajectory noise fitted to the real trial's seed spread (:mod:`.fitted`). "linear" moves in
  proportion to the batch mean S / B, so zero-variance groups dilute a step (the learner before
  that test; the real runs fitted it worst). Group abilities grow by the signal of their own tasks
  plus a share transferred to every group, with diminishing returns; trained tasks also get a
  small task-specific boost m_k.
- Weak and strong reference models are the same family at fixed abilities with their own
  per-group profile and per-task noise. Their pass rates are *measured* from 16 rollouts each, as
  GURU's difficulty tags are. Because paces differ and the link is a sigmoid, interpolating
  between them is informative but not exact.
- A held-out evaluation set from the same distribution gives the "benchmark" score: the expected
  accuracy on it (no sampling noise, so curves differ only through training).

Everything is vectorised numpy and seeded: the world depends only on (config, seed); each
learner's rollouts on its own stream.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError, InvalidArgumentError, InvalidTypeError
from .fields import documented
from .fitted import FITTED_LEARNER

__all__ = [
    "LearnerConfig",
    "TaskWorld",
    "SimulatedLearner",
    "make_world",
    "STEP_RULES",
    "LINEAR_LEARNING_RATE",
    "default_learning_rate",
]

#: How a step's progress depends on the batch's signal (LearnerConfig.step_rule).
STEP_RULES = ("linear", "saturating")

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The linear rule's step size: with it, random selection on the default world (batch 256, 16
#: rollouts) improves the held-out score by about half its initial value in 100 steps.
LINEAR_LEARNING_RATE = 0.06
#: A typical batch of that calibration: 256 tasks at a mean signal of 0.3 (summed signal 76.8).
_REFERENCE_BATCH, _REFERENCE_SIGNAL = 256, 0.3 * 256


def default_learning_rate(step_rule: str, saturation_k: float) -> float:
    """The step size a :class:`LearnerConfig` uses when ``learning_rate`` is left at None.

    "linear": :data:`LINEAR_LEARNING_RATE`. "saturating" with the fitted K: the fitted rate
    (:data:`~.fitted.FITTED_LEARNER`, which keeps Random's gain on the default world what the
    linear rule gives). Any other K: the rate at which the calibration's typical batch (256 tasks,
    summed signal 76.8) moves as far as under the linear rule, 0.06 x (76.8 + K) / 256."""
    if step_rule == "linear":
        return LINEAR_LEARNING_RATE
    if step_rule == FITTED_LEARNER.step_rule and saturation_k == FITTED_LEARNER.saturation_k:
        return FITTED_LEARNER.learning_rate
    return LINEAR_LEARNING_RATE * (_REFERENCE_SIGNAL + saturation_k) / _REFERENCE_BATCH


@dataclass(frozen=True)
class LearnerConfig:
    """Parameters of the simulated world and learner. Defaults are calibrated so that, like
    Qwen2.5-1.5B-Instruct on GURU-Math, about half of a random batch is unsolvable (0/16), a few
    percent are mastered (16/16), and random selection improves the held-out score by roughly
    half its initial value over 100 steps of batch 256. The step rule, its K and the trajectory
    noise default to the values fitted to the real trainer (:data:`~.fitted.FITTED_LEARNER`);
    ``learning_rate`` None (the default) means the rule's own step size
    (:func:`default_learning_rate`, read back as :attr:`step_size`)."""

    # The settings with a ``bots simulate`` flag of their own, its help their doc (every other one
    # is set with --learner KEY=VALUE).
    num_tasks: int = documented("pool size (the default: GURU-Math's)", 54_400, minimum=1, flag="--tasks")
    num_groups: int = documented("skill groups of the simulated pool", 8, minimum=1, flag="--groups")
    eval_tasks: int = documented("held-out tasks", 4_096, minimum=1)
    # With one rollout no task is ever effective (0 < successes < 1) and GRPO has no signal.
    n_rollouts: int = documented("rollouts per task, >= 2", 16, minimum=2, flag="--rollouts")
    ref_rollouts: int = 16  # rollouts behind each reference pass rate (GURU: 16)
    # Initial logits b_k ~ N(difficulty_mean + group offset, difficulty_std).
    difficulty_mean: float = -3.0
    difficulty_std: float = 3.5
    group_std: float = 0.6
    pace_sigma: float = 0.5  # log-normal spread of the per-task pace v_k
    # Reference models: abilities (in the learner's units) and how they deviate from the learner.
    weak_level: float = 1.0
    strong_level: float = 3.5
    ref_group_std: float = 0.4
    ref_task_noise: float = 1.5
    # Learning dynamics.
    # Ability gained per step by a batch of maximal signal (None: the step rule's default, see
    # default_learning_rate; the step actually taken is `step_size`).
    learning_rate: float | None = None
    transfer: float = 0.5  # share of a group's gain that generalises to every group
    saturation: float = 4.0  # gains shrink as exp(-a / saturation)
    memorisation: float = 0.5  # logit boost of a task per unit of its own signal
    repeat_decay: float = 0.8  # the generalisable share of a task's signal decays as this ** times seen
    # How a batch whose tasks had different numbers of rollouts weighs them: each task's signal
    # counts (trials / mean trials) ** rollout_weighting. 0: every task alike, whatever its group
    # size (a per-group mean loss, GRPO's); 1: in proportion to its rollouts (a loss averaged over
    # all rollouts, DAPO's token mean). Batches of n rollouts per task are the same either way.
    rollout_weighting: float = 0.0
    # Gradient noise that falls with the group size: a group of n rollouts contributes its signal
    # times n / (n + group_noise). With a step size tuned to the noise, the progress a gradient
    # estimate from B samples buys is proportional to B / (B + B_noise), B_noise being the noise
    # scale tr(Σ) / |G|² (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training");
    # here B is the group's rollouts, so bigger groups on a task buy a cleaner gradient from it.
    # 0 (the default, the paper's learner): the group size does not matter, only its rate.
    group_noise: float = 0.0
    # How a step's progress depends on the batch's signal S (the sum of its tasks' weighted
    # signals). "linear": in proportion to the batch mean S / B, so B more zero-variance groups in
    # a batch of B halve a step's progress (a plain gradient step on a mean loss). "saturating":
    # S / (S + saturation_k), whatever B: zero-variance groups change nothing and more
    # informative groups buy a less noisy direction with diminishing returns (an optimizer that
    # normalises its step, as AdamW does; saturation_k 0: every step with any signal makes the
    # same progress). Each group's share of the progress is its share of S either way.
    step_rule: str = FITTED_LEARNER.step_rule
    saturation_k: float = FITTED_LEARNER.saturation_k
    # Per-step randomness of training itself (minibatch order, sampling noise in the gradient):
    # every group's ability moves by a N(0, trajectory_noise**2) step each training step, on a
    # stream of its own (0: none; runs then differ only through their rollouts).
    trajectory_noise: float = FITTED_LEARNER.trajectory_noise
    # A sudden change of skill, off by default: after training step `shift_step` (1-based; 0 = never)
    # every group's ability moves by `shift` (positive: a jump, e.g. a merged checkpoint; negative:
    # forgetting). Evidence gathered before it then describes a learner that no longer exists.
    shift_step: int = 0
    shift: float = 0.0
    # How much the simulated task embeddings (signals.embeddings, read by bots-sim and bots-embed)
    # know of a task: Gaussian noise of this standard deviation on each latent feature (skill
    # group, standardised initial logit, standardised log pace) before they are mixed into the
    # embedding's dimensions. 0: a perfect (noisy only by the isotropic jitter) image of the task;
    # large: nothing. examples/trial3/predict.py fits it to what a real policy's embeddings carry.
    embedding_noise: float = 0.5

    def __post_init__(self) -> None:
        positive_ints = ("num_tasks", "num_groups", "eval_tasks", "n_rollouts", "ref_rollouts")
        for name in positive_ints:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        non_negative = (
            "difficulty_std",
            "group_std",
            "pace_sigma",
            "ref_group_std",
            "ref_task_noise",
            "memorisation",
            "embedding_noise",
        )
        for name in non_negative:
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
        if isinstance(self.shift_step, bool) or not isinstance(self.shift_step, int) or self.shift_step < 0:
            raise ConfigError(f"shift_step must be an int >= 0, got {self.shift_step!r}")
        if not (isinstance(self.shift, (int, float)) and np.isfinite(self.shift)):
            raise ConfigError(f"shift must be a finite number, got {self.shift!r}")
        if not (isinstance(self.group_noise, (int, float)) and np.isfinite(self.group_noise) and self.group_noise >= 0):
            raise ConfigError(f"group_noise must be a finite number >= 0, got {self.group_noise!r}")
        if not (isinstance(self.rollout_weighting, (int, float)) and 0.0 <= self.rollout_weighting <= 1.0):
            raise ConfigError(f"rollout_weighting must lie in [0, 1], got {self.rollout_weighting!r}")
        if not 0.0 <= self.repeat_decay <= 1.0:
            raise ConfigError(f"repeat_decay must lie in [0, 1], got {self.repeat_decay!r}")
        if not 0.0 <= self.transfer <= 1.0:
            raise ConfigError(f"transfer must lie in [0, 1], got {self.transfer!r}")
        if not self.saturation > 0:
            raise ConfigError(f"saturation must be > 0, got {self.saturation!r}")
        if self.step_rule not in STEP_RULES:
            raise ConfigError(f"step_rule must be one of {', '.join(STEP_RULES)}, got {self.step_rule!r}")
        for name in ("saturation_k", "trajectory_noise"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
        lr = self.learning_rate
        if lr is not None and (
            isinstance(lr, bool) or not (isinstance(lr, (int, float)) and np.isfinite(lr) and lr >= 0)
        ):
            raise ConfigError(f"learning_rate must be a finite number >= 0 or None (the rule's default), got {lr!r}")

    @property
    def step_size(self) -> float:
        """The learning rate the learner uses: ``learning_rate``, or the rule's default when it is
        None (:func:`default_learning_rate`)."""
        if self.learning_rate is None:
            return default_learning_rate(self.step_rule, self.saturation_k)
        return float(self.learning_rate)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LearnerConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown learner settings: {sorted(unknown)}")
        return cls(**d)


def _rollout_counts(counts: npt.ArrayLike, size: int) -> IntArray:
    """Per-task rollout counts as an int array of ``size`` entries, each >= 0."""
    k = np.asarray(counts)
    if k.dtype.kind not in "iu" or k.shape not in ((), (size,)):
        raise InvalidTypeError(f"counts: must be an integer or {size} integers, got {counts!r}", "counts")
    if np.any(k < 0):
        raise InvalidArgumentError(f"counts: must be >= 0, got min {int(k.min())}", "counts")
    return np.broadcast_to(k.astype(np.int64), (size,))


def _sigmoid(x: FloatArray) -> FloatArray:
    return np.asarray(0.5 * (1.0 + np.tanh(0.5 * x)), dtype=np.float64)


@dataclass(frozen=True)
class TaskWorld:
    """The fixed part of a simulation: tasks, reference pass rates and the held-out set."""

    config: LearnerConfig
    group: IntArray  # [N] skill group of each task
    base_logit: FloatArray  # [N] b_k
    pace: FloatArray  # [N] v_k
    weak_true: FloatArray  # [N] weak reference's success probability
    strong_true: FloatArray  # [N]
    weak: FloatArray  # [N] weak reference pass rate measured from ref_rollouts rollouts
    strong: FloatArray  # [N]
    eval_group: IntArray  # [M]
    eval_base: FloatArray  # [M]
    eval_pace: FloatArray  # [M]

    @property
    def num_tasks(self) -> int:
        return int(self.group.size)


def make_world(config: LearnerConfig, seed: int) -> TaskWorld:
    """Draw a world; the same (config, seed) always gives the same world."""
    c = config
    rng = np.random.default_rng([int(seed), 0x57A5])
    offsets = rng.normal(0.0, c.group_std, c.num_groups)

    def tasks(m: int) -> tuple[IntArray, FloatArray, FloatArray]:
        g = rng.integers(0, c.num_groups, m).astype(np.int64)
        b = rng.normal(c.difficulty_mean, c.difficulty_std, m) + offsets[g]
        v = rng.lognormal(0.0, c.pace_sigma, m)
        return g, b, v

    group, base, pace = tasks(c.num_tasks)

    def reference(level: float) -> tuple[FloatArray, FloatArray]:
        profile = level + rng.normal(0.0, c.ref_group_std, c.num_groups)
        noise = rng.normal(0.0, c.ref_task_noise, c.num_tasks)
        p = _sigmoid(base + pace * profile[group] + noise)
        measured = rng.binomial(c.ref_rollouts, p) / c.ref_rollouts
        return p, measured.astype(np.float64)

    weak_true, weak = reference(c.weak_level)
    strong_true, strong = reference(c.strong_level)
    eval_group, eval_base, eval_pace = tasks(c.eval_tasks)
    return TaskWorld(c, group, base, pace, weak_true, strong_true, weak, strong, eval_group, eval_base, eval_pace)


class SimulatedLearner:
    """The evolving policy in a :class:`TaskWorld`: roll out, train, evaluate."""

    def __init__(self, world: TaskWorld, seed: int, stream: int = 0) -> None:
        self.world = world
        c = world.config
        self.ability: FloatArray = np.zeros(c.num_groups, dtype=np.float64)
        self.memory: FloatArray = np.zeros(c.num_tasks, dtype=np.float64)
        self.times_trained: IntArray = np.zeros(c.num_tasks, dtype=np.int64)
        # Rollout noise on its own stream, so methods sharing a world do not share luck.
        self._rng = np.random.default_rng([int(seed), 0x2011, int(stream)])
        # Training noise on another, so turning it on leaves every rollout draw as it was.
        self._train_rng = np.random.default_rng([int(seed), 0x7E41, int(stream)])
        self.steps = 0

    def success_prob(self, task_ids: IntArray | None = None) -> FloatArray:
        """True success probability of the current policy on ``task_ids`` (all tasks if None)."""
        w = self.world
        if task_ids is None:
            logit = w.base_logit + self.memory + w.pace * self.ability[w.group]
        else:
            ids = np.asarray(task_ids, dtype=np.int64)
            logit = w.base_logit[ids] + self.memory[ids] + w.pace[ids] * self.ability[w.group[ids]]
        return _sigmoid(logit)

    def rollout(self, task_ids: IntArray, counts: npt.ArrayLike | None = None) -> IntArray:
        """Successes of each task (a fresh Binomial draw per call): out of ``n_rollouts`` each, or
        out of ``counts[i]`` for task i when ``counts`` is given (methods that spend a variable
        number of rollouts per task: screening, sequential sampling, budget allocation).

        Without ``counts`` the draw is the one this learner always made, so runs of methods that
        roll out ``n_rollouts`` per task reproduce exactly."""
        p = self.success_prob(task_ids)
        if counts is None:
            return self._rng.binomial(self.world.config.n_rollouts, p).astype(np.int64)
        k = _rollout_counts(counts, p.size)
        return self._rng.binomial(k, p).astype(np.int64)

    def train(self, task_ids: IntArray, successes: npt.ArrayLike, trials: npt.ArrayLike | None = None) -> float:
        """One GRPO-like step on a batch; returns the batch's mean learning signal.

        ``trials``: the rollouts behind each task's ``successes`` (a number or one per task;
        default ``n_rollouts``). Each task's signal comes from its own rate successes / trials."""
        w, c = self.world, self.world.config
        ids = np.asarray(task_ids, dtype=np.int64)
        if trials is None:
            rate = np.asarray(successes, dtype=np.float64) / c.n_rollouts
        else:
            n = np.asarray(trials, dtype=np.float64)
            if np.any(~np.isfinite(n)) or np.any(n <= 0):
                raise InvalidArgumentError(f"trials: must be finite and > 0, got {trials!r}", "trials")
            rate = np.asarray(successes, dtype=np.float64) / n
        signal = 4.0 * rate * (1.0 - rate)
        if ids.size == 0:
            return 0.0
        # The loss averages over the batch, so each task moves its group by signal / B; a prompt
        # trained on before teaches less that transfers (it is being memorised instead).
        weight = c.repeat_decay ** self.times_trained[ids]
        if trials is not None and c.rollout_weighting > 0:
            # Tasks with more rollouts weigh more in a loss averaged over rollouts (rollout_weighting).
            n = np.broadcast_to(np.asarray(trials, dtype=np.float64), ids.shape)
            weight = weight * (n / n.mean()) ** c.rollout_weighting
        if c.group_noise > 0:
            n_k = np.broadcast_to(np.asarray(c.n_rollouts if trials is None else trials, dtype=np.float64), ids.shape)
            weight = weight * (n_k / (n_k + c.group_noise))
        own: FloatArray = np.asarray(
            np.bincount(w.group[ids], weights=signal * weight, minlength=c.num_groups), dtype=np.float64
        )
        if c.step_rule == "linear":
            own = own / ids.size
        else:
            total = float(own.sum())
            own = own / (total + c.saturation_k) if total + c.saturation_k > 0 else own
        gain = (1.0 - c.transfer) * c.num_groups * own + c.transfer * own.sum()
        self.ability += c.step_size * gain * np.exp(-self.ability / c.saturation)
        if c.trajectory_noise > 0:
            self.ability += self._train_rng.normal(0.0, c.trajectory_noise, c.num_groups)
        np.add.at(self.memory, ids, c.memorisation * signal)
        np.add.at(self.times_trained, ids, 1)
        self.steps += 1
        if self.steps == c.shift_step:
            self.ability += c.shift
        return float(signal.mean())

    def evaluate(self) -> float:
        """Expected accuracy on the held-out set."""
        w = self.world
        logit = w.eval_base + w.eval_pace * self.ability[w.eval_group]
        return float(_sigmoid(logit).mean())
