"""``bots demo`` end to end on a small pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bots_rft.cli import main


def test_demo_runs_and_bots_beats_random(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo.json"
    assert main(["demo", "--tasks", "20000", "--steps", "30", "--no-progress", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| bots |" in text and "| random |" in text
    assert "| BOTS |" in text and "| DAPO-DS |" in text  # the closing comparison
    results = {r["method"]: r for r in json.loads(out.read_text())}
    assert set(results) == {"bots", "random"}
    assert 0.0 <= results["random"]["etr"] <= 1.0
    # On this pool roughly half the tasks are all-pass or all-fail; BOTS should avoid most of them.
    assert results["bots"]["etr"] > results["random"]["etr"] + 0.2
    assert results["bots"]["select_ms"] > 0 and results["bots"]["update_ms"] > 0
