"""Trial 3's pre-registered config (configs/trial3_strings_cpu.yaml) at smoke size: `bots compare
--prepare-only` makes the pool, warm-up and references and trains nothing; the comparison then
reuses them and runs Random, bots-embed (the starting policy's embeddings, no references) and BOTS,
and reports the two contrasts under Holm's rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "configs" / "trial3_strings_cpu.yaml")


def test_trial3_config_prepares_then_runs_every_arm_and_reports_both_contrasts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.cli import main
    from bots_rft.data import TaskPool
    from bots_rft.train.logger import read_metrics

    out = tmp_path / "trial3"
    argv = ["compare", "--config", CONFIG, "--smoke", "--out", str(out), "--no-progress"]
    assert main([*argv, "--prepare-only"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["pool", "references", "warmup"]  # no run trained
    pool = TaskPool.load(out / "pool" / "train.parquet")
    columns = pool.difficulty_columns  # the references' measured pass rates (--smoke shortens their warm-ups)
    assert any(c.startswith("weak_sft") for c in columns) and any(c.startswith("strong_sft") for c in columns)
    assert main([*argv, "--prepare-only"]) == 2  # made already: refused without --reuse ...
    assert "--reuse" in capsys.readouterr().err
    assert main([*argv, "--reuse"]) == 0  # ... and the comparison starts from it
    printed = capsys.readouterr().out
    assert "outcome under the rule: (smoke run, not a result) C4 bots-embed − random: " in printed
    assert "; C5 bots − random: " in printed
    text = (out / "summary.md").read_text(encoding="utf-8")
    assert "C4 bots-embed − random = " in text and "C5 bots − random = " in text
    assert "bots-embed: task embeddings (policy) and their own rollouts" in text  # what each arm saw
    assert "Task embeddings (bots-embed): each run prefilled " in text  # their cost, on the compute axis
    for run in sorted((out / "bots-embed").glob("seed*")):
        first = next(r for r in read_metrics(run / "metrics.jsonl") if r["kind"] == "config")
        assert first["embeddings"]["source"] == "policy" and first["embeddings"]["prompt_tokens"] > 0


def test_the_mechanism_check_replays_bots_embeds_regression_on_randoms_batches() -> None:
    """The report's shadow estimator: bots-embed's regression fed a uniform run's batches in turn,
    each batch predicted before it is observed, on a world where the embeddings carry the rates."""
    from bots_rft.report.training import RunCurves, regression_evidence_markdown, regression_evidence_quality

    rng = np.random.default_rng(0)
    n_tasks, d, n = 2000, 8, 8
    emb = rng.normal(size=(n_tasks, d)).astype(np.float32)
    p = 1 / (1 + np.exp(-(emb @ rng.normal(size=d))))
    records: list[dict[str, Any]] = [{"kind": "config", "config": {"rollouts": n, "batch_size": 16}}]
    for step in range(1, 41):
        ids = rng.choice(n_tasks, 16, replace=False)
        records.append(
            {"kind": "train", "step": step, "task_ids": ids.tolist(), "successes": rng.binomial(n, p[ids]).tolist()}
        )
    run = RunCurves("random", records)
    q = regression_evidence_quality(run, emb, 0.1, 0.25)
    assert q is not None and q["steps"] >= 35  # every batch after the first is predicted
    assert q["auc"] > 0.6 and q["pearson"] > 0.6
    blind = regression_evidence_quality(run, rng.normal(size=(n_tasks, d)).astype(np.float32), 0.1, 0.25)
    assert blind is not None and abs(blind["pearson"]) < 0.3  # embeddings that carry nothing
    table = regression_evidence_markdown({"random": [run]}, emb, [], 0.1, 0.25, shadow="random")
    assert table is not None and "| shadow on random's batches | " in table


def test_the_probe_and_the_prediction_scripts_run_on_a_small_pool(tmp_path: Path) -> None:
    """docs/trial3/probe.md's two programs, on a 300-task pool with made-up pass rates and
    embeddings (the prediction at its --smoke size): they read what the page says and write the
    tables it shows."""
    import subprocess
    import sys

    from bots_rft.cli import main
    from bots_rft.data import TaskPool
    from bots_rft.data.embeddings import write_embeddings

    assert main(["data", "strings", "--out", str(tmp_path / "pool"), "--tasks", "300", "--eval-tasks", "20"]) == 0
    pool = TaskPool.load(tmp_path / "pool" / "train.parquet")
    rng = np.random.default_rng(0)
    lengths = np.array([len(c[-1]["content"]) for c in pool.prompts()], dtype=np.float64)
    start = np.clip(1.2 - lengths / lengths.max() + rng.normal(0, 0.1, len(pool)), 0, 1).round(3)
    pool.with_pass_rate("start_pass_rate", start).to_parquet(tmp_path / "start.parquet")
    refs = pool.with_pass_rate("start_pass_rate", start).with_pass_rate(
        "weak_sft600_pass_rate", np.clip(start - 0.2, 0, 1)
    )
    refs.with_pass_rate(
        "strong_sft1200_pass_rate", (0.3 * start + 0.7 * rng.uniform(0.4, 1.0, len(pool))).round(3)
    ).to_parquet(tmp_path / "refs.parquet")
    emb = np.column_stack([lengths, rng.normal(size=(len(pool), 7))]).astype(np.float32)
    write_embeddings(tmp_path / "emb.safetensors", pool.ids, emb)
    probe = [sys.executable, str(ROOT / "examples" / "trial3" / "probe.py"), "--pool", str(tmp_path / "refs.parquet")]
    probe += ["--embeddings", str(tmp_path / "emb.safetensors"), "--reference", "weak_sft600_pass_rate"]
    probe += ["--ks", "16,64", "--draws", "3", "--out", str(tmp_path / "out")]
    done = subprocess.run(probe, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "| embedding | " in done.stdout and "| weak_sft600_pass_rate | " in done.stdout
    predict = [
        sys.executable,
        str(ROOT / "examples" / "trial3" / "predict.py"),
        "--pool",
        str(tmp_path / "refs.parquet"),
    ]
    predict += ["--start", str(tmp_path / "start.parquet"), "--probe", str(tmp_path / "out" / "probe.json")]
    predict += ["--calibration", str(ROOT / "docs" / "trial" / "calibration.json"), "--k", "64"]
    predict += ["--out", str(tmp_path / "out"), "--smoke"]
    done = subprocess.run(predict, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "out" / "prediction.md").read_text(encoding="utf-8")
    assert "| C4 = bots-embed − random | " in table and "| C5 = bots − random | " in table
    assert "| C4 | " in table and "| C5 | " in table


def test_collect_keeps_every_runs_steps_and_machines(tmp_path: Path) -> None:
    """examples/trial3/collect.py: each run's per-step picks, successes and loss, gzipped with a
    fixed mtime (the same runs, the same bytes), and each start's and resume's machine."""
    import gzip
    import json
    import subprocess
    import sys

    for method, seed in (("random", 50), ("bots-embed", 50)):
        run = tmp_path / "runs" / method / f"seed{seed}"
        run.mkdir(parents=True)
        records = [
            {"kind": "config", "step": 0, "machine": {"cpu": "X"}, "resumed_from": None},
            {"kind": "train", "step": 1, "task_ids": [3, 1], "successes": [2.0, 8.0], "loss": 0.5},
            {"kind": "config", "step": 1, "machine": {"cpu": "X"}, "resumed_from": "ck/step_000001"},
            {"kind": "train", "step": 2, "task_ids": [0, 2], "successes": [1.0, 0.0], "loss": 0.25},
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    argv = [sys.executable, str(ROOT / "examples" / "trial3" / "collect.py"), "--runs", str(tmp_path / "runs")]
    for out in ("a", "b"):
        done = subprocess.run([*argv, "--out", str(tmp_path / out)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "a" / "steps.jsonl.gz").read_bytes() == (tmp_path / "b" / "steps.jsonl.gz").read_bytes()
    rows = [json.loads(line) for line in gzip.decompress((tmp_path / "a" / "steps.jsonl.gz").read_bytes()).splitlines()]
    assert [(r["method"], r["seed"], r["step"]) for r in rows] == [
        ("bots-embed", 50, 1),
        ("bots-embed", 50, 2),
        ("random", 50, 1),
        ("random", 50, 2),
    ]
    assert rows[0]["task_ids"] == [3, 1] and rows[0]["successes"] == [2.0, 8.0] and rows[0]["loss"] == 0.5
    machines = json.loads((tmp_path / "a" / "machines.json").read_text())
    assert [s["resumed_from"] for s in machines["random/seed50"]] == [None, "ck/step_000001"]
