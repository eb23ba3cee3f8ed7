"""A toy pool whose rewards a random-weight model can earn, for tests and smoke runs of the
trainer: task k's ground truth is ``"r/m"`` and a response earns 1 when its first character's
code point is ``r`` modulo ``m``, so a random policy succeeds about 1/m of the time (m = 1 is
always solved) and GRPO can move these rates."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..data import TaskPool, chat, make_row

if TYPE_CHECKING:
    from .config import TrainConfig

__all__ = ["TOY_SOURCE", "toy_reward", "toy_rows", "write_toy_pool", "toy_config"]

TOY_SOURCE = "toy/first_char"
#: ``verifiers:`` entry that registers :func:`toy_reward` in a config.
TOY_VERIFIER = {"toy": "bots_rft.train.toy:toy_reward"}


def toy_reward(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    r, m = (int(x) for x in str(ground_truth).split("/"))
    return 1.0 if response and ord(response[0]) % m == r else 0.0


def toy_rows(num_tasks: int, start: int = 0) -> list[dict[str, Any]]:
    mods = (1, 2, 2, 3, 4, 8, 16, 64)
    rows = []
    for k in range(num_tasks):
        m = mods[k % len(mods)]
        rows.append(
            make_row(
                index=start + k,
                prompt=chat(f"Task {start + k}: say something."),
                ground_truth=f"{k % m}/{m}",
                data_source=TOY_SOURCE,
                ability="toy",
                split="train",
                difficulty={"weak_pass_rate": 0.5 / m, "strong_pass_rate": min(1.0, 1.5 / m)},
            )
        )
    return rows


def write_toy_pool(directory: str | Path, num_tasks: int = 16, eval_tasks: int = 4) -> tuple[Path, Path]:
    """``directory/train.parquet`` and ``directory/eval.parquet`` of toy tasks."""
    out = Path(directory)
    train, evaluation = out / "train.parquet", out / "eval.parquet"
    TaskPool.from_records(toy_rows(num_tasks)).to_parquet(train)
    TaskPool.from_records(toy_rows(eval_tasks, start=10_000)).to_parquet(evaluation)
    return train, evaluation


def toy_config(pool: str | Path, out: str | Path, **overrides: Any) -> TrainConfig:
    """A validated config for a quick CPU run of the tiny model on a toy pool, writing to ``out``
    quietly (no progress bar, no TensorBoard, rewards scored in-process); ``overrides`` set the
    rest (steps, batch shape, method ...) as config keys."""
    from .config import load_config

    base: dict[str, Any] = dict(
        pool=str(pool),
        model="tiny",
        device="cpu",
        verifiers=TOY_VERIFIER,
        out_dir=str(out),
        progress=False,
        tensorboard=False,
        reward_workers=0,
    )
    return load_config(None, {**base, **overrides})
