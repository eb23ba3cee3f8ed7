"""``bots compare``: two methods on the same toy pool, seed and budget; tables and curves."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.cli import main  # noqa: E402
from bots_rft.report.training import (  # noqa: E402
    RunCurves,
    average_runs,
    best_within,
    budget_markdown,
    comparison_rows,
    distinct_tasks,
    evidence_markdown,
    evidence_quality,
    seeds_markdown,
    timing_markdown,
)
from bots_rft.train.toy import write_toy_pool  # noqa: E402

pytestmark = pytest.mark.slow


def toy_config(tmp_path: Path, extra: str = "") -> Path:
    """A two-step config on an 8-task toy pool with reference columns (``extra``: more keys)."""
    train_path, _ = write_toy_pool(tmp_path / "pool", num_tasks=8, eval_tasks=2)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'pool = "{train_path}"\nmodel = "tiny"\ndevice = "cpu"\nsteps = 2\nbatch_size = 2\nrollouts = 2\n'
        "max_new_tokens = 4\neval_every = 1\ntensorboard = false\n"
        + extra
        + 'weak_column = "weak_pass_rate"\nstrong_column = "strong_pass_rate"\n'
        '[verifiers]\ntoy = "bots_rft.train.toy:toy_reward"\n'
    )
    return cfg


def test_compare_two_methods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = toy_config(tmp_path, "sft_steps = 2\nsft_batch_size = 2\n")
    out = tmp_path / "cmp"
    assert main(["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--no-progress"]) == 0
    text = (out / "summary.md").read_text()
    assert "| Method | TTB 50% ↓" in text and "| random |" in text and "| bots |" in text
    assert (out / "curves.png").stat().st_size > 1000
    assert (out / "warmup" / "config.json").exists()  # one shared warm-up
    # --reuse finds both runs finished and only rebuilds the report.
    assert (
        main(
            ["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--reuse", "--no-progress"]
        )
        == 0
    )
    assert "finished run" in capsys.readouterr().out
    # Keys that only say how a run is driven never stop a reuse (nor their absence from runs
    # recorded before they existed).
    assert (
        main(
            [
                "compare",
                "--config",
                str(cfg),
                "--methods",
                "bots,random",
                "--out",
                str(out),
                "--reuse",
                "--no-progress",
                "resume_params=config",
                "verifier_error_stop=0.5",
                "reward_workers=0",
            ]
        )
        == 0
    )
    assert "finished run" in capsys.readouterr().out
    assert main(["compare", "--config", str(cfg), "--methods", "bots", "--out", str(out)]) == 2
    capsys.readouterr()
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    # Runs made with other settings are not reused; without --reuse existing runs are refused.
    argv = ["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--no-progress"]
    assert main([*argv, "--reuse", "lr=0.5"]) == 2
    assert "was trained with other settings (lr=1e-06 then, 0.5 now)" in capsys.readouterr().err
    assert main([*argv, "--reuse", "sft_lr=0.5"]) == 2
    err = capsys.readouterr().err
    assert "the warm-up in" in err and "sft_lr=0.001 then, 0.5 now" in err
    assert main(argv) == 2
    assert "already holds" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before  # nothing written
    # out_dir= names the output directory as --out does.
    assert main(["compare", "--config", str(cfg), "--methods", "bots,random", f"out_dir={out}", "--report-only"]) == 0
    assert main([*argv, f"out_dir={tmp_path / 'elsewhere'}", "--report-only"]) == 2
    assert "disagree" in capsys.readouterr().err


def run(label: str, accs: list[float], etr: float = 0.5, rollouts: int = 8) -> RunCurves:
    recs: list[dict[str, object]] = [{"kind": "config", "config": {"batch_size": 2, "rollouts": 4}}]
    recs += [{"kind": "eval", "step": 2 * i, "accuracy": a} for i, a in enumerate(accs)]
    recs += [
        {
            "kind": "train",
            "step": s,
            "etr": etr,
            "below_one": 1.0,
            "above_zero": 0.5,
            "rollouts": rollouts,
            "step_s": 1.0,
            "reward_mean": 0.1,
            "capability": None,
        }
        for s in (1, 2, 3, 4)
    ]
    return RunCurves(label, recs)


def test_compare_over_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = toy_config(tmp_path)
    out = tmp_path / "cmp"
    argv = ["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--no-progress"]
    assert main([*argv, "--seeds", "0,3"]) == 0
    for m in ("bots", "random"):
        for seed in (0, 3):
            log = (out / m / f"seed{seed}" / "metrics.jsonl").read_text()
            assert f'"seed": {seed}' in log  # each run used its own RL seed
    text = (out / "summary.md").read_text()
    assert "seeds 0, 3" in text and "Over seeds (mean ± 95% half-width)" in text
    assert "| bots | 2 |" in text and "| random | 2 |" in text
    assert (out / "curves.png").stat().st_size > 1000
    capsys.readouterr()
    for bad in ("", "a,b", "1,1", "-1"):
        assert main([*argv, "--seeds", bad]) == 2
        assert f"--seeds: expected distinct non-negative integers like 0,1,2, got {bad!r}" in capsys.readouterr().err


def test_average_and_seed_table_by_hand() -> None:
    mean = average_runs("bots", [run("bots", [0.0, 0.2, 0.4], etr=0.4), run("bots", [0.2, 0.4, 0.6], etr=0.6)])
    assert mean.eval_acc.tolist() == pytest.approx([0.1, 0.3, 0.5])
    assert mean.col("etr").tolist() == pytest.approx([0.5] * 4)
    assert mean.col("capability").tolist()[0] != mean.col("capability").tolist()[0]  # all None -> NaN
    single = run("random", [0.0, 0.1])
    assert average_runs("random", [single]) is single
    table = seeds_markdown({"bots": [run("bots", [0.0, 0.4]), run("bots", [0.0, 0.6])]})
    # finals 0.4 and 0.6: mean 0.5, half-width t(1) * sd / sqrt(2) = 12.706 * 0.1414 / 1.414 = 1.271
    assert "| bots | 2 | 0.500 ± 1.271 | 0.500 ± 1.271 | 0.500 ± 0.000 | 0.100 ± 0.000 | 0 ± 0 |" in table
    assert "0.400, 0.600 |" in table
    picks = [{"kind": "train", "step": i + 1, "task_ids": ids} for i, ids in enumerate([[1, 2], [2, 3], [3, 1]])]
    assert distinct_tasks(RunCurves("dots", picks)) == 3


def test_evidence_quality_by_hand() -> None:
    """p̃ at step t uses μ̃ logged at step t-1; a batch whose rates equal p̃ exactly has Pearson 1,
    and effective tasks ranked by P(effective | p̃) above ineffective ones give AUC 1."""
    import numpy as np

    weak = np.array([0.0, 0.0, 0.0, 0.0, np.nan, 0.2])
    strong = np.array([1.0, 0.5, 0.25, 1.0, 0.5, 0.2])
    n = 4
    recs: list[dict[str, object]] = [{"kind": "config", "config": {"rollouts": n, "batch_size": 4}}]
    recs.append({"kind": "train", "step": 1, "task_ids": [5, 4, 3, 2], "successes": [0, 0, 0, 0], "capability": 0.5})
    # Under μ̃ = 0.5: p̃ = 0.5, 0.25, 0.125, 0.2 for tasks 0, 1, 2, 5 (task 4 has no weak reference).
    recs.append(
        {"kind": "train", "step": 2, "task_ids": [0, 1, 2, 5, 4], "successes": [2, 1, 0, 0, 3], "capability": 0.7}
    )
    q = evidence_quality(RunCurves("bots", recs), weak, strong)
    assert q is not None and q["final_mu"] == pytest.approx(0.7) and q["steps"] == 1
    assert q["pearson"] == pytest.approx(np.corrcoef([0.5, 0.25, 0.125, 0.2], [0.5, 0.25, 0.0, 0.0])[0, 1])
    # P(effective) with n=4: 0.875, 0.68 for the effective tasks 0, 1 above 0.41, 0.59 for 2, 5.
    assert q["auc"] == pytest.approx(1.0)
    none = [
        {"kind": "config", "config": {"rollouts": n}},
        {"kind": "train", "step": 1, "task_ids": [0], "successes": [1], "capability": None},
    ]
    assert evidence_quality(RunCurves("random", none), weak, strong) is None
    table = evidence_markdown({"bots": [RunCurves("bots", recs)], "random": [RunCurves("random", none)]}, weak, strong)
    assert table is not None and "| bots | " in table and "| 1.00 ± 0.00 | 0.70 ± 0.00 | 1 |" in table
    assert "random" not in table


def test_rows_against_random_by_hand() -> None:
    rows = comparison_rows([run("bots", [0.0, 0.4, 0.4]), run("random", [0.0, 0.2, 0.4])])
    assert [r.label for r in rows] == ["random", "bots"]
    bots = rows[1]
    # Random reaches 50% of its gain (0.2) at step 2 and 100% (0.4) at step 4; BOTS at 1 and 2.
    assert bots.ttb[0] == pytest.approx(0.5) and bots.ttb[2] == pytest.approx(0.5)
    assert bots.bsf[1] == pytest.approx(2.0)  # best within 2 steps: 0.4 vs 0.2
    assert bots.rollouts == pytest.approx(1.0) and bots.final == pytest.approx(0.4)
    assert "| bots |" in timing_markdown([run("bots", [0.0, 0.1])])


def test_rows_per_rollout_charge_dynamic_sampling_for_its_rollouts() -> None:
    """Dynamic sampling with the same accuracy per step as BOTS but 3x the rollouts a step: the
    same TTB per step, 3x it per rollout spent; logs without ``cum_rollouts`` in their eval
    records get the rollouts summed from the train records, logs with it use it."""
    bots, dyn = run("bots", [0.0, 0.4, 0.4]), run("dynamic", [0.0, 0.4, 0.4], rollouts=24)
    assert dyn.eval_rollouts.tolist() == [0.0, 48.0, 96.0]
    rows = {r.label: r for r in comparison_rows([bots, dyn, run("random", [0.0, 0.2, 0.4])])}
    assert rows["dynamic"].ttb == pytest.approx(rows["bots"].ttb)
    assert rows["bots"].ttb_rollouts == pytest.approx(rows["bots"].ttb)
    assert rows["dynamic"].ttb_rollouts == pytest.approx([3 * v for v in rows["bots"].ttb])  # type: ignore[operator]
    assert rows["dynamic"].rollouts == pytest.approx(3.0)
    # Within half of Random's 32 rollouts, dynamic sampling has not reached its step-2 evaluation.
    assert rows["dynamic"].bsf_rollouts[1] == pytest.approx(0.0 / 0.2) and rows["bots"].bsf_rollouts[
        1
    ] == pytest.approx(2.0)
    logged = RunCurves(
        "x",
        [
            {"kind": "eval", "step": 0, "accuracy": 0.0, "cum_rollouts": 0},
            {"kind": "eval", "step": 5, "accuracy": 0.1, "cum_rollouts": 123},
        ],
    )
    assert logged.eval_rollouts.tolist() == [0.0, 123.0]


def test_budget_table_holds_every_method_to_randoms_rollouts() -> None:
    """Random spends 8 rollouts a step (evals after 0, 16, 32); dynamic sampling 24 a step reaches
    Random's 32 rollouts before its second evaluation, so only its step-0 accuracy counts."""
    randoms = [run("random", [0.0, 0.2, 0.4]), run("random", [0.0, 0.3, 0.2])]
    dyn = [run("dynamic", [0.1, 0.9, 0.9], rollouts=24), run("dynamic", [0.1, 0.8, 0.9], rollouts=24)]
    bots = [run("bots", [0.0, 0.5, 0.6]), run("bots", [0.0, 0.5, 0.4])]
    assert best_within(dyn[0], 32) == pytest.approx(0.1)
    assert best_within(bots[0], 32) == pytest.approx(0.6)
    assert best_within(bots[0], -1) != best_within(bots[0], -1)  # nothing within: NaN
    table = budget_markdown({"random": randoms, "dynamic": dyn, "bots": bots})
    assert "Budget: 32 rollouts (random)." in table
    # random's bests 0.4, 0.3 (mean 0.35); dynamic's 0.1, 0.1: difference -0.25, and the Welch
    # interval has random's variance only: se = sqrt(0.005 / 2) = 0.05, df = 1, t = 12.706.
    assert "| dynamic | 2 | 96 ± 0 | 0.100 ± 0.000 | -0.250 ± 0.635 |" in table
    assert "| random | 2 | 32 ± 0 | 0.350 ± 0.635 | - |" in table
    # bots's bests 0.6, 0.5 against 0.4, 0.3: +0.2, se = sqrt(0.0025 + 0.0025), Welch df = 2 (t = 4.303).
    assert "| bots | 2 | 32 ± 0 | 0.550 ± 0.635 | +0.200 ± 0.304 |" in table


