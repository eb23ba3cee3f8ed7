"""``bots`` run in a subprocess with some packages unimportable, as on an install without the
extras that bring them (shared by the extras' tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Runs ``bots ARGV`` with the comma-separated top-level packages of argv[1] unimportable.
HIDE = """
import importlib.abc, sys
hidden = set(sys.argv[1].split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in hidden:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
from bots_rft.cli import main
raise SystemExit(main(sys.argv[2:]))
"""
#: Every package an extra brings that the commands import.
EXTRAS = "tqdm,pydantic,pydantic_core,yaml,typing_extensions,matplotlib,pyarrow,torch,transformers"


def bots(hidden: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``bots *argv`` in ``cwd`` with the packages in ``hidden`` (comma-separated) unimportable."""
    return subprocess.run(
        [sys.executable, "-c", HIDE, hidden, *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )
