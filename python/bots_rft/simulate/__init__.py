"""Reproduce the paper's experiments on a fast simulated learner (``bots simulate``).

- :mod:`.learner`: the simulated world and policy (skill groups, latent difficulty, GRPO-like
  learning from p(1-p)-shaped signal, measured weak/strong reference pass rates, held-out set);
- :mod:`.experiment`: methods, configs, and the loop that runs selectors against the learner.

Its tables, plots and files are in :mod:`bots_rft.report` (``simulation``, ``simulation_plots``,
``simulation_files``).

:func:`bots_rft.report.simulation.quick_comparison` is the short version used at the end of
``bots demo`` (it renders a table, so it lives with the report, which imports this package).
"""

from __future__ import annotations

from .experiment import METHODS, ExperimentResult, MethodSpec, SimConfig, run_experiment
from .learner import LearnerConfig, SimulatedLearner, TaskWorld, make_world

__all__ = [
    "LearnerConfig",
    "TaskWorld",
    "SimulatedLearner",
    "make_world",
    "MethodSpec",
    "METHODS",
    "SimConfig",
    "ExperimentResult",
    "run_experiment",
]
