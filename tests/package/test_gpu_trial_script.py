"""The SmolLM2 GPU trial's recipe (examples/gpu/trial_smollm2.sh) and its configs: what a CPU can
check. The script parses and refuses a bad subcommand; its ``--smoke`` path (``prepare`` then
``run``: the pool, both reference columns, the pack, ``bots compare`` and the outcome line) runs
end to end on the CPU; the configs load and hold the numbers the trial states; the commands in the
trial config's header parse and measure the references as the policy samples. The GPU run
itself has not been made."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "gpu" / "trial_smollm2.sh"
TRIAL = ROOT / "configs" / "trial_smollm2_gpu.yaml"
POOL_SPEC = ROOT / "configs" / "pool_smollm2_trial.yaml"
USAGE = "usage: bash examples/gpu/trial_smollm2.sh {prepare|run} [--smoke] [ARGS...]"


def _env(**extra: str) -> dict[str, str]:
    """This interpreter's environment first on PATH (``bots``, ``python3``), offline."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHON": sys.executable,
        "HF_HUB_OFFLINE": "1",
        "MPLBACKEND": "Agg",
        **extra,
    }


def _script(*args: str, timeout: float = 30, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_script_parses_and_says_it_has_not_run_on_a_gpu() -> None:
    done = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = SCRIPT.read_text(encoding="utf-8")
    assert "NOT YET RUN ON A GPU" in text and "set -euo pipefail" in text
    assert "NOT YET RUN ON A GPU" in TRIAL.read_text(encoding="utf-8")
    readme = (ROOT / "examples" / "gpu" / "README.md").read_text(encoding="utf-8")
    assert "| `trial_smollm2.sh` |" in readme and "NOT YET RUN ON A GPU" in readme


@pytest.mark.parametrize("args", [[], ["bogus"], ["--smoke"], ["Run"]])
def test_bad_subcommand_exits_2_with_one_usage_line(args: list[str]) -> None:
    done = _script(*args)
    assert done.returncode == 2
    assert done.stderr == USAGE + "\n" and done.stdout == ""


def test_run_without_a_prepared_pool_exits_2_naming_it(tmp_path: Path) -> None:
    done = _script("run", POOL=str(tmp_path / "nothing"), OUT=str(tmp_path / "out"))
    assert done.returncode == 2
    assert "has no column smollm2_base_pass_rate: run 'prepare' first" in done.stderr
    assert not (tmp_path / "out").exists()


def test_smoke_prepare_then_run_end_to_end(tmp_path: Path) -> None:
    """``prepare --smoke`` then ``run --smoke``: a tiny pool with both reference columns and its
    pack, then the comparison (2 methods x the first 2 seeds, avg@2 and greedy at steps 0 and 2)
    with the outcome line printed last."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("reasoning_gym")
    import pyarrow.parquet as pq

    from bots_rft.report.trial import read_held_out_csv

    out = tmp_path / "out"
    prepared = _script("prepare", "--smoke", timeout=600, OUT=str(out))
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    smoke = out / "trial_smollm2_smoke"
    pool = smoke / "pool"
    names = pq.read_schema(pool / "train.parquet").names
    assert {"smollm2_base_pass_rate", "smollm2_sft100_pass_rate"} <= set(names)
    assert (pool / "eval.parquet").exists() and "smollm2_sft100_pass_rate" in (pool / "pass_rates.md").read_text()
    with tarfile.open(smoke / "pool.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["pool/eval.parquet", "pool/train.parquet"]
    assert f"packed {smoke / 'pool.tar.gz'}" in prepared.stdout

    ran = _script("run", "--smoke", timeout=600, OUT=str(out))
    assert ran.returncode == 0, ran.stderr[-3000:]
    compare = smoke / "compare"
    rows = read_held_out_csv(compare / "held_out.csv")
    assert (compare / "held_out.csv").read_text().splitlines()[0] == "method,seed,step,rollouts,avg_at_2,greedy"
    assert {(r["method"], r["seed"], r["step"]) for r in rows} == {
        (m, s, step) for m in ("random", "bots") for s in (100, 101) for step in (0, 2)
    }
    last = ran.stdout.strip().splitlines()[-1]
    assert last.startswith("(smoke run, not a result) Outcome under the rule (avg@2 over the run, the primary metric)")
    assert last in (compare / "summary.md").read_text(encoding="utf-8")


def test_trial_config_holds_the_stated_numbers() -> None:
    from bots_rft.train.comparison import SECTION, read_compare_section
    from bots_rft.train.config import load_config

    cfg = load_config(TRIAL, skip_sections=(SECTION,))
    spec = read_compare_section(TRIAL)
    assert spec.methods == ("random", "bots")
    assert spec.seeds == tuple(range(100, 116))
    assert 2 <= spec.jobs <= 16  # runs side by side, one CPU core each on a 16-core GPU machine
    assert spec.pool is None and spec.references is None  # both prepared beforehand, on a CPU
    assert spec.decision is not None
    assert (spec.decision.method, spec.decision.baseline, spec.decision.control) == ("bots", "random", None)
    assert spec.decision.refute_within == 0.005
    assert (cfg.model, cfg.device, cfg.bf16, cfg.sft_steps) == ("smollm2", "cuda", True, 0)
    assert (cfg.steps, cfg.batch_size, cfg.rollouts) == (30, 16, 8)
    assert (cfg.eval_every, cfg.eval_samples, cfg.eval_greedy, cfg.eval_limit) == (10, 4, True, None)
    assert cfg.pool == "runs/pools/smollm2_trial/train.parquet"
    assert (cfg.weak_column, cfg.strong_column) == ("smollm2_base_pass_rate", "smollm2_sft100_pass_rate")
    assert cfg.threads == 1 and cfg.save_every and cfg.steps % cfg.save_every == 0
    header = TRIAL.read_text(encoding="utf-8").split("\ncompare:")[0]
    for said in ("NOT YET RUN ON A GPU", "fixed before any run", "Decision rule", "refuted at this scale"):
        assert said in header, said


def _header_commands() -> list[str]:
    """The ``bots ...`` commands in the trial config's header (``\\`` continuations joined)."""
    header = TRIAL.read_text(encoding="utf-8").split("\ncompare:")[0]
    text = re.sub(r"\\\n#\s*", "", header)
    return [m.group(1).strip() for m in re.finditer(r"^#\s+(bots .*)$", text, flags=re.M)]


def test_trial_header_commands_parse_and_measure_as_the_policy_samples() -> None:
    """The header's commands are what ``prepare`` runs: they parse, build the trial's pool, and
    measure both references with the config's temperature and token limit."""
    from bots_rft.cli import build_parser
    from bots_rft.train.config import load_config

    cfg = load_config(TRIAL, skip_sections=("compare",))
    commands = _header_commands()
    assert [c.split()[1] for c in commands] == ["data", "refeval", "compare", "refeval"]
    parser = build_parser()
    parsed = [parser.parse_args(shlex.split(c)[1:]) for c in commands]
    assert parsed[0].config == "configs/pool_smollm2_trial.yaml" and parsed[0].out == str(Path(cfg.pool).parent)
    refevals = [a for a in parsed if a.command == "refeval"]
    assert [a.column for a in refevals] == [cfg.weak_column, cfg.strong_column]
    for a in refevals:
        assert (a.pool, a.max_new_tokens, a.temperature, a.rollouts) == (
            cfg.pool,
            cfg.max_new_tokens,
            cfg.temperature,
            8,
        )
    assert refevals[1].model == f"{parsed[2].out}/warmup" and "sft_steps=100" in parsed[2].overrides
    script = SCRIPT.read_text(encoding="utf-8")
    assert "ROLLOUTS=8 NEW_TOKENS=32" in script and "--temperature 0.7" in script
    assert "STRONG_RUN=runs/real/smollm2_trial_strong" in script and "SFT_STEPS=100" in script


def test_trial_pool_has_the_stated_sizes(tmp_path: Path) -> None:
    """The pool spec: the GPU spread spec's families, built to at least 1,000 training and 250
    held-out tasks (1,173 and 296, as the config's header says)."""
    pytest.importorskip("reasoning_gym")
    from bots_rft.data import TaskPool
    from bots_rft.data.spread import build_spread_pool, load_spread_spec

    spec = load_spread_spec(POOL_SPEC)
    gpu = load_spread_spec(ROOT / "configs" / "pool_smollm2_spread_gpu.yaml")
    assert spec.families == gpu.families
    assert (spec.system_prompt, spec.answer_mode, spec.format_weight) == (
        gpu.system_prompt,
        gpu.answer_mode,
        gpu.format_weight,
    )
    build_spread_pool(spec, tmp_path)
    train, held_out = TaskPool.load(tmp_path / "train.parquet"), TaskPool.load(tmp_path / "eval.parquet")
    assert (len(train), len(held_out)) == (1173, 296)
    assert "1,173 training and 296 held-out tasks" in TRIAL.read_text(encoding="utf-8")
