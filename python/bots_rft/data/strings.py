"""A procedurally generated pool of string tasks for small policies (``bots data strings``).

Each task gives a lowercase word and an operation, ``copy`` or ``reverse`` (``"reverse kqzt"``),
and is answered with the transformed word alone. The word's length sets the difficulty: a small
model taught the format copies short words almost always and reverses long ones almost never, and
every sampled character can go wrong, so a task's pass rate falls with its length and the pool's
rates spread the way real pools' do (many tasks at 0, many at 1, the rest between). RL has room to
work on such a pool: sharpening the policy raises the rates of the tasks in between, and a selector
that finds them trains on more informative groups per step.

The generator is seeded: the same arguments build the same pool, and no question appears in both
splits. Rows are in the verl/GURU layout with ``data_source`` ``strings/<op>_l<length>``, scored
by :func:`bots_rft.rewards.strings.verify_first_line`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..rewards.strings import STRINGS_PREFIX
from .pool import TaskPool
from .schema import chat, make_row
from .split import PoolPaths

__all__ = ["STRING_OPS", "DEFAULT_OP_WEIGHTS", "string_capacity", "string_rows", "build_string_pool"]

#: Operation name -> how it transforms the word.
STRING_OPS = {"copy": lambda w: w, "reverse": lambda w: w[::-1]}
DEFAULT_OP_WEIGHTS: Mapping[str, float] = {"copy": 0.3, "reverse": 0.7}
_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _check(tasks: int, min_length: int, max_length: int, ops: Mapping[str, float]) -> None:
    for name, v, low in (("tasks", tasks, 1), ("min_length", min_length, 1), ("max_length", max_length, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise InvalidArgumentError(f"{name}: expected an integer >= {low}, got {v!r}", name)
    if max_length < min_length or max_length > 64:
        raise InvalidArgumentError(
            f"max_length: expected min_length <= max_length <= 64, got {max_length} (min_length {min_length})",
            "max_length",
        )
    unknown = sorted(set(ops) - set(STRING_OPS))
    weights = list(ops.values())
    if unknown or not ops or any(not np.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
        raise InvalidArgumentError(
            f"ops: expected non-negative weights of {sorted(STRING_OPS)} with a positive sum, got {dict(ops)!r}",
            "ops",
        )


def string_capacity(min_length: int, max_length: int, ops: Mapping[str, float]) -> int:
    """How many questions a pool may hold: half of the distinct ones (short words are few, 26**2
    of length 2, and a draw that repeats a question is drawn again; half keeps that cheap)."""
    used = sum(1 for w in ops.values() if w > 0)
    return sum(min(26**length, 10**12) for length in range(min_length, max_length + 1)) * used // 2


def string_rows(
    tasks: int,
    *,
    seed: int = 0,
    min_length: int = 2,
    max_length: int = 12,
    ops: Mapping[str, float] = DEFAULT_OP_WEIGHTS,
) -> list[dict[str, Any]]:
    """``tasks`` distinct questions: an operation drawn with the ``ops`` weights and a word of a
    uniform length in ``[min_length, max_length]`` of uniform letters."""
    _check(tasks, min_length, max_length, ops)
    names = sorted(ops)
    probs = np.array([ops[n] for n in names], dtype=np.float64)
    probs /= probs.sum()
    lengths = np.arange(min_length, max_length + 1)
    capacity = string_capacity(min_length, max_length, ops)
    if tasks > capacity:
        raise InvalidArgumentError(
            f"tasks: at most {capacity} questions with words of {min_length}-{max_length} letters, got {tasks}", "tasks"
        )
    rng = np.random.default_rng(seed)
    seen: set[tuple[str, str]] = set()
    rows: list[dict[str, Any]] = []
    while len(rows) < tasks:
        op = names[int(rng.choice(len(names), p=probs))]
        length = int(rng.choice(lengths))
        word = "".join(rng.choice(_LETTERS, length))
        if (op, word) in seen:
            continue
        seen.add((op, word))
        rows.append(
            make_row(
                index=len(rows),
                prompt=chat(f"{op} {word}"),
                ground_truth=STRING_OPS[op](word),
                data_source=f"{STRINGS_PREFIX}/{op}_l{length}",
                ability="strings",
                split="train",
                extra={"op": op, "length": length},
            )
        )
    return rows


def build_string_pool(
    out: str | Path,
    *,
    tasks: int = 6000,
    eval_tasks: int = 600,
    seed: int = 0,
    min_length: int = 2,
    max_length: int = 12,
    ops: Mapping[str, float] = DEFAULT_OP_WEIGHTS,
) -> PoolPaths:
    """``out/train.parquet`` (``tasks`` rows) and ``out/eval.parquet`` (``eval_tasks`` held-out
    rows: other questions from the same distribution)."""
    if isinstance(eval_tasks, bool) or not isinstance(eval_tasks, int) or eval_tasks < 1:
        raise InvalidArgumentError(f"eval_tasks: expected an integer >= 1, got {eval_tasks!r}", "eval_tasks")
    _check(tasks, min_length, max_length, ops)
    room = string_capacity(min_length, max_length, ops) - eval_tasks
    if tasks > room:
        raise InvalidArgumentError(
            f"tasks: at most {max(room, 0)} training questions with words of {min_length}-{max_length} letters "
            f"and {eval_tasks} held out, got {tasks}",
            "tasks",
        )
    rows = string_rows(tasks + eval_tasks, seed=seed, min_length=min_length, max_length=max_length, ops=ops)
    # Questions are drawn independently, so the last eval_tasks are a held-out sample of the same mix.
    train, held_out = rows[:tasks], rows[tasks:]
    for k, r in enumerate(held_out):
        r["extra_info"].update(index=k, split="test")
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    paths = (dest / "train.parquet", dest / "eval.parquet")
    TaskPool.from_records(train).to_parquet(paths[0])
    TaskPool.from_records(held_out).to_parquet(paths[1])
    return paths
