"""TaskPool: loading verl/GURU pools from parquet and JSONL, validation, accessors, write-back."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bots_rft.data import PoolColumns, TaskPool, chat, make_row
from bots_rft.errors import BotsError, DataError, InvalidArgumentError

WEAK, STRONG = "qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"


def guru_rows(n: int = 6) -> list[dict[str, Any]]:
    """Rows in GURU's layout; some reference pass rates missing (None -> NaN)."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "data_source": "math__deepscaler_preview" if i % 2 else "logic__zebra_puzzle_dataset",
                "prompt": [{"role": "user", "content": f"What is {i} + {i}? Put it in \\boxed{{}}."}],
                "ability": "math" if i % 2 else "logic",
                "reward_model": {"ground_truth": str(2 * i), "style": "rule"},
                "extra_info": {"index": 100 + i, "split": "train"},
                WEAK: None if i % 3 == 0 else i / 10,
                STRONG: float("nan") if i == 4 else min(1.0, i / 5),
            }
        )
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path, **kwargs: Any) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), str(path), **kwargs)
    return path


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        for r in rows:
            f.write(
                json.dumps({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}) + "\n"
            )
    return path


@pytest.fixture
def guru_parquet(tmp_path: Path) -> Path:
    return write_parquet(guru_rows(), tmp_path / "guru.parquet")


def test_guru_parquet_loads_with_nan_pass_rates(guru_parquet: Path) -> None:
    pool = TaskPool.load(guru_parquet)
    assert len(pool) == 6
    assert pool.ids.tolist() == [100, 101, 102, 103, 104, 105]
    assert pool.difficulty_columns == [WEAK, STRONG]
    weak = pool.pass_rate(WEAK)
    assert weak.dtype == np.float64
    assert np.isnan(weak[[0, 3]]).all() and weak[1] == pytest.approx(0.1)
    strong = pool.pass_rate(STRONG)
    assert np.isnan(strong[4]) and strong[5] == 1.0
    assert pool.prompts([2]) == [[{"role": "user", "content": "What is 2 + 2? Put it in \\boxed{}."}]]
    assert pool.ground_truths([1, 3]) == ["2", "6"]
    assert pool.data_sources([0, 1]).tolist() == ["logic__zebra_puzzle_dataset", "math__deepscaler_preview"]
    assert pool.abilities([1]) == ["math"]
    assert pool.extra_infos([0]) == [{"index": 100, "split": "train"}]
    assert pool.row(1)["reward_model"] == {"ground_truth": "2", "style": "rule"}
    assert pool.rows_of([105, 100]).tolist() == [5, 0]


@pytest.mark.parametrize("name", ["guru.jsonl", "guru.jsonl.gz"])
def test_jsonl_loads_like_parquet(tmp_path: Path, guru_parquet: Path, name: str) -> None:
    a = TaskPool.load(guru_parquet)
    b = TaskPool.load(write_jsonl(guru_rows(), tmp_path / name))
    assert b.ids.tolist() == a.ids.tolist()
    assert b.prompts() == a.prompts()
    np.testing.assert_array_equal(b.pass_rate(WEAK), a.pass_rate(WEAK))
    np.testing.assert_array_equal(b.pass_rate(STRONG), a.pass_rate(STRONG))


def test_ragged_jsonl_falls_back_to_python_reader(tmp_path: Path) -> None:
    rows = guru_rows(3)
    rows[1]["extra_info"]["note"] = {"nested": [1, 2]}  # extra field in one row only
    pool = TaskPool.load(write_jsonl(rows, tmp_path / "ragged.jsonl"))
    assert len(pool) == 3


def test_configurable_columns_and_string_ids(tmp_path: Path) -> None:
    rows = [{"uid": f"t-{i}", "question": f"q{i}", "answer": str(i), "source": "math", "diff": i / 4} for i in range(4)]
    cols = {
        "prompt": "question",
        "ground_truth": "answer",
        "data_source": "source",
        "id": "uid",
        "ability": None,
        "extra_info": None,
        "difficulty": ["diff"],
    }
    pool = TaskPool.load(write_parquet(rows, tmp_path / "flat.parquet"), cols)
    assert pool.ids.tolist() == ["t-0", "t-1", "t-2", "t-3"]
    assert pool.prompts([1]) == [[{"role": "user", "content": "q1"}]]  # plain string -> one user turn
    assert pool.rows_of(["t-3", "t-0"]).tolist() == [3, 0]
    assert pool.difficulty_columns == ["diff"]
    assert pool.extra_infos([0]) == [{}] and pool.abilities([0]) == [None]
    with pytest.raises(InvalidArgumentError, match="unknown task id"):
        pool.rows_of(["nope"])
    with pytest.raises(InvalidArgumentError, match="unknown key"):
        TaskPool.load(tmp_path / "flat.parquet", {"promt": "question"})


