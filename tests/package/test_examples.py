"""Every example runs: each file under examples/ that is a program takes ``--smoke``, and each
``--smoke`` command the docs show is run here exactly as written (``python`` is this interpreter),
as is every ``python -m bots_rft.integrations.<module>`` command the docs show in a code block
(the environment check and the trainers' pre-flight checks: none needs a GPU)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from doc_commands import fenced_lines

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
#: What each example (or module) prints when its run did its job (beyond exiting with 0).
MARKERS = {
    "examples/trl_grpo_bots.py": "read back: identical posterior",
    "examples/planning_figures.py": "done ['plan', 'lag', 'guard']",
    "bots_rft.integrations.check": ": ok: ",  # and exit status 0: every framework checked passed
    "bots_rft.integrations.verl": "check passed: nothing was started",
}


def documented_smoke_commands() -> list[str]:
    """Lines ``python examples/<file> ... --smoke ...`` inside fenced blocks of the docs."""
    found: list[str] = []
    for _doc, line in fenced_lines():
        command = line.split("#", 1)[0].strip()
        if (
            command.startswith("python examples/")
            and "--smoke" in shlex.split(command)
            or command.startswith("python -m bots_rft.integrations.")
        ):
            found.append(command)
    return sorted(set(found))


COMMANDS = documented_smoke_commands()


def test_every_example_program_has_a_documented_smoke_command() -> None:
    programs = sorted(f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py"))
    assert programs, "examples/ has no programs"
    documented = {program(c) for c in COMMANDS}
    assert [p for p in programs if p not in documented] == []
    assert set(MARKERS) == documented, "every documented program needs the line its run prints"


def program(command: str) -> str:
    """The example file, or the module after ``-m``."""
    argv = shlex.split(command)
    return argv[2] if argv[1] == "-m" else argv[1]


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_smoke_command_runs(command: str) -> None:
    argv = shlex.split(command)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert MARKERS[program(command)] in done.stdout, done.stdout[-3000:]


GPU = ROOT / "examples" / "gpu"


def test_gpu_recipes_say_they_were_not_run_and_parse() -> None:
    recipes = sorted(GPU.glob("*.sh"))
    assert recipes, "examples/gpu has no recipes"
    assert "NOT YET RUN ON A GPU" in (GPU / "README.md").read_text(encoding="utf-8")
    for recipe in recipes:
        assert "NOT YET RUN ON A GPU" in recipe.read_text(encoding="utf-8"), recipe.name
        assert recipe.name in (GPU / "README.md").read_text(encoding="utf-8"), recipe.name
        done = subprocess.run(["bash", "-n", str(recipe)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_gpu_verl_recipe_passes_the_preflight_check(tmp_path: Path) -> None:
    """The verl recipe's whole command through ``--check`` (a model folder stands in for the
    converted SmolLM2: the check reads no weights; one TransferQueue unit, as this host is small)."""
    (tmp_path / "config.json").write_text("{}")
    env = {**os.environ, "SMOLLM2_HF_DIR": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    argv = [
        "bash",
        "examples/gpu/verl_smollm2.sh",
        "--check",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
    ]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "check passed" in done.stdout and "8 prompts x 8 rollouts" in done.stdout
