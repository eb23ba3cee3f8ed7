"""The simulated learner's settings fitted to the real trainer: the one place they live.

:data:`FITTED_LEARNER` holds the settings of :class:`~bots_rft.simulate.learner.LearnerConfig`
that measurements of the real trainer decide (how a step's progress depends on the batch's
signal, how noisy a training trajectory is, and the step size), and :data:`FITTED_FROM` says
what they were fitted to. The scoreboard (:mod:`bots_rft.simulate.scoreboard`) builds its learner
from them and its report states them, so changing this file changes the scoreboard.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FittedLearner", "FITTED_LEARNER", "FITTED_FROM", "NO_SATURATION_K"]


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
        # The learner's defaults are read from here (simulate/learner.py imports this module), so
        # the checks are this class's own; a test builds a LearnerConfig from every instance.
        from ..errors import ConfigError

        if self.step_rule not in ("linear", "saturating"):
            raise ConfigError(f"step_rule must be 'linear' or 'saturating', got {self.step_rule!r}")
        for name in ("saturation_k", "trajectory_noise", "learning_rate"):
            v = getattr(self, name)
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")

    def settings(self) -> dict[str, Any]:
        """The keyword arguments of :class:`LearnerConfig` these settings set."""
        return asdict(self)

    def describe(self) -> str:
        """One phrase stating the rule and its parameters (for reports)."""
        rule = (
            (
                "step_rule = saturating with K far above any batch's signal (a step's progress is proportional "
                f"to S, the batch's summed signal; K = {self.saturation_k:g})"
                if self.saturation_k >= NO_SATURATION_K
                else f"step_rule = saturating (a step's progress is S / (S + {self.saturation_k:g}), S the batch's "
                "summed signal)"
            )
            if self.step_rule == "saturating"
            else "step_rule = linear (a step's progress is the batch-mean signal S / B)"
        )
        return f"{rule}, trajectory_noise = {self.trajectory_noise:g}, learning_rate = {self.learning_rate:g}"


#: K of the saturating rule standing in for "no saturation": far above any batch's summed signal,
#: so a step's progress is S / K to 1e-4, proportional to S (the learning rate absorbs the 1 / K).
NO_SATURATION_K = 1e6

#: The settings fitted to the real trainer (docs/trial/calibration.md, made by
#: examples/trial/calibrate_simulator.py), and the simulated learner's defaults. The step rule: of the rules tried, "no saturation"
#: (progress proportional to the batch's summed signal S) explained the dilution test's runs best
#: and the old linear rule (S / B) worst. The learning rate keeps Random's gain over the run on the
#: paper-54k regime what the old learner gave (0.06 x K / 256); the trajectory noise gives Random
#: the real trial's seed spread relative to its gain.
FITTED_LEARNER = FittedLearner(
    step_rule="saturating",
    saturation_k=NO_SATURATION_K,
    trajectory_noise=0.04,
    learning_rate=0.06 * NO_SATURATION_K / 256,
)
#: What :data:`FITTED_LEARNER` was fitted to.
FITTED_FROM = (
    "fitted to real GRPO runs: the step rule to the dilution test's 25 runs (no saturation best, the linear rule "
    "worst), the trajectory noise to the pre-registered trial's Random arm (seed SD of the mean held-out accuracy "
    "over the run / its gain, 0.17, 20 seeds), the learning rate to keep Random's gain on paper-54k"
)
