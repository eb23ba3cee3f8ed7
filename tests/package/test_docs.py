"""What the README and the guides show is what the commands print and do.

- docs/reference.md's `bots demo` block ends with the comparison `bots demo` prints (seeded, the
  same on any machine), and every `bots` command the README shows runs as shown;
- the simulated methods table in docs/reference.md and docs/what-bots-does.md is the one the default
  `bots simulate` run prints;
- the training guide's smoke commands work in a fresh checkout.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bots_rft.cli import build_parser, main
from doc_commands import fenced_lines

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _block_after(text: str, marker: str) -> str:
    """The fenced block that contains ``marker``."""
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        if marker in block:
            return str(block)
    raise AssertionError(f"no fenced block with {marker!r}")


def _table_after(text: str, heading: str) -> str:
    """The first markdown table after ``heading``."""
    rest = text[text.index(heading) :]
    lines = rest.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Method |"))
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return "\n".join(lines[start:end])


def test_the_demo_block_ends_with_the_comparison_bots_demo_prints() -> None:
    from bots_rft.commands.demo import narrow
    from bots_rft.report.simulation import quick_comparison

    block = _block_after((ROOT / "docs" / "reference.md").read_text(encoding="utf-8"), "bots demo: 1,000,000 tasks")
    printed = narrow(quick_comparison(seed=0, progress=False))  # what `bots demo` (seed 0) ends with
    assert block.rstrip().endswith(printed.rstrip()), printed


def test_every_bots_command_in_the_readme_runs_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = [command for doc, command in documented_bots_commands() if doc == "README.md"]
    assert commands, "the README shows no bots command"
    monkeypatch.chdir(tmp_path)
    for command in commands:
        assert main(shlex.split(command)[1:]) == 0, command
    assert "| BOTS |" in capsys.readouterr().out


def test_simulated_methods_table_in_the_docs_is_what_bots_simulate_prints() -> None:
    from bots_rft.commands.simulate import build_config
    from bots_rft.report.simulation import group_rows
    from bots_rft.report.tables import markdown_table
    from bots_rft.simulate.experiment import run_experiment

    # The default run's methods table (its sweeps and the ablation do not change these rows).
    args = build_parser().parse_args(
        ["simulate", "--no-sampling-ablation", "--rho-sweep", "none", "--lam-sweep", "none"]
    )
    printed = markdown_table(group_rows(run_experiment(build_config(args), progress=False), "methods"))
    assert _table_after((ROOT / "docs" / "reference.md").read_text(encoding="utf-8"), "Its methods table") == printed
    assert _table_after((ROOT / "docs" / "what-bots-does.md").read_text(encoding="utf-8"), "### Methods") == printed


def test_training_guide_smoke_commands_work_on_a_fresh_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    guide = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    block = _block_after(guide, "configs/smoke_tiny.yaml")
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    toy = next(c for c in commands if c.startswith("bots data toy"))
    smoke = next(c for c in commands if c.startswith("bots train --config configs/smoke_tiny.yaml"))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "smoke_tiny.yaml").write_bytes((ROOT / "configs" / "smoke_tiny.yaml").read_bytes())
    monkeypatch.chdir(tmp_path)  # relative paths as in a checkout, nothing there yet
    assert main(shlex.split(toy)[1:]) == 0
    assert main([*shlex.split(smoke)[1:], "--no-progress"]) == 0
    assert "bots train: done after step 4" in capsys.readouterr().out


def test_reliability_guide_checkpoint_example_prints_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoint format section's example opens a selector file with safetensors alone."""
    text = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    block = _block_after(text, "safe_open(")
    said = re.search(r"prints `([^`]*)`", text[text.index(block) :])
    assert said is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "reliability.md", "exec"), {})
    assert capsys.readouterr().out.strip() == said.group(1)


def documented_bots_commands() -> list[tuple[str, str]]:
    """``(document, command)`` for each ``bots ...`` command in the docs' fenced blocks (a
    command continued with ``\\`` is one; a ``$ `` prompt is dropped; output lines such as
    ``bots train: done`` and commands elided with ``...`` or ``FILE`` are not commands)."""
    found = []
    for doc, line in fenced_lines():
        command = line.split(" #", 1)[0].strip().removeprefix("$ ")
        words = command.split()
        if len(words) < 2 or words[0] != "bots" or words[1].endswith(":"):
            continue
        if "..." in words or "FILE" in words:
            continue
        found.append((doc.name, command))
    return found


def test_every_documented_bots_command_parses_and_its_config_resolves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``bots`` command the docs show is one the CLI accepts as written, and each ``bots
    train --config configs/...`` resolves that file with its KEY=VALUE overrides (every key known,
    every value valid), so a long documented run does not fail on a typo when a user starts it."""
    from bots_rft.commands.train import config_from_args

    monkeypatch.chdir(ROOT)  # the docs' paths are relative to a checkout
    commands = documented_bots_commands()
    assert len(commands) > 30, "the docs' commands were not found"
    parser = build_parser()
    for doc, command in commands:
        try:
            args = parser.parse_args(shlex.split(command)[1:])
        except SystemExit:
            pytest.fail(f"{doc}: the CLI refuses {command!r}")
        if args.command == "train" and str(args.config or "").startswith("configs/"):
            config_from_args(args)
