"""Reference pass rates with the tiny random model, end to end on CPU; model loading; resume."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from bots_rft.cli import main
from bots_rft.data import TaskPool, chat, make_row
from bots_rft.errors import ConfigError, InvalidArgumentError
from bots_rft.llm.models import TINY_CHAT_TEMPLATE, apply_chat_template, encode_chats, load_model
from bots_rft.rewards import register_verifier
from bots_rft.train.refeval import RefEvalConfig, progress_path_for, run_refeval

COLUMN = "tiny_pass_rate"


@pytest.fixture
def pool_path(tmp_path: Path) -> Path:
    rows = [
        make_row(
            index=10 + i,
            prompt=chat(f"What is {i} + 1? Answer in <answer></answer> tags."),
            ground_truth=str(i + 1),
            data_source="logic__sum",
            ability="logic",
            split="train",
        )
        for i in range(4)
    ]
    path = tmp_path / "pool.parquet"
    TaskPool.from_records(rows).to_parquet(path)
    return path


def cfg(pool: Path, **kw: Any) -> RefEvalConfig:
    base: dict[str, Any] = dict(
        model="tiny",
        pool=str(pool),
        column=COLUMN,
        rollouts=2,
        max_new_tokens=6,
        batch_size=4,
        chunk_tasks=1,
        device="cpu",
        workers=0,
    )
    base.update(kw)
    return RefEvalConfig(**base)


def test_load_tiny_model_and_tokenizer() -> None:
    model, tok = load_model("tiny", device="cpu")
    assert tok.padding_side == "left" and tok.pad_token is not None
    assert tok.chat_template == TINY_CHAT_TEMPLATE
    text = apply_chat_template(tok, [{"role": "system", "content": "s"}, {"role": "user", "content": "héllo"}])
    assert text.endswith("<|im_start|>assistant\n") and "héllo" in text
    assert tok.decode(tok("héllo ✓", add_special_tokens=False)["input_ids"]) == "héllo ✓"  # byte-level, lossless
    enc = encode_chats(tok, [[{"role": "user", "content": "a"}], [{"role": "user", "content": "a much longer one"}]])
    assert enc["attention_mask"][0, 0] == 0 and enc["attention_mask"][0, -1] == 1  # left padding
    assert next(model.parameters()).device.type == "cpu" and not model.training
    llama, _ = load_model("tiny-llama", device="cpu")
    assert type(llama).__name__ == "LlamaForCausalLM"
    with pytest.raises(ConfigError, match="neither"):
        load_model("/no/such/model", device="cpu")
    with pytest.raises(InvalidArgumentError, match="dtype"):
        load_model("tiny", device="cpu", dtype="int3")


def test_refeval_tiny_end_to_end_via_cli(pool_path: Path, tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "out.parquet"
    argv = [
        "refeval",
        "--model",
        "tiny",
        "--pool",
        str(pool_path),
        "--rollouts",
        "2",
        "--column",
        COLUMN,
        "--max-new-tokens",
        "6",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--workers",
        "0",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    assert f"wrote column '{COLUMN}'" in capsys.readouterr().out
    rates = TaskPool.load(out).pass_rate(COLUMN)
    assert rates.shape == (4,) and not np.isnan(rates).any()
    assert ((rates >= 0) & (rates <= 1)).all()
    assert not progress_path_for(out, COLUMN).exists()  # removed once the pool is written
    assert COLUMN not in TaskPool.load(pool_path).table.column_names  # input untouched with --out


def test_rewards_are_aggregated_per_task(pool_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pass rate = mean reward of the task's rollouts: a fake sampler answers row 0 always right,
    row 1 half the time, the rest never."""
    import bots_rft.train.refeval as refeval

    def fake(model: Any, tok: Any, chats: Any, n: int, **kw: Any) -> tuple[list[list[str]], int]:
        out = []
        for c in chats:
            i = int(c[-1]["content"].split()[2])
            good = f"<answer>{i + 1}</answer>"
            out.append([good] * n if i == 0 else [good, "<answer>x</answer>"] * (n // 2) if i == 1 else ["no"] * n)
        return out, 0

    monkeypatch.setattr(refeval, "sample_responses", fake)
    summary = run_refeval(cfg(pool_path, rollouts=4), progress=False)
    assert summary.rates.tolist() == [1.0, 0.5, 0.0, 0.0]
    assert TaskPool.load(pool_path).pass_rate(COLUMN).tolist() == [1.0, 0.5, 0.0, 0.0]  # written in place
    assert summary.share_one == 0.25 and summary.share_between == 0.25 and summary.share_zero == 0.5


@pytest.mark.parametrize("system_prompt", [None, "", "Answer in <answer> tags."])
def test_system_prompt_is_handled_as_in_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system_prompt: str | None
) -> None:
    """Reference pass rates transfer to training only if both prompt alike: refeval samples from
    exactly the chats the trainer would build, and the setting is part of the resume fingerprint."""
    import bots_rft.train.refeval as refeval

    rows = [
        make_row(
            index=i,
            prompt=chat(f"What is {i} + 1?", system="Think first."),
            ground_truth=str(i + 1),
            data_source="logic__sum",
            ability="logic",
            split="train",
        )
        for i in range(3)
    ]
    pool_path = tmp_path / "with_system.parquet"
    TaskPool.from_records(rows).to_parquet(pool_path)
    seen: list[Any] = []

    def fake(model: Any, tok: Any, chats: Any, n: int, **kw: Any) -> tuple[list[list[str]], int]:
        seen.extend(chats)
        return [["no"] * n for _ in chats], 0

    monkeypatch.setattr(refeval, "sample_responses", fake)
    run_refeval(cfg(pool_path, rollouts=2, system_prompt=system_prompt), progress=False)
    pool = TaskPool.load(pool_path)
    assert seen == pool.prompts(system_prompt=system_prompt)  # what the trainer builds
    assert pool.prompts()[0][0] == {"role": "system", "content": "Think first."}
    assert [m["role"] for m in seen[0]] == {None: ["system", "user"], "": ["user"]}.get(
        system_prompt, ["system", "user"]
    )
    if system_prompt:
        assert seen[0][0]["content"] == system_prompt
    fp = cfg(pool_path, system_prompt=system_prompt).fingerprint()
    assert ("system_prompt" in fp) == (system_prompt is not None)


def length_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Any) -> float:
    """A reward that depends on the exact sampled text, so equal rates mean equal samples."""
    return (len(response.encode()) % 7) / 6


