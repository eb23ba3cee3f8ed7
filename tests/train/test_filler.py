"""Diluted batches (``filler_tasks``): the method's picks unchanged, fillers from the known set,
never twice in a batch, resumable, and refused where they cannot apply."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bots_rft.errors import CheckpointError, ConfigError, InvalidArgumentError
from bots_rft.selector.static import RandomSelector
from bots_rft.train.filler import FilledSelector

FILLERS = np.arange(100, 140)


def test_the_methods_picks_are_those_it_makes_without_fillers() -> None:
    plain = RandomSelector(1000, seed=4)
    filled = FilledSelector(RandomSelector(1000, seed=4), FILLERS, 8, seed=4)
    for _ in range(20):
        a = plain.select(8)
        b = filled.select(16)
        assert b.size == 16 and np.array_equal(b[:8], a)
        assert np.isin(b[8:], FILLERS).all()
        assert np.unique(b).size == 16  # a filler is never a task the method picked


def test_filled_state_round_trips_and_checks_its_fillers() -> None:
    s = FilledSelector(RandomSelector(1000, seed=1), FILLERS, 4, seed=1)
    s.select(12)
    state = s.state_dict()
    t = FilledSelector(RandomSelector(1000, seed=99), FILLERS, 4, seed=99)
    t.load_state_dict(state)
    assert np.array_equal(s.select(12), t.select(12))
    other = FilledSelector(RandomSelector(1000, seed=1), FILLERS[:-1], 4, seed=1)
    with pytest.raises(CheckpointError, match="fillers differ"):
        other.load_state_dict(state)


def test_bad_filler_arguments_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="filler_tasks"):
        FilledSelector(RandomSelector(10, seed=0), [1, 2], 0)
    with pytest.raises(InvalidArgumentError, match="fillers"):
        FilledSelector(RandomSelector(10, seed=0), [1, 20], 1)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        FilledSelector(RandomSelector(10, seed=0), [1, 2], 2).select(2)


def test_config_refuses_fillers_without_a_column_or_room(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from bots_rft.train.toy import toy_config, write_toy_pool

    pool, _ = write_toy_pool(tmp_path / "pool", num_tasks=12, eval_tasks=3)
    with pytest.raises(ConfigError, match="filler_column"):
        toy_config(pool, tmp_path / "o", method="random", batch_size=4, filler_tasks=2)
    with pytest.raises(ConfigError, match="filler_tasks: must be < batch_size"):
        toy_config(pool, tmp_path / "o", method="random", batch_size=4, filler_tasks=4, filler_column="weak_pass_rate")
    with pytest.raises(ConfigError, match="filler_tasks: works with"):
        toy_config(pool, tmp_path / "o", method="dynamic", batch_size=4, filler_tasks=2, filler_column="weak_pass_rate")


@pytest.mark.slow
def test_a_diluted_run_trains_on_the_same_picks_plus_fillers(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.data import TaskPool
    from bots_rft.train.toy import toy_config, write_toy_pool
    from bots_rft.train.trainer import train

    pool, _ = write_toy_pool(tmp_path / "pool", num_tasks=12, eval_tasks=3)
    rates = TaskPool.load(pool).pass_rate("strong_pass_rate")
    fillers = set(np.flatnonzero(rates >= 0.7).tolist())
    assert len(fillers) >= 4
    common = dict(method="random", steps=2, rollouts=2, max_new_tokens=4, eval_every=0, seed=3)
    plain = train(toy_config(pool, tmp_path / "plain", batch_size=2, mini_batch_size=2, **common))
    diluted = train(
        toy_config(
            pool,
            tmp_path / "diluted",
            batch_size=4,
            mini_batch_size=4,
            filler_tasks=2,
            filler_column="strong_pass_rate",
            filler_min_rate=0.7,
            **common,
        )
    )
    for p, d in zip(plain.history, diluted.history):
        assert d["task_ids"][:2] == p["task_ids"]
        assert set(d["task_ids"][2:]) <= fillers
        assert d["rollouts"] == 2 * p["rollouts"]


@pytest.mark.slow
def test_dilution_fillers_marks_long_words_the_start_policy_never_solved(tmp_path: Path) -> None:
    import subprocess
    import sys

    import pyarrow as pa
    import pyarrow.parquet as pq

    from bots_rft.data.strings import build_string_pool

    build_string_pool(tmp_path, tasks=60, eval_tasks=4, seed=1, min_length=2, max_length=20, ops={"reverse": 1.0})
    pool = tmp_path / "train.parquet"
    table = pq.read_table(pool)
    lengths = np.asarray([e["length"] for e in table.column("extra_info").to_pylist()])
    start = np.where(np.arange(lengths.size) % 2 == 0, 0.0, 0.5)
    pq.write_table(table.append_column("start_pass_rate", pa.array(start)), pool)
    script = Path(__file__).parents[2] / "examples" / "trial" / "dilution_fillers.py"
    done = subprocess.run([sys.executable, str(script), str(pool)], capture_output=True, text=True, check=True)
    marked = pq.read_table(pool).column("zero_variance_filler").to_numpy()
    assert np.array_equal(marked, ((start == 0) & (lengths >= 16)).astype(float))
    assert f"{int(marked.sum())} of 60 tasks marked" in done.stdout
    bad = subprocess.run([sys.executable, str(script), str(tmp_path / "eval.parquet")], capture_output=True, text=True)
    assert bad.returncode == 2 and "no start_pass_rate column" in bad.stderr
