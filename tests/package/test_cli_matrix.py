"""Every sub-command against bad input: a missing file, a malformed file, an unwritable output,
an output that already exists, a number out of range, an unknown name. Each must end with exit
status 2 and one line on stderr that names the argument, before any work, writing nothing and
changing nothing, with no Python traceback.

The CLI runs in-process (``bots_rft.cli.main``); a few cases run the installed ``bots`` script to
check what a shell sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bots_rft.cli import main
from bots_rft.train.toy import write_toy_pool

# A case: (id, argv, text the message must contain). Paths are relative to the case's work dir,
# which holds the files made by `workdir` below.
DEMO = [
    ("steps 0", ["demo", "--steps", "0"], "argument --steps: must be >= 1, got 0"),
    ("rollouts 1", ["demo", "--rollouts", "1"], "argument --rollouts: must be >= 2"),
    ("tasks negative", ["demo", "--tasks", "-5"], "argument --tasks"),
    ("batch above tasks", ["demo", "--tasks", "10", "--batch", "20"], "--batch: must be at most --tasks (10)"),
    ("steps not a number", ["demo", "--steps", "ten"], "argument --steps: expected an integer, got 'ten'"),
    ("unknown option", ["demo", "--bogus"], "unrecognized arguments: --bogus"),
    ("json unwritable", ["demo", "--json", "afile/out.json"], "--json: cannot create 'afile/out.json'"),
    ("json exists", ["demo", "--json", "old.json"], "--json: 'old.json' already exists; pass --overwrite"),
    ("json is a directory", ["demo", "--json", "full"], "--json: 'full' is a directory"),
]
SIMULATE = [
    ("threads negative", ["simulate", "--threads", "-3"], "argument --threads: must be >= 0, got -3"),
    ("rollouts 1", ["simulate", "--rollouts", "1"], "argument --rollouts: must be >= 2"),
    ("lam above 1", ["simulate", "--lam", "2"], "argument --lam: must lie in [0, 1], got 2"),
    ("sweep out of range", ["simulate", "--rho-sweep", "0,5"], "argument --rho-sweep"),
    ("no seeds", ["simulate", "--seeds", "0"], "argument --seeds: must be >= 1"),
    ("min gap 1", ["simulate", "--min-gap", "1"], "argument --min-gap: must lie in (0, 1)"),
    ("batch above tasks", ["simulate", "--tasks", "100", "--batch", "200"], "--batch: must be at most --tasks (100)"),
    ("unknown method", ["simulate", "--methods", "random,bogus"], "argument --methods: unknown method(s) ['bogus']"),
    (
        "unknown learner key",
        ["simulate", "--tasks", "100", "--batch", "8", "--learner", "nope=1"],
        "--learner: unknown setting 'nope'",
    ),
    ("out unwritable", ["simulate", "--out", "afile/run"], "--out: cannot create 'afile/run'"),
    ("out exists", ["simulate", "--out", "full"], "--out: 'full' already holds 'x'"),
]
DATA = [
    (
        "gym unknown generator",
        ["data", "gym", "--datasets", "nope"],
        "datasets: unknown reasoning-gym generator 'nope'",
    ),
    (
        "gym unknown level",
        ["data", "gym", "--datasets", "basic_arithmetic", "--levels", "99"],
        "levels: generator 'basic_arithmetic' has none of levels [99] (it has levels 0-4)",
    ),
    ("gym level negative", ["data", "gym", "--levels", "0,-1"], "--levels: expected comma-separated integers >= 0"),
    ("gym no generator", ["data", "gym", "--datasets", ","], "--datasets: expected comma-separated generator names"),
    ("gym per-level 0", ["data", "gym", "--per-level", "0"], "argument --per-level: must be >= 1"),
    ("gym eval fraction 1", ["data", "gym", "--eval-fraction", "1"], "argument --eval-fraction: must lie in [0, 1)"),
    ("gym out exists", ["data", "gym", "--out", "pool"], "--out: 'pool' already holds 'train.parquet', 'eval.parquet'"),
    ("gym out unwritable", ["data", "gym", "--out", "afile/gym"], "--out: cannot create 'afile/gym'"),
    ("humaneval limit 0", ["data", "humaneval", "--limit", "0"], "argument --limit: must be >= 1"),
    ("humaneval out exists", ["data", "humaneval", "--out", "pool"], "--out: 'pool' already holds"),
    ("codeio limit 0", ["data", "codeio", "--limit", "0"], "argument --limit: must be >= 1"),
    ("codeio out exists", ["data", "codeio", "--out", "pool"], "--out: 'pool' already holds"),
    (
        "codeio eval fraction 1",
        ["data", "codeio", "--eval-fraction", "1"],
        "argument --eval-fraction: must lie in [0, 1)",
    ),
    ("arc unknown version", ["data", "arc", "--version", "3"], "argument --version: invalid choice: '3'"),
    ("arc out exists", ["data", "arc", "--out", "pool"], "--out: 'pool' already holds"),
    ("toy tasks 0", ["data", "toy", "--tasks", "0"], "argument --tasks: must be >= 1"),
    ("toy out exists", ["data", "toy", "--out", "pool"], "--out: 'pool' already holds"),
    ("toy out unwritable", ["data", "toy", "--out", "afile/toy"], "--out: cannot create 'afile/toy'"),
    ("unknown builder", ["data", "nope"], "argument POOL: invalid choice: 'nope'"),
    ("info missing", ["data", "info", "nope.parquet"], "pool: 'nope.parquet' does not exist"),
    ("info garbage parquet", ["data", "info", "garbage.parquet"], "garbage.parquet"),
    ("info json array", ["data", "info", "array.jsonl"], "array.jsonl: line 1 is a JSON list, not an object"),
    ("info missing columns", ["data", "info", "columns.jsonl"], "columns.jsonl"),
    (
        "info missing config",
        ["data", "info", "pool/train.parquet", "--config", "nope.yaml"],
        "--config: 'nope.yaml' does not exist",
    ),
]
REFEVAL = [
    (
        "unknown engine",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "c", "--engine", "vllm"],
        "argument --engine: invalid choice: 'vllm'",
    ),
    (
        "pool missing",
        ["refeval", "--model", "tiny", "--pool", "nope.parquet", "--column", "c_pass_rate"],
        "--pool: 'nope.parquet' does not exist",
    ),
    (
        "pool garbage",
        ["refeval", "--model", "tiny", "--pool", "garbage.parquet", "--column", "c_pass_rate"],
        "garbage.parquet",
    ),
    (
        "model unknown",
        ["refeval", "--model", "nosuch", "--pool", "pool/train.parquet", "--column", "c_pass_rate"],
        "model: 'nosuch' is neither",
    ),
    (
        "device unknown",
        ["refeval", "--model", "tiny", "--device", "bogus", "--pool", "pool/train.parquet", "--column", "c_pass_rate"],
        "device: not a torch device: 'bogus'",
    ),
    (
        "dtype unknown",
        ["refeval", "--model", "tiny", "--dtype", "int3", "--pool", "pool/train.parquet", "--column", "c_pass_rate"],
        "dtype: expected one of",
    ),
    (
        "column is the pool's own",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "prompt"],
        "column: 'prompt' is one of the pool's own columns",
    ),
    (
        "rollouts 0",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "c", "--rollouts", "0"],
        "argument --rollouts: must be >= 1",
    ),
    (
        "top-p 0",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "c", "--top-p", "0"],
        "argument --top-p: must lie in (0, 1]",
    ),
    (
        "out exists",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "c", "--out", "old.json"],
        "--out: 'old.json' already exists",
    ),
    (
        "out unwritable",
        ["refeval", "--model", "tiny", "--pool", "pool/train.parquet", "--column", "c", "--out", "afile/p.parquet"],
        "--out: cannot create 'afile/p.parquet'",
    ),
]
TRAIN = [
    ("config missing", ["train", "--config", "nope.yaml"], "config: file 'nope.yaml' does not exist"),
    ("config malformed", ["train", "--config", "broken.yaml"], "config: cannot parse 'broken.yaml'"),
    ("pool missing", ["train", "--config", "toy.yaml", "pool=nope.parquet"], "pool file 'nope.parquet' does not exist"),
    ("pool garbage", ["train", "--config", "toy.yaml", "pool=garbage.parquet"], "garbage.parquet"),
    ("steps 0", ["train", "--config", "toy.yaml", "steps=0"], "steps: must be an integer >= 1, got 0"),
    (
        "rollouts 1",
        ["train", "--config", "toy.yaml", "rollouts=1"],
        "rollouts: GRPO needs at least 2 rollouts per task, got 1",
    ),
    ("unknown method", ["train", "--config", "toy.yaml", "method=greedy"], "method: expected one of"),
    ("unknown dtype", ["train", "--config", "toy.yaml", "dtype=float65"], "dtype: expected 'auto' or one of"),
    ("unknown key", ["train", "--config", "toy.yaml", "bogus=1"], "unknown key(s) ['bogus']"),
    ("out unwritable", ["train", "--config", "toy.yaml", "--out", "afile/run"], "out_dir: cannot create 'afile/run'"),
    (
        "out holds a run",
        ["train", "--config", "toy.yaml", "--out", "oldcmp/bots"],
        "out_dir: 'oldcmp/bots' already holds a training run",
    ),
]
COMPARE = [
    ("config missing", ["compare", "--config", "nope.yaml"], "--config: 'nope.yaml' does not exist"),
    ("config malformed", ["compare", "--config", "broken.yaml"], "config: cannot parse 'broken.yaml'"),
    (
        "unknown method",
        ["compare", "--config", "toy.yaml", "--methods", "bots,nope"],
        "--methods: expected two or more of",
    ),
    (
        "seeds negative",
        ["compare", "--config", "toy.yaml", "--seeds", "-1"],
        "--seeds: expected distinct non-negative integers",
    ),
    (
        "rollouts 1",
        ["compare", "--config", "toy.yaml", "rollouts=1", "--out", "cmp"],
        "rollouts: GRPO needs at least 2",
    ),
    ("out unwritable", ["compare", "--config", "toy.yaml", "--out", "afile/cmp"], "--out: cannot create 'afile/cmp'"),
    (
        "out holds a run",
        ["compare", "--config", "toy.yaml", "--out", "oldcmp"],
        "--out: 'oldcmp/bots' already holds a run; pass --reuse",
    ),
    (
        "report-only on empty dir",
        ["compare", "--config", "toy.yaml", "--out", "empty", "--report-only"],
        "--report-only: no run log (metrics.jsonl) in 'empty/bots', 'empty/random'",
    ),
    (
        "out and out_dir disagree",
        ["compare", "--config", "toy.yaml", "--out", "a", "out_dir=b"],
        "--out: 'a' and out_dir='b' disagree",
    ),
]
SCOREBOARD = [
    ("no out", ["scoreboard", "--quick"], "the following arguments are required: --out"),
    ("one seed", ["scoreboard", "--out", "sb", "--seeds", "1"], "argument --seeds: must be >= 2, got 1"),
    ("seeds not a number", ["scoreboard", "--out", "sb", "--seeds", "many"], "argument --seeds: expected an integer"),
    ("out exists", ["scoreboard", "--out", "full", "--quick"], "--out: 'full' already holds 'x'"),
    ("out is a file", ["scoreboard", "--out", "afile", "--quick"], "--out: 'afile' exists and is not a directory"),
    ("unknown option", ["scoreboard", "--out", "sb", "--fast"], "unrecognized arguments: --fast"),
]
OTHER = [
    ("unknown command", ["nope"], "argument COMMAND: invalid choice: 'nope'"),
]
CASES = [
    (f"{argv[0]}: {name}", argv, text)
    for name, argv, text in DEMO + SIMULATE + SCOREBOARD + DATA + REFEVAL + TRAIN + COMPARE + OTHER
]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A work dir with the files the cases refer to; the cases run inside it."""
    write_toy_pool(tmp_path / "pool", num_tasks=8, eval_tasks=2)
    (tmp_path / "afile").write_text("a file where a directory is expected\n")
    (tmp_path / "old.json").write_text("[]\n")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "oldcmp" / "bots").mkdir(parents=True)
    (tmp_path / "oldcmp" / "bots" / "metrics.jsonl").write_text("")
    (tmp_path / "garbage.parquet").write_bytes(b"PAR1 this is not parquet" * 10)
    (tmp_path / "array.jsonl").write_text('[{"prompt": "a"}, {"prompt": "b"}]\n')
    (tmp_path / "columns.jsonl").write_text('{"question": "a"}\n')
    (tmp_path / "broken.yaml").write_text("steps: [1, 2\nmodel: tiny\n")
    (tmp_path / "toy.yaml").write_text(
        "pool: pool/train.parquet\nmodel: tiny\ndevice: cpu\nsteps: 1\nbatch_size: 2\nrollouts: 2\n"
        "verifiers: {toy: 'bots_rft.train.toy:toy_reward'}\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("argv,text", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_up_front(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], text: str
) -> None:
    before = snapshot(workdir)
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err + out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("bots"), lines[0]
    assert text in lines[0], lines[0]
    assert snapshot(workdir) == before  # nothing written, nothing changed


