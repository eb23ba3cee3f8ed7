"""Dedicated identities, started as root: one user namespace per process that maps a block of 256
ids, one per concurrent run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from .view import _LaunchError

# Dedicated ids when started as root: 2**31 + 256 * pid + slot (pids are below 2**22).
_ID_BASE = 1 << 31
_SLOTS = 256


class _Identities:
    """Started as root: one user namespace (per process) that maps uid/gid 0 (bubblewrap's setup)
    and a range of 256 dedicated ids to themselves; each concurrent run takes one id of the range,
    so process-count limits and file ownership are per run."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.base = _ID_BASE + _SLOTS * (self.pid % (1 << 22))
        self.free = list(range(_SLOTS))
        self.cond = threading.Condition()
        self.userns_fd = self._make_userns()

    def _make_userns(self) -> int:
        holder = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _USERNS_HOLDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert holder.stdout is not None and holder.stdin is not None
            line = holder.stdout.readline().decode().strip()
            if line != "ok":
                raise _LaunchError(f"cannot create a user namespace ({line or 'no answer'})")
            maps = f"0 0 1\n{self.base} {self.base} {_SLOTS}\n"
            try:
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{holder.pid}/{name}", "w") as f:
                        f.write(maps)
                return os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise _LaunchError(f"cannot map dedicated ids into a user namespace: {exc}") from exc
        finally:
            holder.kill()
            holder.wait()
            for stream in (holder.stdin, holder.stdout):
                if stream is not None:
                    stream.close()

    def acquire(self, deadline: float) -> int:
        with self.cond:
            while not self.free:
                if not self.cond.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise _LaunchError("all 256 sandbox identities of this process are in use")
            return self.base + self.free.pop()

    def release(self, uid: int) -> None:
        with self.cond:
            self.free.append(uid - self.base)
            self.cond.notify()


# The holder lowers its own limits before it creates the namespace: the kernel takes a new user
# namespace's caps on the per-user counts it charges up the chain (pending signals, locked memory,
# POSIX message-queue bytes) from its creator's limits, so the sandboxes of this process together
# can never push those counts of the user that owns the namespace (root) past these values.
_USERNS_HOLDER = f"""
import ctypes, resource, sys
for which, value in ((resource.RLIMIT_SIGPENDING, {_SLOTS * 64}), (resource.RLIMIT_MEMLOCK, 0),
                     (resource.RLIMIT_MSGQUEUE, 0)):
    resource.setrlimit(which, (value, value))
libc = ctypes.CDLL(None, use_errno=True)
if libc.unshare(0x10000000) != 0:
    print("unshare failed: errno %d" % ctypes.get_errno(), flush=True)
    sys.exit(1)
print("ok", flush=True)
sys.stdin.read()
"""

_identities: _Identities | None = None
_identities_lock = threading.Lock()


def _get_identities() -> _Identities:
    global _identities
    with _identities_lock:
        if _identities is None or _identities.pid != os.getpid():
            _identities = _Identities()
        return _identities
