"""The spread pool builder (``bots data spread``): spec validation with typed errors, seeded and
offline builds, disjoint train/eval splits, the verifier options in every row, the histogram."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bots_rft.cli import main
from bots_rft.data import TaskPool
from bots_rft.data.spread import SpreadSpec, build_spread_pool, load_spread_spec, pass_rate_histogram, pass_rate_table
from bots_rft.errors import ConfigError
from bots_rft.rewards import RewardItem, RewardScorer

SPREAD_SPEC = """families:
  chain_sum: [0, 1]
  basic_arithmetic: [0]
per_level: 6
eval_fraction: 0.34
seed: 3
system_prompt: "Reply with only the final answer."
answer_mode: last_number
format_weight: 0.1
"""


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    p = tmp_path / "spread.yaml"
    p.write_text(SPREAD_SPEC, encoding="utf-8")
    return p


def test_shipped_spec_loads() -> None:
    spec = load_spread_spec(Path(__file__).parents[2] / "configs" / "pool_smollm2_spread.yaml")
    assert spec.answer_mode == "last_number" and spec.families


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("families: {}\n", "families: expected a mapping"),
        ("families: {chain_sum: []}\n", r"families.chain_sum: expected a non-empty list of levels"),
        ("families: {chain_sum: [-1]}\n", r"families.chain_sum: .*got \[-1\]"),
        ("families: {chain_sum: [0]}\nper_level: 0\n", "per_level: must be an integer >= 1, got 0"),
        ("families: {chain_sum: [0]}\neval_fraction: 0\n", "eval_fraction: must lie in"),
        ("families: {chain_sum: [0]}\nanswer_mode: number\n", "answer_mode: expected one of"),
        ("families: {chain_sum: [0]}\nformat_weight: 1.5\n", r"format_weight: expected a number in \[0, 1\)"),
        ("families: {chain_sum: [0]}\nbogus: 1\n", r"unknown key\(s\) \['bogus'\]"),
        ("- a list\n", "must hold a mapping"),
    ],
)
def test_bad_spec_is_a_config_error_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_spread_spec(p)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_spread_spec(tmp_path / "nope.yaml")


def test_build_is_seeded_disjoint_and_carries_the_options(spec_path: Path, tmp_path: Path) -> None:
    spec = load_spread_spec(spec_path)
    a = build_spread_pool(spec, tmp_path / "a")
    b = build_spread_pool(spec, tmp_path / "b")
    for pa_, pb_ in zip(a, b):
        assert TaskPool.load(pa_).identity() == TaskPool.load(pb_).identity()  # same spec, same pool
    train, evaluation = TaskPool.load(a[0]), TaskPool.load(a[1])
    questions = [p[-1]["content"] for p in train.prompts()]
    held = [p[-1]["content"] for p in evaluation.prompts()]
    assert not set(questions) & set(held)
    assert len(set(questions)) == len(questions)
    groups = {(s, i["rg_level"]) for s, i in zip(evaluation.data_sources(), evaluation.extra_infos())}
    assert groups == {
        ("reasoning_gym/chain_sum", 0),
        ("reasoning_gym/chain_sum", 1),
        ("reasoning_gym/basic_arithmetic", 0),
    }
    for pool in (train, evaluation):
        for info in pool.extra_infos():
            assert info["answer_mode"] == "last_number" and info["format_weight"] == pytest.approx(0.1)
        assert all(p[0] == {"role": "system", "content": "Reply with only the final answer."} for p in pool.prompts())
    ids = np.concatenate([train.ids, evaluation.ids])
    assert len(set(ids.tolist())) == len(ids)  # one index per task over both splits


def test_rows_are_scored_leniently(spec_path: Path, tmp_path: Path) -> None:
    train_path, _ = build_spread_pool(load_spread_spec(spec_path), tmp_path / "p")
    pool = TaskPool.load(train_path)
    truth = pool.ground_truths([0])[0]
    items = [
        RewardItem(pool.data_sources([0])[0], text, truth, pool.extra_infos([0])[0])
        for text in (f"The answer is {truth}.", f"<answer>{truth}</answer>", "no idea")
    ]
    with RewardScorer(workers=0) as scorer:
        rewards = [r.reward for r in scorer.score_batch(items)]
    assert rewards == pytest.approx([0.9, 1.0, 0.0])  # format_weight 0.1 pays the tag separately


def test_histogram_and_table(spec_path: Path, tmp_path: Path) -> None:
    train_path, _ = build_spread_pool(load_spread_spec(spec_path), tmp_path / "p")
    pool = TaskPool.load(train_path)
    rates = np.linspace(0, 1, len(pool))
    pool = pool.with_pass_rate("base_pass_rate", rates)
    png = pass_rate_histogram(pool, ["base_pass_rate"], tmp_path / "h.png")
    assert png.stat().st_size > 1000
    table = pass_rate_table(pool, ["base_pass_rate"])
    assert "| chain_sum L0 |" in table and "| **all** |" in table
    assert f"| **all** | {len(pool)} | {rates.mean():.3f} |" in table


def test_cli_builds_then_draws(spec_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pool"
    assert main(["data", "spread", "--config", str(spec_path), "--out", str(out)]) == 0
    assert (out / "train.parquet").exists() and (out / "eval.parquet").exists()
    assert main(["data", "spread", "--config", str(spec_path), "--out", str(out)]) == 2  # refuses to overwrite
    assert "--overwrite" in capsys.readouterr().err
    pool = TaskPool.load(out / "train.parquet")
    pool.with_pass_rate("base_pass_rate", np.full(len(pool), 0.5)).to_parquet(out / "train.parquet")
    assert main(["data", "spread", "--config", str(spec_path), "--out", str(out), "--histogram", "base_pass_rate"]) == 0
    assert (out / "pass_rates.png").exists() and "chain_sum L1" in (out / "pass_rates.md").read_text()


def test_spec_defaults_validate() -> None:
    with pytest.raises(ConfigError, match="families"):
        SpreadSpec()


@pytest.mark.parametrize(
    "name",
    [
        "smollm2_compare_cpu.yaml",
        "smollm2_compare_scale_cpu.yaml",
        "smollm2_compare_gpu.yaml",
        "smollm2_warmup_cpu.yaml",
    ],
)
def test_shipped_experiment_configs_load(name: str) -> None:
    """The experiment's configs are valid training configs (the GPU one names CUDA; it is only
    checked for a device when it runs)."""
    from bots_rft.train.config import load_config

    cfg = load_config(Path(__file__).parents[2] / "configs" / name)
    assert cfg.pool.startswith("runs/pools/smollm2_spread")
    assert cfg.device == ("cuda" if "gpu" in name else "cpu")


def test_shipped_gpu_spec_scales_the_cpu_one() -> None:
    root = Path(__file__).parents[2] / "configs"
    cpu, gpu = (
        load_spread_spec(root / "pool_smollm2_spread.yaml"),
        load_spread_spec(root / "pool_smollm2_spread_gpu.yaml"),
    )
    assert cpu.families == gpu.families and gpu.per_level > cpu.per_level
    assert (cpu.system_prompt, cpu.answer_mode) == (gpu.system_prompt, gpu.answer_mode)


@pytest.mark.parametrize(
    ("extra", "text"),
    [
        (["--config", "nope.yaml", "--out", "p"], "--config"),
        (["--config", "bad.yaml", "--out", "p"], "answer_mode: expected one of"),
        (["--config", "spread.yaml", "--out", "empty", "--histogram", "x"], "train.parquet"),
        (["--config", "spread.yaml", "--out", "empty", "--histogram", " , "], "--histogram: expected comma-separated"),
    ],
)
def test_cli_bad_input_exits_2_naming_it_and_writes_nothing(
    spec_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: list[str],
    text: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text("families: {chain_sum: [0]}\nanswer_mode: number\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["data", "spread", *extra]) == 2
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
