"""What a new user meets first at the command line: every extra a command needs named at once,
before it starts, and listed in ``bots --help``; ``bots scoreboard --no-plots``; Ctrl-C as one line
and exit status 130 in every command; "did you mean" for a mistyped option; ``bots demo``'s
output readable in 80 columns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bots_rft.cli import main
from hidden_extras import EXTRAS, bots


# ------------------------------------------------------------------------ extras, up front
def test_a_command_needing_two_extras_names_both_at_once(tmp_path: Path) -> None:
    out = bots(EXTRAS, "train", "--out", "run", "steps=1", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [
        "bots train: error: this needs pydantic, tqdm, yaml (the [cli] extra) and pyarrow, torch, transformers "
        "(the [train] extra): pip install 'bots-rft[train]'"
    ]
    assert not (tmp_path / "run").exists()


def test_the_extras_missing_after_one_is_installed_are_the_rest(tmp_path: Path) -> None:
    out = bots("pyarrow,torch,transformers", "train", "--out", "run", cwd=tmp_path)
    assert out.stderr.splitlines() == [
        "bots train: error: this needs pyarrow, torch, transformers (the [train] extra): pip install 'bots-rft[train]'"
    ]


def test_printing_a_config_needs_only_the_cli_extra(tmp_path: Path) -> None:
    out = bots("pyarrow,torch,transformers,matplotlib", "train", "--print-config", "pool=p.parquet", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "method:" in out.stdout


def test_scoreboard_checks_its_plots_before_its_runs(tmp_path: Path) -> None:
    out = bots("matplotlib", "scoreboard", "--out", "sb", "--quick", "--no-progress", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", "refused after the run, not before it"
    assert out.stderr.splitlines() == [
        "bots scoreboard: error: this needs matplotlib, from the [plot] extra: pip install 'bots-rft[plot]' "
        "(or run with --no-plots)"
    ]
    assert not (tmp_path / "sb").exists()


def test_scoreboard_without_plots_writes_no_png(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bots_rft.simulate.scoreboard as sim

    real = sim.scoreboard_config

    def tiny(quick: bool, seeds: int | None) -> object:  # one regime, the --quick sizes: seconds
        config = real(quick=True, seeds=2)
        return config.model_copy(update={"regimes": config.regimes[:1], "information": config.information[:1]})

    monkeypatch.setattr(sim, "scoreboard_config", tiny)
    assert main(["scoreboard", "--out", str(tmp_path / "sb"), "--quick", "--no-plots", "--no-progress"]) == 0
    names = sorted(p.name for p in (tmp_path / "sb").iterdir())
    assert "scoreboard.md" in names and not [n for n in names if n.endswith(".png")]


def test_help_lists_the_extras_each_command_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    lines = {line.split()[0]: line for line in text.split("extras each command needs")[1].splitlines() if line.strip()}
    assert "runs demo and simulate with --no-progress (and --no-plots)" in text
    assert lines["demo"].split(None, 1)[1] == "[cli] unless --no-progress"
    assert lines["simulate"].split(None, 1)[1] == "[cli] unless --no-progress; [plot] unless --no-plots"
    assert lines["scoreboard"].split(None, 1)[1] == "[cli]; [plot] unless --no-plots"
    assert lines["data"].split(None, 1)[1] == "[data]"
    for name in ("train", "compare", "refeval", "embed"):
        assert lines[name].split(None, 1)[1] == "[train]"
    assert max(len(line) for line in lines.values()) <= 80


# ------------------------------------------------------------------------ did you mean
def test_a_mistyped_option_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--stpes", "5"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "bots demo: error: unrecognized arguments: --stpes 5 (did you mean --steps?) (see bots demo --help)"
    ]
    assert main(["data", "toy", "--ot", "x"]) == 2
    assert "(did you mean --out?)" in capsys.readouterr().err
    assert main(["dmeo"]) == 2
    assert "(did you mean demo?)" in capsys.readouterr().err


def test_every_demo_option_has_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft.cli import build_parser

    parser = build_parser()
    demo = parser._subparsers._group_actions[0].choices["demo"]  # type: ignore[union-attr]
    missing = [a.dest for a in demo._actions if not a.help]
    assert missing == []


# ------------------------------------------------------------------------ Ctrl-C
@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--tasks", "200000", "--steps", "100000", "--no-progress", "--no-comparison"],
        ["simulate", "--tasks", "20000", "--steps", "100000", "--seeds", "1", "--no-progress", "--out", "sim"],
    ],
    ids=["demo", "simulate"],
)
def test_ctrl_c_is_one_line_and_exit_130(tmp_path: Path, argv: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bots_rft.cli", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the command's first line: it is running
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.splitlines() == [f"bots {argv[0]}: interrupted (Ctrl-C)"]


# ------------------------------------------------------------------------ demo's width
def test_demo_prints_a_narrow_comparison_and_writes_the_full_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo.json"
    argv = ["demo", "--tasks", "3000", "--steps", "4", "--batch", "16", "--no-progress", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    wide = [line for line in text.splitlines() if len(line) > 100]
    assert wide == []
    assert "| BOTS |" in text and "--wide" in text
    assert [r["method"] for r in json.loads(out.read_text())] == ["bots", "random"]
    full = out.with_suffix(".comparison.md").read_text()
    assert "TTB 100% ↓ (rollouts)" in full and "| BOTS |" in full