def test_json_encoded_prompt_strings(tmp_path: Path) -> None:
    rows = guru_rows(2)
    for r in rows:
        r["prompt"] = json.dumps(r["prompt"])
    pool = TaskPool.load(write_parquet(rows, tmp_path / "p.parquet"))
    assert pool.prompts([0])[0][0]["role"] == "user"


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r.pop("data_source"), r"missing required column.*data_source"),
        (lambda r: r.pop("reward_model"), r"missing required column.*reward_model\.ground_truth"),
        (lambda r: r["extra_info"].pop("index"), r"missing required column.*extra_info\.index"),
    ],
)
def test_missing_columns_are_named(tmp_path: Path, mutate: Any, match: str) -> None:
    rows = guru_rows(3)
    for r in rows:
        mutate(r)
    with pytest.raises(DataError, match=match):
        TaskPool.load(write_parquet(rows, tmp_path / "bad.parquet"))


def test_duplicate_ids(tmp_path: Path) -> None:
    rows = guru_rows(4)
    rows[3]["extra_info"]["index"] = 101
    with pytest.raises(DataError, match=r"duplicate id.*101"):
        TaskPool.load(write_parquet(rows, tmp_path / "dup.parquet"))


def test_missing_ids(tmp_path: Path) -> None:
    rows = guru_rows(4)
    rows[2]["extra_info"]["index"] = None
    with pytest.raises(DataError, match=r"missing id.*row 2"):
        TaskPool.load(write_parquet(rows, tmp_path / "noid.parquet"))


@pytest.mark.parametrize("bad", [1.5, -0.1, float("inf")])
def test_pass_rates_outside_unit_interval(tmp_path: Path, bad: float) -> None:
    rows = guru_rows(4)
    rows[2][STRONG] = bad
    with pytest.raises(DataError, match=rf"{STRONG}.*\[0, 1\].*{bad!r} at row 2 \(id 102\)"):
        TaskPool.load(write_parquet(rows, tmp_path / "range.parquet"))


def test_non_numeric_pass_rate(tmp_path: Path) -> None:
    rows = guru_rows(2)
    for r in rows:
        r[WEAK] = "easy"
    with pytest.raises(DataError, match=rf"{WEAK}.*numeric"):
        TaskPool.load(write_parquet(rows, tmp_path / "str.parquet"))


def test_null_ground_truth_and_bad_files(tmp_path: Path) -> None:
    rows = guru_rows(3)
    rows[1]["reward_model"]["ground_truth"] = None
    with pytest.raises(DataError, match=r"reward_model\.ground_truth.*row 1"):
        TaskPool.load(write_parquet(rows, tmp_path / "gt.parquet"))
    with pytest.raises(DataError, match="does not exist"):
        TaskPool.load(tmp_path / "nope.parquet")
    (tmp_path / "pool.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="cannot tell the format"):
        TaskPool.load(tmp_path / "pool.csv")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match="cannot read pool"):
        TaskPool.load(tmp_path / "broken.parquet")
    (tmp_path / "broken.jsonl").write_text('{"a": 1}\n{oops\n')
    with pytest.raises(DataError):
        TaskPool.load(tmp_path / "broken.jsonl")


def test_errors_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        TaskPool.load(tmp_path / "missing.parquet")
    assert isinstance(info.value, BotsError)


def test_write_back_pass_rate_roundtrip(guru_parquet: Path, tmp_path: Path) -> None:
    pool = TaskPool.load(guru_parquet)
    rates = np.array([0.0, 0.25, np.nan, 1.0, 0.5, 0.75])
    updated = pool.with_pass_rate("smollm2_135m_pass_rate", rates)
    out = tmp_path / "out" / "pool.parquet"
    updated.to_parquet(out)
    again = TaskPool.load(out)
    np.testing.assert_array_equal(again.pass_rate("smollm2_135m_pass_rate"), rates)
    assert again.table.column("smollm2_135m_pass_rate").null_count == 1  # NaN stored as null
    np.testing.assert_array_equal(again.pass_rate(WEAK), pool.pass_rate(WEAK))
    # Replacing an existing column, and a name without the _pass_rate suffix.
    replaced = again.with_pass_rate(WEAK, np.zeros(6)).with_pass_rate("level", np.ones(6))
    assert replaced.pass_rate(WEAK).tolist() == [0.0] * 6
    assert "level" in replaced.difficulty_columns
    replaced.to_jsonl(tmp_path / "pool.jsonl")
    assert TaskPool.load(tmp_path / "pool.jsonl").pass_rate(WEAK).tolist() == [0.0] * 6
    assert not list((tmp_path / "out").glob(".*tmp*"))  # atomic write leaves no temporary


def test_write_back_validation(guru_parquet: Path) -> None:
    pool = TaskPool.load(guru_parquet)
    with pytest.raises(InvalidArgumentError, match=r"expected 6 pass rates.*\(3,\)"):
        pool.with_pass_rate("x_pass_rate", np.zeros(3))
    with pytest.raises(InvalidArgumentError, match=r"x_pass_rate.*1\.2"):
        pool.with_pass_rate("x_pass_rate", np.full(6, 1.2))
    with pytest.raises(DataError, match="no difficulty column 'nope'"):
        pool.pass_rate("nope")


