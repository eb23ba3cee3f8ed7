"""Every example runs: each file under examples/ that is a program takes ``--smoke``, and each
``--smoke`` command the docs show is run here exactly as written (``python`` is this interpreter)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: What each example prints when its smoke run did its job (beyond exiting with 0).
MARKERS = {
    "examples/trl_grpo_bots.py": "read back: identical posterior",
    "examples/planning_figures.py": "done ['plan', 'lag', 'guard']",
}


def documented_smoke_commands() -> list[str]:
    """Lines ``python examples/<file> ... --smoke ...`` inside fenced blocks of the docs."""
    found: list[str] = []
    for doc in DOCS:
        for block in re.findall(r"```[a-z]*\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.splitlines():
                command = line.split("#", 1)[0].strip()
                if command.startswith("python examples/") and "--smoke" in shlex.split(command):
                    found.append(command)
    return sorted(set(found))


COMMANDS = documented_smoke_commands()


def test_every_example_program_has_a_documented_smoke_command() -> None:
    programs = sorted(f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py"))
    assert programs, "examples/ has no programs"
    documented = {shlex.split(c)[1] for c in COMMANDS}
    assert [p for p in programs if p not in documented] == []
    assert set(MARKERS) == set(programs), "every example needs the line its smoke run prints"


@pytest.mark.parametrize("command", COMMANDS)
def test_documented_smoke_command_runs(command: str) -> None:
    argv = shlex.split(command)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(
        [sys.executable, *argv[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert MARKERS[argv[1]] in done.stdout, done.stdout[-3000:]
