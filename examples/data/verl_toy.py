"""Writes verl_toy/train.parquet and verl_toy/val.parquet beside this file: a 24-task pool in
verl's RLHF layout (chat ``prompt``, ``data_source``, ``ability``, ``reward_model.ground_truth``,
``extra_info.index``) with two reference pass-rate columns named as GURU names them. The tasks are
sums in GSM8K's answer format (``data_source`` ``openai/gsm8k``, the answer after ``####``), so
verl's built-in GSM8K scorer rewards them in a real run. The files are
committed; the test suite checks they are what this script writes. Used by the verl first run in
docs/integrations.md (``python -m bots_rft.integrations.verl --check ...``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent / "verl_toy"


def rows(count: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(count):
        a, b = 3 + i, 7 + 2 * i
        out.append(
            {
                "data_source": "openai/gsm8k",
                "prompt": [
                    {
                        "role": "user",
                        "content": f"What is {a} + {b}? Let's think step by step and output the final answer "
                        'after "####".',
                    }
                ],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"index": i, "split": "train"},
                # Reference pass rates: a weak and a strong model, easy tasks first.
                "qwen2.5_7b_pass_rate": round(max(0.0, 0.9 - 0.04 * i), 4),
                "qwen3_30b_pass_rate": round(min(1.0, max(0.0, 1.0 - 0.02 * i)), 4),
            }
        )
    return out


def frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    train = pd.DataFrame(rows(24))
    return train, train.iloc[:4].reset_index(drop=True)


if __name__ == "__main__":
    HERE.mkdir(exist_ok=True)
    train, val = frames()
    train.to_parquet(HERE / "train.parquet", index=False)
    val.to_parquet(HERE / "val.parquet", index=False)
    print(f"wrote {HERE}/train.parquet ({len(train)} rows) and val.parquet ({len(val)} rows)")
