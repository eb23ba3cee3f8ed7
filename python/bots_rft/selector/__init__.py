"""Everything that picks tasks: the selector protocol, each method's parameters and the registry
of methods, the BOTS selector and its backends, the static and the published peer selectors,
rollout planning, screening, the group guard and multi-pool selection.

- :mod:`~bots_rft.selector.protocol`: ``Selector``, ``RollsOut``, what every method provides;
- :mod:`~bots_rft.selector.parameters`: every method parameter, its default and its range;
- :mod:`~bots_rft.selector.registry`: the methods by name, each built from a pool and references;
- :mod:`~bots_rft.selector.bots`: :class:`~bots_rft.BOTS`, its posterior rules and checkpoint layout;
- :mod:`~bots_rft.selector.backends`: BOTS's backends (the Rust core, torch, Ray shards);
- :mod:`~bots_rft.selector.static`: random, offline and reference-filter selection;
- :mod:`~bots_rft.selector.peers`: the published selectors BOTS is compared with;
- :mod:`~bots_rft.selector.plan`, :mod:`~bots_rft.selector.screen`: rollout counts per task, and
  screening before the batch;
- :mod:`~bots_rft.selector.guard`, :mod:`~bots_rft.selector.multipool`: the group guard and one
  selector over several pools.

The BOTS names this package exported before (``from bots_rft.selector import BOTS``) are
re-exported from :mod:`bots_rft.selector.bots`.
"""

from __future__ import annotations

from .bots import (
    ADAPTIVE_RHO_MAE,
    BOTS,
    DRIFT_MOMENTUM,
    LAM_RANGE,
    SETTABLE_PARAMS,
    STATE_FORMAT,
    STATE_VERSION,
    ParamsOnLoad,
    PassHandle,
    Picks,
    Posterior,
    PosteriorSelector,
    SelectorBase,
    SelectorParams,
    feedback_arrays,
    lag_weighted,
    lam_for,
    predictions_miss,
    register_backend,
    reward_counts,
    reward_map,
    selector_state,
    smoothed_drift,
)

__all__ = [
    "BOTS",
    "Picks",
    "PosteriorSelector",
    "SelectorBase",
    "SelectorParams",
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
