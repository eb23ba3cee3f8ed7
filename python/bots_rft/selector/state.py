"""A selector's checkpoint state: its format and version, the one function that writes its
layout (:func:`selector_state`), and the checks and readers every backend loads it with."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from .._validation import FloatArray, as_floats
from ..errors import CheckpointError, InvalidArgumentError
from ..estimators import estimator_from_state, user_object

STATE_FORMAT = "bots-rft/selector"
# 2: adds "stream" (the state of `take`); version-1 states load unchanged.
STATE_VERSION = 2
# How load_state_dict resolves a state whose parameters differ from this selector's.
ParamsOnLoad = Literal["error", "checkpoint", "current"]
_PARAMS_ON_LOAD = ("error", "checkpoint", "current")


def selector_state(
    *,
    params: dict[str, Any],
    prior_alpha: float | FloatArray,
    prior_beta: float | FloatArray,
    alpha: FloatArray,
    beta: FloatArray,
    num_selections: int,
    num_updates: int,
    evidence: dict[str, Any] | None,
    rho_halvings: int = 0,
    drift: float | None = None,
    stream: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A selector's checkpoint state (:meth:`BOTS.state_dict`'s layout, with copies of the arrays):
    the one place that layout is written, for any holder of a BOTS posterior."""
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "num_tasks": len(alpha),
        "params": dict(params),
        "prior_alpha": _copy(prior_alpha),
        "prior_beta": _copy(prior_beta),
        "alpha": np.array(alpha, dtype=np.float64),
        "beta": np.array(beta, dtype=np.float64),
        "num_selections": num_selections,
        "num_updates": num_updates,
        "evidence": evidence,
        "rho_halvings": rho_halvings,
        "drift": drift,
        "stream": stream,
    }


def _copy(p: float | FloatArray) -> float | FloatArray:
    return p.copy() if isinstance(p, np.ndarray) else p


def check_params_on_load(params: Any) -> None:
    if params not in _PARAMS_ON_LOAD:
        raise InvalidArgumentError(
            f"params: must be one of {', '.join(map(repr, _PARAMS_ON_LOAD))}, got {params!r}", "params"
        )


def check_state_header(state: Any) -> None:
    """A selector state of a version this code reads, or CheckpointError."""
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise CheckpointError(f"state: not a bots-rft selector state (format {_get(state, 'format')!r})")
    version = state.get("version")
    if not isinstance(version, int) or version > STATE_VERSION:
        raise CheckpointError(f"state: version {version!r} is newer than this bots-rft reads ({STATE_VERSION})")


def state_params(state: dict[str, Any], p: dict[str, Any], evidence: Any, n: int) -> dict[str, Any]:
    """The constructor arguments a checkpoint records (``p``: its params), the estimator rebuilt
    from it; parameters newer than the state take their defaults."""
    ev = user_object(estimator_from_state(state.get("evidence"), evidence, n))
    return {
        "lam": p["lam"],
        "rho": p["rho"],
        "target": p["target"],
        "n_rollouts": p["n_rollouts"],
        "thompson": p["thompson"],
        "prior_alpha": state["prior_alpha"],
        "prior_beta": state["prior_beta"],
        "evidence": ev,
        "seed": p["seed"],
        "adaptive_rho": p.get("adaptive_rho", False),
        "tau": p.get("tau", 0.0),
        "adaptive_lam": p.get("adaptive_lam", False),
        "lag_discount": p.get("lag_discount", 1.0),
    }


def state_posterior(state: dict[str, Any], n: int) -> tuple[FloatArray, FloatArray]:
    """α and β of a checkpoint, checked finite and positive."""
    alpha = as_floats(state["alpha"], "alpha", n)
    beta = as_floats(state["beta"], "beta", n)
    for name, arr in (("alpha", alpha), ("beta", beta)):
        if not np.all(np.isfinite(arr) & (arr > 0)):
            raise CheckpointError(f"{name}: the state holds non-positive or non-finite values")
    return alpha, beta


def _get(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else type(state).__name__
