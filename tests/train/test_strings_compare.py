"""The procedural string pool, held-out accuracy as avg@k, the warm-up's reference checkpoints,
the paired table, and the one-command comparison (``bots compare --config
configs/strings_compare_cpu.yaml``) at its smoke size."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from bots_rft.cli import main
from bots_rft.data import TaskPool
from bots_rft.data.strings import build_string_pool, string_rows
from bots_rft.errors import InvalidArgumentError
from bots_rft.rewards.registry import get_verifier
from bots_rft.rewards.strings import verify_first_line

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_string_rows_are_seeded_distinct_and_graded_by_length() -> None:
    rows = string_rows(500, seed=3, min_length=2, max_length=6, ops={"reverse": 1.0, "copy": 1.0})
    again = string_rows(500, seed=3, min_length=2, max_length=6, ops={"reverse": 1.0, "copy": 1.0})
    assert rows == again
    questions = [r["prompt"][0]["content"] for r in rows]
    assert len(set(questions)) == 500
    for r, q in zip(rows, questions):
        op, word = q.split(" ")
        assert 2 <= len(word) <= 6 and word.isalpha() and word.islower()
        assert r["reward_model"]["ground_truth"] == (word[::-1] if op == "reverse" else word)
        assert r["data_source"] == f"strings/{op}_l{len(word)}"
        assert r["extra_info"] == {"index": r["extra_info"]["index"], "split": "train", "op": op, "length": len(word)}
    assert {r["extra_info"]["op"] for r in rows} == {"reverse", "copy"}
    assert string_rows(50, seed=4, max_length=6) != rows[:50]


def test_pool_splits_hold_different_questions(tmp_path: Path) -> None:
    train, held = build_string_pool(tmp_path, tasks=300, eval_tasks=40, seed=1, max_length=8)
    a, b = TaskPool.load(train), TaskPool.load(held)
    assert (len(a), len(b)) == (300, 40)
    qa = {m[0]["content"] for m in a.prompts()}
    qb = {m[0]["content"] for m in b.prompts()}
    assert not qa & qb
    assert list(b.ids) == list(range(40))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"tasks": 0}, "tasks"),
        ({"tasks": 10, "min_length": 0}, "min_length"),
        ({"tasks": 10, "min_length": 5, "max_length": 4}, "max_length"),
        ({"tasks": 10, "ops": {"shuffle": 1.0}}, "ops"),
        ({"tasks": 10, "ops": {"reverse": -1.0}}, "ops"),
        ({"tasks": 10, "ops": {}}, "ops"),
        ({"tasks": 400, "min_length": 2, "max_length": 2, "ops": {"reverse": 1.0}}, "tasks"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        string_rows(**kwargs)  # type: ignore[arg-type]
    assert err.value.argument == name
    assert str(err.value).startswith(f"{name}: ")


def test_cli_refuses_bad_arguments_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p"
    for argv, message in (
        (["--ops", "shuffle"], "ops: expected non-negative weights of ['copy', 'reverse']"),
        (["--min-length", "5", "--max-length", "3"], "max_length: expected min_length <= max_length <= 64"),
        (["--tasks", "5000", "--max-length", "2"], "--tasks: at most 0 with words of 2-2 letters and --eval-tasks 600"),
    ):
        assert main(["data", "strings", "--out", str(out), *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
    assert main(["data", "strings", "--out", str(out), "--tasks", "20", "--eval-tasks", "4"]) == 0
    assert len(TaskPool.load(out / "train.parquet")) == 20


def test_verifier_reads_the_first_line_only() -> None:
    assert get_verifier("strings/reverse_l4") is verify_first_line
    assert verify_first_line("strings/reverse_l4", "  tzqk \n", "tzqk") == 1.0
    assert verify_first_line("strings/reverse_l4", "tzqk\nmore text", "tzqk") == 1.0
    assert verify_first_line("strings/reverse_l4", "tzq k", "tzqk") == 0.0
    assert verify_first_line("strings/reverse_l4", "tzqkk", "tzqk") == 0.0
    assert verify_first_line("strings/reverse_l4", "", "tzqk") == 0.0


torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _cfg(tmp_path: Path, **extra: object):  # type: ignore[no-untyped-def]
    from bots_rft.train.config import load_config

    train, _ = build_string_pool(tmp_path / "pool", tasks=60, eval_tasks=8, max_length=5)
    base: dict[str, object] = dict(
        pool=str(train),
        model="tiny-64x1",
        device="cpu",
        system_prompt="",
        sft_template="{answer}",
        sft_batch_size=4,
        progress=False,
        tensorboard=False,
        reward_workers=0,
        out_dir=str(tmp_path / "run"),
    )
    return load_config(None, {**base, **extra})


def test_warmup_snapshots_equal_shorter_warmups(tmp_path: Path) -> None:
    """The model saved after k steps of a longer warm-up is the k-step warm-up, bit for bit
    (the references and the policy come from one stream)."""
    from bots_rft.train.policy import load_policy
    from bots_rft.train.sft import sft_warmup

    def warm(steps: int) -> torch.nn.Module:
        cfg = _cfg(tmp_path, sft_steps=steps)
        model, tok = load_policy(cfg.model, "cpu", cfg.dtype, cfg.seed)
        pool = TaskPool.load(cfg.pool)
        sft_warmup(model, tok, pool, pool.prompts(system_prompt=""), cfg.sft, torch.device("cpu"))
        return model

    seen: dict[int, dict[str, torch.Tensor]] = {}
    cfg = _cfg(tmp_path, sft_steps=6)
    model, tok = load_policy(cfg.model, "cpu", cfg.dtype, cfg.seed)

    def grab(k: int) -> Callable[[], None]:
        return lambda: seen.__setitem__(k, {n: p.detach().clone() for n, p in model.named_parameters()})

    pool = TaskPool.load(cfg.pool)
    sft_warmup(
        model,
        tok,
        pool,
        pool.prompts(system_prompt=""),
        cfg.sft,
        torch.device("cpu"),
        snapshots={2: grab(2), 6: grab(6)},
    )
    for k in (2, 6):
        short = warm(k)
        for name, p in short.named_parameters():
            assert torch.equal(p.detach(), seen[k][name]), (k, name)


def test_sampled_evaluation_is_seeded_and_leaves_the_training_stream_alone(tmp_path: Path) -> None:
    from bots_rft.train.trainer import GRPOTrainer

    trainer = GRPOTrainer(_cfg(tmp_path, eval_samples=3, eval_limit=8, max_new_tokens=6))
    try:
        before = torch.random.get_rng_state()
        first = trainer.evaluate()
        assert torch.equal(before, torch.random.get_rng_state())
        again = trainer.evaluate()
        assert first is not None and again is not None
        assert first["accuracy"] == again["accuracy"]  # same step, same seed: the same samples
        assert first["tasks"] == 8
        # avg@3: every task's score is a multiple of 1/3
        scores = np.asarray(list(first["by_source"].values()))
        assert np.all((scores >= 0) & (scores <= 1))
    finally:
        trainer.close()


def _run(label: str, seed: int, accs: list[float], rollouts: int = 8, step_s: float = 1.0):  # type: ignore[no-untyped-def]
    from bots_rft.report.training import RunCurves

    recs: list[dict[str, object]] = [{"kind": "config", "config": {"batch_size": 2, "rollouts": 4, "seed": seed}}]
    recs += [{"kind": "eval", "step": 2 * i, "accuracy": a} for i, a in enumerate(accs)]
    recs += [{"kind": "train", "step": s, "rollouts": rollouts, "step_s": step_s} for s in (1, 2, 3, 4)]
    return RunCurves(label, recs)


def test_paired_table_by_hand() -> None:
    """Seed by seed: bots − random. Finals 0.5−0.4 and 0.6−0.3 (mean +0.2, paired sd 0.1414,
    half-width 12.706·0.1414/√2 = 1.271); at Random's 32 rollouts a method spending 12 a step
    has only its step-2 evaluation (after 24), and at Random's 4 s of training a method twice
    as slow has its step-2 evaluation (after 4 s)."""
    from bots_rft.report.training import paired_markdown

    groups = {
        "random": [_run("random", 0, [0.0, 0.2, 0.4]), _run("random", 1, [0.0, 0.1, 0.3])],
        "bots": [_run("bots", 1, [0.0, 0.4, 0.6]), _run("bots", 0, [0.0, 0.3, 0.5])],
        "dynamic": [_run("dynamic", 0, [0.0, 0.7, 0.9], rollouts=12), _run("dynamic", 1, [0.0, 0.5, 0.8], rollouts=12)],
        "slow": [_run("slow", 0, [0.0, 0.5, 0.5], step_s=2.0), _run("slow", 1, [0.0, 0.4, 0.4], step_s=2.0)],
    }
    table = paired_markdown(groups)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table.splitlines()[2:]}
    assert rows["bots"][:2] == ["2", "+0.200 ± 1.271"]
    # mean over evaluations: seed 0 bots 0.267 vs random 0.2, seed 1 0.333 vs 0.133: +0.067 and
    # +0.2, mean +0.133, sd 0.0943, half-width 12.706 * 0.0943 / sqrt(2) = 0.847
    assert rows["bots"][2] == "+0.133 ± 0.847"
    # dynamic at random's 32 rollouts: its step-2 evaluation (0.7, 0.5) minus random's final (0.4, 0.3)
    assert rows["dynamic"][3] == "+0.250 ± 0.635"
    # slow at random's 4 s: its step-2 evaluation (0.5, 0.4) minus random's final (0.4, 0.3), no spread
    assert rows["slow"][4] == "+0.100 ± 0.000 *"


def test_compare_section_errors_name_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = (ROOT / "configs" / "strings_compare_cpu.yaml").read_text(encoding="utf-8")
    cases = (
        (base.replace("jobs: 2 ", "jobs: 0 "), "compare.jobs: must be an integer >= 1, got 0"),
        (
            base.replace("weak_sft_steps: 600", "weak_sft_steps: 1300"),
            "compare.references.weak_sft_steps: expected fewer",
        ),
        (base.replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 0]"), "compare.seeds: expected distinct non-negative"),
        (base.replace("    seed: 0\n", "    seed: 0\n    colour: red\n", 1), "compare.pool: unknown key(s) ['colour']"),
        (base + "pool: elsewhere.parquet\n", "pool: compare.pool builds the training pool; give one of them"),
    )
    for i, (text, message) in enumerate(cases):
        assert text != base  # each case changes the documented config
        cfg = tmp_path / f"c{i}.yaml"
        cfg.write_text(text, encoding="utf-8")
        out = tmp_path / f"out{i}"
        assert main(["compare", "--config", str(cfg), "--out", str(out), "--smoke"]) == 2, message
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
        assert not out.exists()


@pytest.mark.parametrize(
    ("config", "methods", "saw"),
    [
        (
            "strings_compare_cpu.yaml",
            ("random", "bots", "mopps", "dynamic", "speed", "greso", "dps", "adarft"),
            "bots, dps, adarft: the reference pass rates (weak_sft10_pass_rate, strong_sft40_pass_rate); "
            "random, mopps, dynamic, speed, greso: no reference pass rates, only their own rollouts.",
        ),
        (
            "strings_compare_cpu_wide.yaml",
            ("random", "bots", "mopps"),
            "bots: the reference pass rates (weak_sft10_pass_rate, strong_sft40_pass_rate); "
            "random, mopps: no reference pass rates, only their own rollouts.",
        ),
    ],
)
def test_the_documented_comparison_runs_at_smoke_size(
    config: str,
    methods: tuple[str, ...],
    saw: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The command docs/training.md shows, with --smoke: builds the pool, one warm-up stream
    with both references, measures them, trains every method over two seeds side by side, and
    reports; a second run with --reuse trains nothing."""
    guide = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    command = next(
        line.strip()
        for line in guide.splitlines()
        if line.strip().startswith(f"bots compare --config configs/{config}")
    )
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / config).write_bytes((ROOT / "configs" / config).read_bytes())
    monkeypatch.chdir(tmp_path)
    argv = [*shlex.split(command)[1:], "--smoke", "--no-progress"]
    assert main(argv) == 0
    out = tmp_path / argv[argv.index("--out") + 1]
    text = (out / "summary.md").read_text(encoding="utf-8")
    for m in methods:
        assert f"| {m} | 2 |" in text
        for seed in (0, 1):
            assert (out / m / f"seed{seed}" / "metrics.jsonl").exists()
    assert "Paired by seed" in text and "Held-out accuracy: mean of 2 samples at temperature 1" in text
    assert f"What each method saw besides its rollouts: {saw}" in text
    assert (out / "held_out.png").stat().st_size > 1000
    pool = TaskPool.load(out / "pool" / "train.parquet")
    assert len(pool) == 120
    for col in ("weak_sft10_pass_rate", "strong_sft40_pass_rate"):
        rates = pool.pass_rate(col)
        assert np.all((rates >= 0) & (rates <= 1))
    assert (out / "references" / "sft10" / "config.json").exists()
    record = json.loads((out / "warmup" / "bots_compare_warmup.json").read_text())
    assert record["sft_steps"] == 20 and record["references"] == [10, 40]
    capsys.readouterr()
    assert main([*argv, "--reuse"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("finished run") == 2 * len(methods) and "training with" not in printed


def test_the_documented_pool_command_builds_the_pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guide = (ROOT / "docs" / "pools.md").read_text(encoding="utf-8")
    command = next(line.strip() for line in guide.splitlines() if line.strip().startswith("bots data strings"))
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0
    pool = TaskPool.load(tmp_path / "pools" / "strings" / "train.parquet")
    assert len(pool) == 6000 and len(TaskPool.load(tmp_path / "pools" / "strings" / "eval.parquet")) == 600
    lengths = {int(s.rsplit("_l", 1)[1]) for s in pool.data_sources(range(len(pool)))}
    assert lengths == set(range(2, 17))
