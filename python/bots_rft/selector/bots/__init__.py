"""The BOTS selector: one Beta posterior per task, updated each step from rollout results
(explicit evidence) and predictions for the other tasks (implicit evidence), and Thompson
sampling (or the posterior mean) to pick the tasks nearest a target success rate.

The package holds what every backend shares, one concern per module:

- :mod:`~bots_rft.selector.bots.params`: the validated parameters, their read-only properties,
  ``set_params`` and the presets;
- :mod:`~bots_rft.selector.bots.rules`: adaptive ρ, adaptive λ and the weighting of stale evidence;
- :mod:`~bots_rft.selector.bots.feedback`: rollout results and rewards as successes and trials;
- :mod:`~bots_rft.selector.bots.state`: the checkpoint layout, its version and its checks;
- :mod:`~bots_rft.selector.bots.stream`: selections made ahead of time and ``take``'s task stream;
- :mod:`~bots_rft.selector.bots.base`: :class:`SelectorBase`, feedback in and checkpoints out for
  every backend;
- :mod:`~bots_rft.selector.bots.bots`: :class:`BOTS`, the public selector, which picks its backend;
- :mod:`~bots_rft.selector.protocol`: :class:`PosteriorSelector`, the contract every backend keeps.

The backends themselves live in :mod:`bots_rft.selector.backends` (the Rust core, torch, Ray shards).
"""

from __future__ import annotations

from ..protocol import PosteriorSelector
from .base import Picks, SelectorBase
from .bots import BOTS, PassHandle, Posterior, register_backend
from .feedback import feedback_arrays, reward_counts, reward_map
from .params import DEFAULT_PRIOR, SETTABLE_PARAMS, BOTSParams, SelectorParams
from .rules import (
    ADAPTIVE_RHO_MAE,
    DRIFT_MOMENTUM,
    LAM_RANGE,
    lag_weighted,
    lam_for,
    predictions_miss,
    smoothed_drift,
)
from .state import STATE_FORMAT, STATE_VERSION, ParamsOnLoad, selector_state

__all__ = [
    "BOTS",
    "Picks",
    "PosteriorSelector",
    "SelectorBase",
    "SelectorParams",
    "BOTSParams",
    "DEFAULT_PRIOR",
    "Posterior",
    "PassHandle",
    "register_backend",
    "SETTABLE_PARAMS",
    "STATE_FORMAT",
    "STATE_VERSION",
    "ParamsOnLoad",
    "ADAPTIVE_RHO_MAE",
    "DRIFT_MOMENTUM",
    "LAM_RANGE",
    "selector_state",
    "feedback_arrays",
    "reward_counts",
    "reward_map",
    "lag_weighted",
    "lam_for",
    "predictions_miss",
    "smoothed_drift",
]
