"""What a resumed run checks about its pool: the checkpoint stores the pool's identity (task
count, a hash of the ids in row order, a hash of the tasks' content) and its ids; a pool that
differs is refused with what changed, unless the run is told to extend: then tasks the pool
gained join the selector at its prior, wherever they sit, and tasks it lost are an error."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import BOTS
from ..checkpoint import load_state, save_state
from ..data import TaskPool
from ..errors import CheckpointError, ConfigError
from ..selector.static import RandomSelector

__all__ = ["POOL_IDS_FILE", "PoolChange", "save_pool_ids", "load_pool_ids", "compare_pools", "grown_state"]

POOL_IDS_FILE = "pool_ids.bots"


def save_pool_ids(directory: Path, pool: TaskPool) -> None:
    ids = pool.ids
    save_state(directory / POOL_IDS_FILE, {"ids": ids.astype(str) if ids.dtype == object else ids})


def load_pool_ids(directory: Path) -> npt.NDArray[Any]:
    path = directory / POOL_IDS_FILE
    if not path.exists():
        raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: missing {POOL_IDS_FILE!r}")
    ids = np.asarray(load_state(path)["ids"])
    return ids.astype(object) if ids.dtype.kind == "U" else ids


def _examples(values: Any) -> str:
    items = [v.item() if isinstance(v, np.generic) else v for v in list(values)[:5]]
    return f"{items}{' ...' if len(values) > 5 else ''}"


@dataclass
class PoolChange:
    """How the pool differs from the checkpoint's: ``old_rows_now`` is where each of the
    checkpoint's tasks sits in the new pool (-1: gone), ``added`` the new pool's rows of tasks the
    checkpoint did not have."""

    old_tasks: int
    new_tasks: int
    old_rows_now: npt.NDArray[np.int64]
    added: npt.NDArray[np.int64]
    removed_ids: npt.NDArray[Any]
    reordered: bool
    content_changed: bool

    def describe(self) -> str:
        parts = []
        if self.added.size:
            parts.append(f"{self.added.size} task(s) added")
        if self.removed_ids.size:
            parts.append(f"{self.removed_ids.size} task(s) removed (ids {_examples(self.removed_ids)})")
        if self.reordered:
            parts.append("the tasks are in a different row order")
        if not parts and self.content_changed:
            parts.append(
                f"same {self.new_tasks} task ids, different content (prompt, ground truth, data_source or extra_info)"
            )
        return f"{self.old_tasks} -> {self.new_tasks} tasks: " + "; ".join(parts)


def compare_pools(saved: dict[str, Any], saved_ids: npt.NDArray[Any], pool: TaskPool) -> PoolChange | None:
    """None when ``pool`` is the pool the checkpoint was trained on."""
    now = pool.identity()
    if all(saved.get(k) == now[k] for k in ("tasks", "ids_sha256", "content_sha256")):
        return None
    ids = pool.ids
    if (saved_ids.dtype == object) != (ids.dtype == object):
        old_rows_now = np.full(len(saved_ids), -1, dtype=np.int64)
    else:
        index = {(v.item() if isinstance(v, np.generic) else v): i for i, v in enumerate(ids.tolist())}
        old_rows_now = np.array([index.get(v, -1) for v in saved_ids.tolist()], dtype=np.int64)
    kept = old_rows_now >= 0
    mask = np.ones(len(ids), dtype=bool)
    mask[old_rows_now[kept]] = False
    kept_rows = old_rows_now[kept]
    return PoolChange(
        old_tasks=len(saved_ids),
        new_tasks=len(ids),
        old_rows_now=old_rows_now,
        added=np.flatnonzero(mask),
        removed_ids=saved_ids[~kept],
        reordered=bool(np.any(np.diff(kept_rows) < 0)),
        content_changed=saved.get("content_sha256") != now["content_sha256"],
    )


def grown_state(state: dict[str, Any], change: PoolChange, fresh: Any) -> dict[str, Any]:
    """The saved selector ``state`` over the new pool: each kept task's state moved to its new
    row, added tasks at the prior of ``fresh`` (the selector built for the new pool, whose
    reference pass rates the state takes)."""
    if change.removed_ids.size:
        raise ConfigError(
            f"pool: {change.removed_ids.size} task(s) of the checkpoint's pool are missing (ids "
            f"{_examples(change.removed_ids)}); extending a pool may add tasks, not remove them"
        )
    rows = change.old_rows_now
    if isinstance(fresh, RandomSelector):
        return {**state, "num_tasks": change.new_tasks}
    if not isinstance(fresh, BOTS):
        raise ConfigError(
            f"extend_pool: a {type(fresh).__name__} selector cannot grow; extending the pool on resume works with "
            "the bots, mopps, dots and random methods"
        )
    new = fresh.state_dict()
    out = dict(state)
    out["num_tasks"] = change.new_tasks
    for key, prior in (("alpha", "prior_alpha"), ("beta", "prior_beta")):
        grown = np.broadcast_to(np.asarray(new[prior], dtype=np.float64), (change.new_tasks,)).copy()
        grown[rows] = np.asarray(state[key], dtype=np.float64)
        out[key] = grown
        if np.ndim(state[prior]):
            prior_grown = np.broadcast_to(np.asarray(new[prior], dtype=np.float64), (change.new_tasks,)).copy()
            prior_grown[rows] = np.asarray(state[prior], dtype=np.float64)
            out[prior] = prior_grown
    if state.get("evidence") is not None and new.get("evidence") is not None:
        # The references come from the new pool; the estimator's learnt state stays.
        out["evidence"] = {**state["evidence"], "weak": new["evidence"]["weak"], "strong": new["evidence"]["strong"]}
    return out
