"""Directories that a process made for itself (named ``<prefix><pid>-...`` under a temp
directory) and left behind when it died without cleaning up (SIGKILL): the scorer's worker roots
and the sandbox's mount points both use this to find them."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["pid_alive", "dead_owner_dirs"]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def dead_owner_dirs(tmp: str, prefix: str) -> Iterator[os.DirEntry[str]]:
    """The entries of ``tmp`` named ``<prefix><pid>-...``, owned by this user, whose process
    ``pid`` is gone."""
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid_text = entry.name[len(prefix) :].split("-", 1)[0]
        try:
            if not pid_text.isdigit() or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
        except OSError:
            continue
        if not pid_alive(int(pid_text)):
            yield entry
