"""A selector's checkpoint state: its format and version, the one function that writes its
layout (:func:`selector_state`), and the checks and readers every backend loads it with."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..._validation import FloatArray, as_floats
from ...errors import CheckpointError, InvalidArgumentError
from ...estimators import estimator_from_state, user_object
from ..protocol import ParamsOnLoad as ParamsOnLoad

STATE_FORMAT = "bots-rft/selector"
# 2: adds "stream" (the state of `take`); version-1 states load unchanged. Later additions that
# older readers may ignore ("identity": the evidence's and the pool's fingerprints) keep version 2;
# states without them load unchanged.
STATE_VERSION = 2
_PARAMS_ON_LOAD = ("error", "checkpoint", "current")
#: What a checkpoint written before these parameters existed meant by their absence: the rule
#: without them (off), whatever their defaults may become.
_ABSENT_MEANT = {"adaptive_rho": False, "tau": 0.0, "adaptive_lam": False, "lag_discount": 1.0}


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
    pool: str | None = None,
) -> dict[str, Any]:
    """A selector's checkpoint state (:meth:`BOTS.state_dict`'s layout, with copies of the arrays):
    the one place that layout is written, for any holder of a BOTS posterior. ``identity`` records
    what the posterior was learnt on: the evidence's :func:`evidence_identity` and the pool's
    :func:`pool_fingerprint` (None: not bound to a pool)."""
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
        "identity": {"evidence": evidence_identity(evidence), "pool": pool},
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
        **{name: p.get(name, off) for name, off in _ABSENT_MEANT.items()},
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


# ------------------------------------------------------------------------------ identity
#: The reference arrays of each built-in estimator kind: what its evidence is computed from.
_REFERENCE_ARRAYS = {
    "interpolation": ("weak", "strong"),
    "multi-reference": ("references", "features"),
    "similarity": ("embeddings",),
    "embedding-regression": ("embeddings",),
}


def evidence_identity(evidence: dict[str, Any] | None) -> dict[str, Any] | None:
    """What implicit evidence a posterior was learnt with, from an estimator's state: its
    ``kind`` (``"interpolation"``, ``"multi-reference"``, ``"similarity"``, ``"embedding-regression"``, or a custom
    estimator's kind and ``type``) and ``sha256``, the first 16 hex digits of the SHA-256 of its
    reference arrays (dtype, shape and bytes, in a fixed order; None for a custom estimator,
    whose arrays this package does not know). None: no implicit evidence."""
    if evidence is None:
        return None
    kind = evidence.get("kind") if isinstance(evidence, dict) else None
    out: dict[str, Any] = {"kind": str(kind), "type": None, "sha256": None}
    names = _REFERENCE_ARRAYS.get(str(kind))
    if names is None:
        out["type"] = None if evidence.get("type") is None else str(evidence.get("type"))
        return out
    digest = hashlib.sha256()
    for name in names:
        value = evidence.get(name)
        digest.update(name.encode() + b"\0")
        if value is None:
            digest.update(b"none\0")
            continue
        arr = np.ascontiguousarray(value)
        digest.update(f"{arr.dtype.str}{arr.shape}".encode() + b"\0")
        digest.update(arr.tobytes())
    out["sha256"] = digest.hexdigest()[:16]
    return out


def pool_fingerprint(task_ids: Iterable[Any], content: Sequence[str] | None = None) -> str:
    """A pool's fingerprint: the first 16 hex digits of a SHA-256 over its distinct task ids,
    ascending, as int64, and, with ``content`` (one string per entry of ``task_ids``, e.g. a hash
    of each row's prompt), each task's content in the same order. The rows' order does not
    matter; which ids are there does, and with ``content`` what each id holds (so another pool of
    the same size is told apart)."""
    ids = np.asarray(list(task_ids) if not isinstance(task_ids, np.ndarray) else task_ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    digest = hashlib.sha256(b"bots-rft/pool\0")
    if content is None:
        digest.update(np.unique(ids).astype("<i8").tobytes())
        return digest.hexdigest()[:16]
    if len(content) != ids.size:
        raise InvalidArgumentError(f"content: {len(content)} entries for {ids.size} task ids", "content")
    digest.update(b"content\0" + ids[order].astype("<i8").tobytes())
    for i in order.tolist():
        digest.update(str(content[i]).encode() + b"\0")
    return digest.hexdigest()[:16]


def state_pool(state: dict[str, Any]) -> str | None:
    """The pool fingerprint a state records (None: none, e.g. a state of a selector never bound to
    a pool, or one from a release that did not record pools)."""
    identity = state.get("identity")
    pool = identity.get("pool") if isinstance(identity, dict) else None
    if pool is not None and not isinstance(pool, str):
        raise CheckpointError(f"identity.pool: must be a fingerprint string or None, got {pool!r:.60}")
    return pool


def describe_evidence(identity: dict[str, Any] | None) -> str:
    """One phrase for an :func:`evidence_identity`: ``none``, ``interpolation (references
    1a2b...)``, ``custom MyEstimator``."""
    if identity is None:
        return "none"
    kind = identity.get("kind")
    if identity.get("sha256") is not None:
        return f"{kind} (references {identity['sha256']})"
    return f"{kind} {identity['type']}" if identity.get("type") else str(kind)


def identity_differences(
    evidence: tuple[dict[str, Any] | None, dict[str, Any] | None], pool: tuple[str | None, str | None]
) -> list[str]:
    """'what: this selector's vs the state's' for the evidence and the pool, where they differ.
    Each pair is (this selector's, the state's). A pool missing on either side (a selector not
    bound to one, a state written before pools were recorded) is no difference."""
    out = []
    if evidence[0] != evidence[1]:
        out.append(f"evidence: {describe_evidence(evidence[0])} here, {describe_evidence(evidence[1])} in the state")
    if pool[0] is not None and pool[1] is not None and pool[0] != pool[1]:
        out.append(f"pool: task ids {pool[0]} here, {pool[1]} in the state (another pool of tasks)")
    return out
