"""A test module's tests run again started as an ordinary user: uid 1000 in a user namespace of
its own with no capability (util-linux ``unshare --map-user``), what bots sees when a user without
root runs it. Shared by the sandbox's test modules; each names the tests whose boundary a start as
a user changes and the environment variable that marks the rerun."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

UNSHARE = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
REPO = Path(__file__).resolve().parents[1]


def can_map_a_user(env_name: str) -> bool:
    """Whether this process can start the rerun: it runs as root, is not the rerun itself
    (``env_name`` set) and ``unshare`` maps a user here."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or os.environ.get(env_name) or unshare is None:
        return False
    probe = subprocess.run([unshare, *UNSHARE[1:], "true"], capture_output=True)
    return probe.returncode == 0


def rerun_as_user(test_file: str, selection: str, env_name: str, basetemp: Path) -> str:
    """Runs the tests of ``test_file`` that ``-k selection`` picks as a user, with ``env_name``
    set, in every tier (the modules are marked slow); asserts the run passed and returns pytest's
    summary line."""
    env = {**os.environ, env_name: "1", "PYTHONDONTWRITEBYTECODE": "1"}
    argv = [*UNSHARE, sys.executable, "-m", "pytest"]
    argv += ["-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", f"--basetemp={basetemp}"]
    argv += [test_file, "-k", selection, "-m", ""]
    run = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    return run.stdout.strip().splitlines()[-1]
