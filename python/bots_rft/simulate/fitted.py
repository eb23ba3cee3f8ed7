"""The simulated learner's settings fitted to the real trainer: the one place they live.

:data:`FITTED_LEARNER` holds the settings of :class:`~bots_rft.simulate.learner.LearnerConfig`
that measurements of the real trainer decide (how a step's progress depends on the batch's
signal, how noisy a training trajectory is, and the step size), and :data:`FITTED_FROM` says
what they were fitted to. The scoreboard (:mod:`bots_rft.simulate.scoreboard`) builds its learner
from them and its report states them, so changing this file changes the scoreboard.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .learner import LearnerConfig

__all__ = ["FittedLearner", "FITTED_LEARNER", "FITTED_FROM"]


@dataclass(frozen=True)
class FittedLearner:
    """The fitted fields of :class:`~bots_rft.simulate.learner.LearnerConfig` (same names and
    meaning): ``step_rule`` ("linear" | "saturating"), ``saturation_k`` (the saturating rule's
    S / (S + saturation_k)), ``trajectory_noise`` (per-step N(0, σ²) ability noise) and
    ``learning_rate`` (ability gained per step by a batch of maximal signal)."""

    step_rule: str
    saturation_k: float
    trajectory_noise: float
    learning_rate: float

    def __post_init__(self) -> None:
        LearnerConfig(**self.settings())  # the learner's own checks, one ConfigError line

    def settings(self) -> dict[str, Any]:
        """The keyword arguments of :class:`LearnerConfig` these settings set."""
        return asdict(self)

    def describe(self) -> str:
        """One phrase stating the rule and its parameters (for reports)."""
        rule = (
            f"step_rule = saturating (a step's progress is S / (S + {self.saturation_k:g}), S the batch's summed "
            "signal)"
            if self.step_rule == "saturating"
            else "step_rule = linear (a step's progress is the batch-mean signal S / B)"
        )
        return f"{rule}, trajectory_noise = {self.trajectory_noise:g}, learning_rate = {self.learning_rate:g}"


#: The settings fitted to the real trainer (placeholders until the fit replaces them).
FITTED_LEARNER = FittedLearner(step_rule="saturating", saturation_k=4.0, trajectory_noise=0.0, learning_rate=0.06)
#: What :data:`FITTED_LEARNER` was fitted to.
FITTED_FROM = "placeholder, to be replaced by the fit"