def test_warmup_only_writes_the_warmed_up_model_and_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = toy_config(tmp_path, "sft_steps = 2\nsft_batch_size = 2\n")
    out = tmp_path / "strong"
    argv = ["compare", "--config", str(cfg), "--out", str(out), "--no-progress", "--warmup-only"]
    assert main(argv) == 0
    assert (out / "warmup" / "config.json").exists() and (out / "warmup" / "bots_compare_warmup.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["warmup"]  # no method was trained
    assert main(argv) == 2  # an existing warm-up is refused without --reuse ...
    assert "--reuse" in capsys.readouterr().err
    assert main([*argv, "--reuse"]) == 0  # ... and reused with it
    assert main([*argv[:-1], "--warmup-only", "sft_steps=0", "--out", str(tmp_path / "none")]) == 2
    assert "--warmup-only: needs sft_steps >= 1, got 0" in capsys.readouterr().err


def test_reuse_accepts_runs_recorded_before_a_key_existed() -> None:
    """A run recorded before a config key was added computed what the key's default computes:
    reusing it is allowed while the key keeps its default, and refused (naming the key) when not."""
    from bots_rft.train.compare_reuse import differences as _differences
    from bots_rft.train.config import TrainConfig

    now = TrainConfig(pool="p.parquet").to_dict()
    recorded = {k: v for k, v in now.items() if k not in ("rollout_engine", "lora_r")}
    assert _differences(recorded, now, sorted(now)) == []
    changed = {**now, "lora_r": 8}
    assert _differences(recorded, changed, sorted(now)) == ["lora_r=None then, 8 now"]
    assert _differences({**recorded, "lr": 0.5}, now, ["lr"]) == [f"lr=0.5 then, {now['lr']!r} now"]


def test_sigterm_stops_the_comparison_after_the_run_it_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A signal stops the whole comparison: the run in progress checkpoints, no later run starts,
    and the exit status is 128 + the signal's number, as ``bots train`` gives; ``--reuse`` then
    resumes the interrupted run and trains the rest."""
    import os
    import signal

    from bots_rft.train.trainer import GRPOTrainer

    real_step = GRPOTrainer.train_step
    signalled: list[str] = []

    def step_then_term(self: GRPOTrainer) -> dict[str, object]:
        rec = real_step(self)
        if not signalled:
            signalled.append(self.cfg.method)
            os.kill(os.getpid(), signal.SIGTERM)
        return rec

    monkeypatch.setattr(GRPOTrainer, "train_step", step_then_term)
    cfg = toy_config(tmp_path)
    out = tmp_path / "cmp"
    argv = ["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--no-progress"]
    assert main(argv) == 128 + signal.SIGTERM
    assert signalled == ["bots"]
    assert (out / "bots" / "checkpoints" / "latest").read_text().strip() == "step_000001"
    assert not (out / "random").exists()  # the next method never started
    assert not (out / "summary.md").exists()
    err = capsys.readouterr().err
    assert "bots compare: stopped by SIGTERM" in err and "--reuse" in err
    assert main([*argv, "--reuse"]) == 0
    assert (out / "summary.md").exists() and (out / "random" / "metrics.jsonl").exists()


def test_sigterm_to_a_parallel_comparison_reaches_its_workers(tmp_path: Path) -> None:
    """``kill PID`` of a ``--jobs 2`` comparison: the signal is passed on to both worker processes,
    each run checkpoints, and the command exits with 143 and writes no report."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    cfg = toy_config(tmp_path)
    cfg.write_text(
        cfg.read_text().replace("steps = 2\n", "steps = 400\n").replace("eval_every = 1\n", "eval_every = 0\n")
    )
    out = tmp_path / "cmp"
    bots = Path(sys.executable).with_name("bots")
    cmd = [str(bots)] if bots.exists() else [sys.executable, "-m", "bots_rft.cli"]
    argv = ["compare", "--config", str(cfg), "--methods", "bots,random", "--out", str(out), "--jobs", "2"]
    proc = subprocess.Popen([*cmd, *argv, "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def trained(method: str) -> bool:
        log = out / method / "metrics.jsonl"
        lines = log.read_text().splitlines() if log.exists() else []
        return any(json.loads(line).get("kind") == "train" for line in lines if line.endswith("}"))

    deadline = time.monotonic() + 240
    while not (trained("bots") and trained("random")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 128 + signal.SIGTERM, err
    for method in ("bots", "random"):
        latest = (out / method / "checkpoints" / "latest").read_text().strip()
        assert latest.startswith("step_") and int(latest[5:]) >= 1, latest
        assert f"bots compare: {method} in {out / method}: checkpoint of step {int(latest[5:])}" in err
    assert "stopped by SIGTERM" in err and not (out / "summary.md").exists()