def test_resume_matches_uninterrupted_run(pool_path: Path, tmp_path: Path) -> None:
    register_verifier("testlen", length_verifier)
    table = TaskPool.load(pool_path).table
    table = table.set_column(table.column_names.index("data_source"), "data_source", pa.array(["testlen"] * 4))
    TaskPool(table).to_parquet(pool_path)
    full = run_refeval(
        cfg(pool_path, out=str(tmp_path / "full.parquet"), keep_progress=True, rollouts=3), progress=False
    )
    ppath = progress_path_for(tmp_path / "full.parquet", COLUMN)
    lines = ppath.read_text().splitlines()
    assert len(lines) == 1 + 4  # header + one record per task

    # An interrupted run: header, two finished tasks and a torn last line.
    out = tmp_path / "resumed.parquet"
    progress_path_for(out, COLUMN).write_text("\n".join(lines[:3]) + '\n{"row": 2, "succ')
    resumed = run_refeval(cfg(pool_path, out=str(out), rollouts=3), progress=False)
    assert resumed.resumed == 2 and resumed.evaluated_now == 2
    assert len(set(full.rates.tolist())) > 1  # the samples really differ from task to task
    np.testing.assert_array_equal(resumed.rates, full.rates)
    np.testing.assert_array_equal(TaskPool.load(out).pass_rate(COLUMN), full.rates)


