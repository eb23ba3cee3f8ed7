"""`bots train` with the methods that read task embeddings (bots-embed, bots-sim): `embeddings:
policy` (the starting policy's, computed once after the warm-up and kept in the run's directory)
or a `bots embed` file read by task id; exact resume; the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft import BOTS  # noqa: E402
from bots_rft.cli import main as cli_main  # noqa: E402
from bots_rft.data import TaskPool  # noqa: E402
from bots_rft.data.embeddings import read_embeddings, write_embeddings  # noqa: E402
from bots_rft.errors import CheckpointError, ConfigError  # noqa: E402
from bots_rft.estimators import EmbeddingRegression, Similarity  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.run_embeddings import RUN_FILE  # noqa: E402
from bots_rft.train.toy import toy_config  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402

pytestmark = pytest.mark.slow


def cfg(pool: Path, out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        method="bots-embed",
        embeddings="policy",
        steps=2,
        batch_size=4,
        rollouts=4,
        mini_batch_size=2,
        micro_batch_size=8,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=2,
        eval_every=2,
    )
    return toy_config(pool, out, **{**base, **kw})


def _start_record(out: Path) -> dict[str, Any]:
    return next(r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "config")


def _train_records(out: Path) -> list[dict[str, Any]]:
    return [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]


@pytest.mark.parametrize("method,estimator", [("bots-embed", EmbeddingRegression), ("bots-sim", Similarity)])
def test_policy_embeddings_are_computed_after_the_warm_up_and_charged(
    method: str, estimator: type, toy_pool: Path, tmp_path: Path
) -> None:
    trainer = GRPOTrainer(cfg(toy_pool, tmp_path, method=method, sft_steps=2, sft_batch_size=2))
    assert trainer.selector is None  # the starting policy is the warmed-up one: built in run()
    res = trainer.run()
    trainer.close()
    assert res.steps_done == 2
    assert isinstance(trainer.selector, BOTS) and isinstance(trainer.selector.evidence, estimator)
    record = _start_record(tmp_path)["embeddings"]
    pool = TaskPool.load(toy_pool)
    assert record["source"] == "policy" and record["tasks"] == len(pool)
    assert record["dim"] == trainer.model.config.hidden_size
    assert record["prompt_tokens"] > len(pool)  # one prefill of every prompt token
    stored = read_embeddings(tmp_path / RUN_FILE)
    np.testing.assert_array_equal(stored.task_ids, pool.ids)
    np.testing.assert_array_equal(
        stored.matrix, trainer.selector.evidence.embeddings
    ) if method == "bots-embed" else None


def test_a_run_with_policy_embeddings_resumes_exactly(toy_pool: Path, tmp_path: Path) -> None:
    """The resumed run reads the starting policy's embeddings from the run directory, not the
    current policy's, so its picks are those of the uninterrupted run."""
    train(cfg(toy_pool, tmp_path / "a", steps=4, sft_steps=2, sft_batch_size=2))
    first = train(cfg(toy_pool, tmp_path / "b", steps=2, sft_steps=2, sft_batch_size=2))
    assert first.steps_done == 2
    resumed = train(cfg(toy_pool, tmp_path / "b", steps=4, sft_steps=2, sft_batch_size=2, resume=True))
    assert resumed.steps_done == 4
    a, b = _train_records(tmp_path / "a"), _train_records(tmp_path / "b")
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"] and ra["loss"] == rb["loss"]


def test_resuming_without_the_runs_embeddings_is_refused(toy_pool: Path, tmp_path: Path) -> None:
    train(cfg(toy_pool, tmp_path, steps=1, eval_every=0))
    (tmp_path / RUN_FILE).unlink()
    with pytest.raises(CheckpointError, match=f"embeddings: .*{RUN_FILE}"):
        train(cfg(toy_pool, tmp_path, steps=2, eval_every=0, resume=True))


