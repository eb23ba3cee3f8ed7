"""Every measurement of selection and learning, in one package that the simulator, the trainer,
the reports and the trainer integrations all use.

- :mod:`.paper`: the paper's metrics (effective task ratio and the strict ratios, TTB, BSF, the
  rollout axis, Pearson / ROC AUC of the implicit evidence, success-rate heatmaps, Student-t
  intervals); re-exported here, so ``from bots_rft.metrics import effective_ratios`` works.
- :mod:`.calibration`: how well the posterior predicted the groups it picked (Brier, ECE,
  Spearman, the zero-variance share), per step and accumulated.
- :mod:`.step`: the ``bots/*`` names a training step's selection and update are logged under,
  whatever the trainer (the in-house GRPO trainer and every integration).
"""

from __future__ import annotations

from .paper import (
    BSF_BUDGETS,
    STRICT_HIGH,
    STRICT_LOW,
    TTB_FRACTIONS,
    EffectiveRatios,
    best_so_far,
    effective_probability,
    effective_ratios,
    first_reach,
    format_ratio,
    mean_ci,
    pearson,
    rate_heatmap,
    rate_heatmap_from_counts,
    rate_histogram,
    roc_auc,
    rollout_axis,
    time_to_baseline,
)

__all__ = [
    "TTB_FRACTIONS",
    "BSF_BUDGETS",
    "STRICT_LOW",
    "STRICT_HIGH",
    "EffectiveRatios",
    "effective_ratios",
    "first_reach",
    "rollout_axis",
    "time_to_baseline",
    "best_so_far",
    "format_ratio",
    "pearson",
    "roc_auc",
    "effective_probability",
    "rate_histogram",
    "rate_heatmap",
    "rate_heatmap_from_counts",
    "mean_ci",
]