def test_resume_refuses_other_settings(pool_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.parquet"
    progress_path_for(out, COLUMN).write_text(json.dumps({"config": {"rollouts": 99}, "rows": 4}) + "\n")
    with pytest.raises(ConfigError, match="different settings"):
        run_refeval(cfg(pool_path, out=str(out)), progress=False)
    summary = run_refeval(cfg(pool_path, out=str(out), restart=True, limit=2), progress=False)
    rates = TaskPool.load(out).pass_rate(COLUMN)
    assert summary.tasks == 2 and not np.isnan(rates[:2]).any() and np.isnan(rates[2:]).all()


@pytest.mark.parametrize(
    ("field", "value"), [("rollouts", 0), ("temperature", 0.0), ("top_p", 1.5), ("batch_size", 0), ("limit", 0)]
)
def test_config_validation(pool_path: Path, field: str, value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        run_refeval(cfg(pool_path, **{field: value}), progress=False)


@pytest.mark.parametrize("bad", [{"model": "nosuch"}, {"dtype": "int3"}, {"device": "bogus"}, {"column": "prompt"}])
def test_a_failed_start_leaves_nothing_that_blocks_the_corrected_rerun(pool_path: Path, bad: dict[str, Any]) -> None:
    before = sorted(p.name for p in pool_path.parent.iterdir())
    with pytest.raises((ConfigError, InvalidArgumentError)):
        run_refeval(cfg(pool_path, **bad), progress=False)
    assert sorted(p.name for p in pool_path.parent.iterdir()) == before  # no progress file
    fixed = {**bad, "column": COLUMN} if "column" in bad else {}
    summary = run_refeval(cfg(pool_path, **fixed), progress=False)  # the corrected run is not blocked
    assert summary.tasks == 4 and summary.evaluated_now == 4


@pytest.mark.slow
def test_the_engine_is_part_of_the_resume_fingerprint(pool_path: Path, tmp_path: Path) -> None:
    """The engines sample the same distribution but not the same draws: a progress file resumes
    only with the engine that wrote it. Files written before the setting existed (hf, no engine
    key) still resume with engine='hf'."""
    fast, hf = cfg(pool_path).fingerprint(), cfg(pool_path, engine="hf").fingerprint()
    assert fast["engine"] == "fast" and "engine" not in hf
    out = tmp_path / "o.parquet"
    written = run_refeval(cfg(pool_path, out=str(out), keep_progress=True, limit=2, engine="hf"), progress=False)
    assert written.evaluated_now == 2
    with pytest.raises(ConfigError, match="different settings"):
        run_refeval(cfg(pool_path, out=str(out), limit=2), progress=False)  # the default engine: fast
    again = run_refeval(cfg(pool_path, out=str(out), limit=2, engine="hf"), progress=False)
    assert again.resumed == 2 and again.evaluated_now == 0
    with pytest.raises(InvalidArgumentError, match="engine: expected one of fast, speculative, hf, got 'vllm'"):
        run_refeval(cfg(pool_path, out=str(out), engine="vllm"), progress=False)


@pytest.mark.slow
def test_the_speculative_engine_measures_pass_rates(pool_path: Path, tmp_path: Path) -> None:
    """``--engine speculative`` end to end: every task's pass rate written, and resumable."""
    out = tmp_path / "o.parquet"
    summary = run_refeval(cfg(pool_path, out=str(out), engine="speculative", keep_progress=True), progress=False)
    assert summary.engine == "speculative" and summary.tasks == 4 and summary.generated_tokens > 0
    assert "engine speculative" in "\n".join(summary.lines())
    assert np.all(np.isfinite(TaskPool.load(out).pass_rate(COLUMN)))
    again = run_refeval(cfg(pool_path, out=str(out), engine="speculative"), progress=False)
    assert again.resumed == 4 and again.evaluated_now == 0


def test_a_reference_column_does_not_depend_on_being_the_processs_first_generation(
    pool_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What parted the pre-registered trial's BOTS seed 10 from its reruns: the oneDNN packing check
    runs inside the first sampled generation of a process, and when it drew from torch's global
    generator, the first chunk of the first reference column measured in a `bots compare` process
    (after that chunk's seed) came out otherwise than the same column measured later in a process.
    The column must be the same either way; with the trial's check (a draw from the global
    generator) it is not, which this test also shows."""
    import torch

    from bots_rft.llm import decoders

    register_verifier("testlen", length_verifier)
    table = TaskPool.load(pool_path).table
    table = table.set_column(table.column_names.index("data_source"), "data_source", pa.array(["testlen"] * 4))
    TaskPool(table).to_parquet(pool_path)

    def measure(name: str, first: bool) -> np.ndarray:
        if first:
            decoders._packing_works.cache_clear()  # the check runs inside this measurement
        else:
            decoders._packing_works(torch.float32)  # the process generated before (the check is done)
        out = run_refeval(cfg(pool_path, out=str(tmp_path / f"{name}.parquet"), rollouts=4), progress=False)
        return out.rates

    later = measure("later", first=False)
    assert len(set(later.tolist())) > 1  # the samples differ from task to task
    np.testing.assert_array_equal(measure("first", first=True), later)

    real = decoders._packing_works.__wrapped__
    calls = []

    @functools.cache
    def trials_check(dtype: torch.dtype) -> bool:
        calls.append(dtype)
        torch.randn(8, 16)  # the trial's version drew its inputs from torch's global generator
        torch.randn(3, 16)
        return bool(real(dtype))

    monkeypatch.setattr(decoders, "_packing_works", trials_check)
    shifted = measure("shifted", first=True)
    if not calls:
        pytest.skip("this torch build packs no weights for oneDNN: the check never runs")
    assert not np.array_equal(shifted, later)
