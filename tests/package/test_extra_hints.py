"""A `bots` command whose extra is not installed says which one, on one line, with status 2; the
core's own command (`bots demo --no-progress`) imports none of the extras' packages. Run here with
those packages hidden from the import system (tests/package/test_light_core.py does the same with a real
core-only install of the wheel)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bots_rft.cli import missing_extra_hint
from hidden_extras import EXTRAS, bots


@pytest.mark.slow
def test_demo_without_progress_runs_on_the_core_alone(tmp_path: Path) -> None:
    out = bots(EXTRAS, "demo", "--no-progress", "--tasks", "3000", "--steps", "3", "--batch", "16", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "BOTS kept" in out.stdout and "| BOTS |" in out.stdout


@pytest.mark.slow
def test_demo_with_its_progress_bar_names_the_cli_extra(tmp_path: Path) -> None:
    out = bots(EXTRAS, "demo", "--tasks", "3000", "--steps", "3", "--batch", "16", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [
        "bots demo: error: this needs tqdm, from the [cli] extra: pip install 'bots-rft[cli]' (or run with --no-progress)"
    ]


@pytest.mark.slow
def test_plots_name_the_plot_extra(tmp_path: Path) -> None:
    argv = ["simulate", "--tasks", "2000", "--steps", "3", "--seeds", "1", "--no-progress", "--out", "run"]
    out = bots("matplotlib", *argv, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", "refused after the run, not before it"
    assert not (tmp_path / "run").exists()
    assert out.stderr.splitlines() == [
        "bots simulate: error: this needs matplotlib, from the [plot] extra: pip install 'bots-rft[plot]' "
        "(or run with --no-plots)"
    ]


@pytest.mark.slow
def test_version_and_help_need_no_extra(tmp_path: Path) -> None:
    import bots_rft

    assert bots(EXTRAS, "--version", cwd=tmp_path).stdout.strip() == f"bots-rft {bots_rft.__version__}"
    for command in ("demo", "simulate", "scoreboard", "data", "refeval", "train", "compare"):
        out = bots(EXTRAS, command, "--help", cwd=tmp_path)
        assert out.returncode == 0, (command, out.stderr)


@pytest.mark.parametrize(
    ("module", "command", "extra"),
    [
        ("yaml", "train", "cli"),
        ("pyarrow", "train", "train"),
        ("pyarrow", "data", "data"),
        ("math_verify", "data", "data"),
    ],
)
def test_the_hint_names_the_extra_that_brings_the_package(module: str, command: str, extra: str) -> None:
    hint = missing_extra_hint(ModuleNotFoundError(f"No module named '{module}.x'", name=f"{module}.x"), command)
    assert hint == f"this needs {module}, from the [{extra}] extra: pip install 'bots-rft[{extra}]'"


def test_a_package_no_extra_brings_keeps_its_traceback() -> None:
    assert missing_extra_hint(ModuleNotFoundError("No module named 'nope'", name="nope"), "train") is None
