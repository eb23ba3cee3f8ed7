"""Checkpoints and other atomically written files get the mode the process's umask gives a new
file (0644 under the usual 022), as ``open(path, "w")`` would: an evaluation job running under
another uid reads the trainer's checkpoints. A temporary file from ``mkstemp`` is 0600 whatever
the umask, and the rename kept that mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bots_rft import BOTS
from bots_rft.checkpoint import atomic_write_bytes, save_state


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_selector_checkpoint_follows_the_umask(tmp_path: Path, umask: int) -> None:
    sel = BOTS(10, seed=0)
    sel.update(np.array([1, 2]), np.array([3, 4]), 8)
    sel.save(tmp_path / "selector.bots")
    assert mode(tmp_path / "selector.bots") == 0o666 & ~umask
    # Replacing an existing file gives the new file the same mode.
    sel.save(tmp_path / "selector.bots")
    assert mode(tmp_path / "selector.bots") == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["selector.bots"], "a temporary file was left behind"


def test_state_and_byte_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    save_state(tmp_path / "state.bin", {"a": np.arange(3)})
    atomic_write_bytes(tmp_path / "raw.bin", b"abc")
    assert mode(tmp_path / "state.bin") == 0o666 & ~umask
    assert mode(tmp_path / "raw.bin") == 0o666 & ~umask
    assert (tmp_path / "raw.bin").read_bytes() == b"abc"