def test_help_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"bots-rft {__version__}"
    assert main(["demo", "--help"]) == 0
    assert "--rollouts" in capsys.readouterr().out


def test_data_info_names_each_verifier_and_fails_without_one(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft.data import TaskPool
    from bots_rft.train.toy import toy_rows

    # A data source no other test registers a verifier for (the registry is per process).
    rows = toy_rows(6)
    for r in rows[:4]:
        r["data_source"] = "cli_matrix_unscored/x"
    TaskPool.from_records(rows).to_parquet(workdir / "mixed.parquet")
    (workdir / "scored.yaml").write_text(
        "pool: mixed.parquet\nverifiers: {cli_matrix_unscored: 'bots_rft.train.toy:toy_reward'}\n"
    )
    assert main(["data", "info", "mixed.parquet"]) == 1
    out = capsys.readouterr().out
    assert "6 tasks, NOT trainable as is: 4 have no verifier (data source 'cli_matrix_unscored/x')" in out
    assert "NO VERIFIER" in out
    assert main(["data", "info", "mixed.parquet", "--config", "scored.yaml"]) == 0
    out = capsys.readouterr().out
    assert "6 tasks, valid (every task has a verifier)" in out and "bots_rft.train.toy.toy_reward" in out


def test_data_toy_then_overwrite(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "toy", "--out", "t", "--tasks", "5", "--eval-tasks", "2"]) == 0
    assert "t/train.parquet: 5 tasks" in capsys.readouterr().out
    assert main(["data", "toy", "--out", "t"]) == 2
    assert main(["data", "toy", "--out", "t", "--tasks", "3", "--overwrite"]) == 0
    assert "t/train.parquet: 3 tasks" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,text",
    [
        (["demo", "--steps", "0"], "bots demo: error: argument --steps: must be >= 1, got 0"),
        (["data", "info", "array.jsonl"], "bots data: error: array.jsonl: line 1 is a JSON list"),
        (["simulate", "--out", "afile/x"], "bots simulate: error: --out: cannot create 'afile/x'"),
    ],
)
def test_what_a_shell_sees(workdir: Path, argv: list[str], text: str) -> None:
    bots = Path(sys.executable).with_name("bots")
    cmd = [str(bots)] if bots.exists() else [sys.executable, "-m", "bots_rft.cli"]
    res = subprocess.run(
        [*cmd, *argv], capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"}
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines() == [res.stderr.strip()] and text in res.stderr