def test_row_positions_are_checked(guru_parquet: Path) -> None:
    pool = TaskPool.load(guru_parquet)
    with pytest.raises(InvalidArgumentError, match=r"row position 6 is outside \[0, 6\)"):
        pool.prompts([0, 6])
    with pytest.raises(InvalidArgumentError, match="integer row positions"):
        pool.prompts(np.array([0.5]))
    assert len(pool.take([5, 1])) == 2 and pool.take([5, 1]).ids.tolist() == [105, 101]


def test_many_row_groups_take_the_right_rows(tmp_path: Path) -> None:
    """Columnar gathers across many chunks (memory-mapped row groups) return the rows asked for."""
    n = 20_000
    table = pa.table(
        {
            "data_source": pa.array(["math"] * n),
            "prompt": pa.array([[{"role": "user", "content": f"q{i}"}] for i in range(n)]),
            "reward_model": pa.array([{"ground_truth": str(i), "style": "rule"} for i in range(n)]),
            "extra_info": pa.array([{"index": i * 7} for i in range(n)]),
            WEAK: pa.array(np.linspace(0, 1, n)),
        }
    )
    path = tmp_path / "big.parquet"
    pq.write_table(table, str(path), row_group_size=1_000)
    pool = TaskPool.load(path)
    assert pool.table.column("prompt").num_chunks > 1
    rng = np.random.default_rng(0)
    rows = rng.integers(0, n, 300)
    assert [p[0]["content"] for p in pool.prompts(rows)] == [f"q{r}" for r in rows]
    assert pool.ground_truths(rows) == [str(r) for r in rows]
    assert pool.rows_of(rows * 7).tolist() == rows.tolist()
    assert pool.pass_rate(WEAK)[-1] == 1.0


def test_make_row_builds_a_valid_pool() -> None:
    rows = [
        make_row(
            index=i,
            prompt=chat(f"q{i}", system="sys"),
            ground_truth="1",
            data_source="logic",
            ability="logic",
            split="train",
            extra={"k": i},
            difficulty={WEAK: 0.5},
        )
        for i in range(3)
    ]
    pool = TaskPool.from_records(rows)
    assert pool.prompts([0])[0][0] == {"role": "system", "content": "sys"}
    assert pool.extra_infos([2]) == [{"index": 2, "split": "train", "k": 2}]
    with pytest.raises(DataError, match="at least one row"):
        TaskPool.from_records([])
    assert PoolColumns().required()["id"] == "extra_info.index"


# ------------------------------------------------------------------ prompts and identity
@pytest.mark.parametrize(
    ("prompt", "match"),
    [
        ([], r"column 'prompt' row 1: empty prompt \(no messages\)"),
        ([{"role": "usr", "content": "hi"}], r"column 'prompt' row 1, message 0: unknown chat role 'usr'"),
        (
            [{"role": "system", "content": "s"}, {"role": "bot", "content": "x"}],
            r"row 1, message 1: unknown chat role 'bot'",
        ),
    ],
)
def test_empty_prompts_and_unknown_roles_are_refused(tmp_path: Path, prompt: list[dict[str, str]], match: str) -> None:
    rows = [
        make_row(index=i, prompt=chat(f"q{i}"), ground_truth="1", data_source="math", ability="m", split="t")
        for i in range(3)
    ]
    rows[1]["prompt"] = prompt
    with pytest.raises(DataError, match=match):
        TaskPool.from_records(rows)
    # Also when the messages are stored as JSON text (checked when read).
    rows[1]["prompt"] = json.dumps(prompt)
    for r in (rows[0], rows[2]):
        r["prompt"] = json.dumps(r["prompt"])
    pool = TaskPool.from_records(rows)
    with pytest.raises(DataError, match=match.replace(r"\(no messages\)", "")):
        pool.prompts()


def test_blank_string_prompt_is_refused() -> None:
    rows = [
        make_row(index=i, prompt=chat("q"), ground_truth="1", data_source="math", ability="m", split="t")
        for i in range(2)
    ]
    for r in rows:
        r["prompt"] = "  "
    with pytest.raises(DataError, match=r"column 'prompt' row 0: empty prompt"):
        TaskPool.from_records(rows)


def test_pool_identity(tmp_path: Path) -> None:
    rows = [
        make_row(index=i, prompt=chat(f"q{i}"), ground_truth=str(i), data_source="math", ability="m", split="t")
        for i in range(5)
    ]
    pool = TaskPool.from_records(rows)
    ident = pool.identity()
    assert ident["tasks"] == 5
    pool.to_parquet(tmp_path / "p.parquet")
    pool.to_jsonl(tmp_path / "p.jsonl")
    assert TaskPool.load(tmp_path / "p.parquet").identity() == ident  # where it is stored does not matter
    changed = [dict(r) for r in rows]
    changed[2] = dict(changed[2], reward_model={"ground_truth": "x", "style": "rule"})
    other = TaskPool.from_records(changed).identity()
    assert other["ids_sha256"] == ident["ids_sha256"] and other["content_sha256"] != ident["content_sha256"]
    swapped = TaskPool.from_records([rows[1], rows[0], *rows[2:]]).identity()
    assert swapped["ids_sha256"] != ident["ids_sha256"]
    assert pool.with_pass_rate("r_pass_rate", [0.5] * 5).identity() == ident  # references are not content
