"""Reproduce the paper's experiments on a fast simulated learner (``bots simulate``).

- :mod:`.learner`: the simulated world and policy (skill groups, latent difficulty, GRPO-like
  learning from p(1-p)-shaped signal, measured weak/strong reference pass rates, held-out set);
- :mod:`.experiment`: methods, configs, and the loop that runs selectors against the learner.

Its tables, plots and files are in :mod:`bots_rft.report` (``simulation``, ``simulation_plots``,
``simulation_files``).

:func:`quick_comparison` is the short version used at the end of ``bots demo``.
"""

from __future__ import annotations

from ..errors import ConfigError
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
    "quick_comparison",
]


def quick_comparison(num_tasks: int = 10_000, steps: int = 40, seed: int = 0, progress: bool = False) -> str:
    """Every method once on a small simulated pool (one seed, no sweeps; a few seconds) and
    return the comparison as a short markdown table with a one-line caption."""
    from ..report.simulation import group_rows
    from ..report.tables import markdown_table

    for name, v, lo in (("num_tasks", num_tasks, 64), ("steps", steps, 4), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{name} must be an int >= {lo}, got {v!r}")
    batch = max(8, min(256, num_tasks // 40))
    config = SimConfig(
        learner=LearnerConfig(num_tasks=num_tasks, eval_tasks=2048),
        steps=steps,
        batch_size=batch,
        seeds=(seed,),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )
    result = run_experiment(config, progress=progress, desc="quick comparison")
    caption = (
        f"Simulated learner, {num_tasks:,} tasks, {steps} steps, batch {batch}, "
        f"{config.learner.n_rollouts} rollouts, seed {seed} (full version: `bots simulate`)."
    )
    return caption + "\n\n" + markdown_table(group_rows(result, "methods")) + "\n"