def test_a_bots_embed_file_is_read_by_task_id(toy_pool: Path, tmp_path: Path) -> None:
    pool = TaskPool.load(toy_pool)
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(len(pool), 5)).astype(np.float32)
    order = rng.permutation(len(pool))  # the file's rows in another order than the pool's
    path = tmp_path / "emb.safetensors"
    write_embeddings(path, pool.ids[order], matrix[order])
    trainer = GRPOTrainer(cfg(toy_pool, tmp_path / "run", embeddings=str(path), steps=1))
    res = trainer.run()
    trainer.close()
    assert res.steps_done == 1
    np.testing.assert_array_equal(trainer.selector.evidence.embeddings, matrix)  # type: ignore[union-attr]
    start = _start_record(tmp_path / "run")
    assert start["embeddings"]["prompt_tokens"] == 0
    # The run records what its arithmetic depends on besides the config, at start and on resume.
    machine = start["machine"]
    assert machine["cpu"] and machine["torch"] == torch.__version__ and machine["numpy"] == np.__version__
    assert {"torch_cpu_capability", "onednn", "numpy_cpu_features", "bots_core_simd"} <= set(machine)
    assert start["resumed_from"] is None
    # Resuming with another file is refused: the posterior was learnt on these embeddings.
    write_embeddings(path, pool.ids, matrix + 1.0)
    with pytest.raises(ConfigError, match="evidence"):
        train(cfg(toy_pool, tmp_path / "run", embeddings=str(path), steps=2, resume=True))


def test_a_method_that_reads_embeddings_needs_the_key(toy_pool: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^embeddings: method 'bots-embed' reads task embeddings"):
        cfg(toy_pool, tmp_path, embeddings=None)
    # Methods that read none ignore it (a comparison's arms share one config).
    assert cfg(toy_pool, tmp_path, method="random").embeddings == "policy"


def test_a_file_missing_a_task_is_one_line_exit_2_and_nothing_written(
    toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = TaskPool.load(toy_pool)
    path = tmp_path / "emb.safetensors"
    write_embeddings(path, pool.ids[1:], np.ones((len(pool) - 1, 3), np.float32))
    config = tmp_path / "c.yaml"  # JSON is YAML
    config.write_text(json.dumps(cfg(toy_pool, tmp_path / "run", embeddings=str(path)).to_dict()))
    code = cli_main(["train", "--config", str(config), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and "embeddings" in err[0] and str(pool.ids[0]) in err[0], err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_the_training_guides_bots_embed_commands_run_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "training.md").read_text(encoding="utf-8")
    section = guide[guide.index("## BOTS without reference models") :]
    block = section[section.index("```bash\n") + 8 : section.index("```", section.index("```bash\n") + 8)]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 4
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke_tiny.yaml").write_bytes((root / "configs" / "smoke_tiny.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "bots"
        extra = ["--no-progress"] if words[1] in ("train", "embed") else []
        assert cli_main([*words[1:], *extra]) == 0, command
    out = capsys.readouterr().out
    assert out.count("bots train: done after step 4") == 2
    assert _start_record(tmp_path / "runs" / "embed_smoke")["embeddings"]["source"] == "policy"
    assert _start_record(tmp_path / "runs" / "embed_file")["embeddings"]["source"] == "runs/toy/embeddings.safetensors"


def test_a_resume_on_another_machine_says_what_differs(
    toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run resumed where its arithmetic may differ (another CPU, instruction set or library
    build) continues, and its resume record and a warning name what differs."""
    import bots_rft.train.trainer as trainer_module
    from logged import warnings_of

    train(cfg(toy_pool, tmp_path, method="random", embeddings=None, steps=1, eval_every=0))
    real = trainer_module.machine_record

    def elsewhere() -> dict[str, Any]:
        return {**real(), "cpu": "Another CPU", "torch_cpu_capability": "AVX2"}

    monkeypatch.setattr(trainer_module, "machine_record", elsewhere)
    # A framework's logging set-up in the same process (logging.config.dictConfig, whose default
    # disable_existing_loggers=True disables every logger made before it) must not silence this
    # warning: what dictConfig does to our logger, undone after the test.
    monkeypatch.setattr(trainer_module.log, "disabled", True)
    with warnings_of(trainer_module.log) as warned:
        train(cfg(toy_pool, tmp_path, method="random", embeddings=None, steps=2, eval_every=0, resume=True))
    starts = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "config"]
    assert len(starts) == 2 and starts[0]["machine_changed"] is None
    changed = starts[1]["machine_changed"]
    assert any(c.startswith("cpu: ") and c.endswith("-> 'Another CPU'") for c in changed), changed
    assert any(c.startswith("torch_cpu_capability: ") for c in changed), changed
    assert starts[1]["resumed_from"].endswith("step_000001")
    text = "\n".join(warned)
    assert "resume: this machine differs from the one the run started on (" in text
    assert "from step 2 on may differ" in text
