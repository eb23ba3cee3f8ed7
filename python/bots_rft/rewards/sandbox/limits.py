"""What bounds one sandboxed run (:class:`SandboxLimits`), what it did (:class:`SandboxResult`),
and the error raised where the host gives no kernel sandbox."""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass

from ...errors import ConfigError, InvalidArgumentError

__all__ = ["SandboxLimits", "SandboxResult", "SandboxUnavailableError"]


class SandboxUnavailableError(ConfigError):
    """This host gives no kernel isolation for model-written code, and the user did not opt in to
    running it unconfined."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one sandboxed run (the whole process tree it starts)."""

    timeout_s: float = 10.0  # wall clock, everything included
    cpu_s: int | None = None  # CPU seconds per process; default ceil(timeout_s)
    memory_mb: int = 1024  # address space (RLIMIT_AS) per process
    output_bytes: int = 1 << 20  # cap on standard output/error and on every file it writes
    max_open_files: int = 64
    max_processes: int = 32  # processes (and threads) the program may have at once
    workdir_mb: int = 64  # size of its private writable /work
    # Files, directories and symlinks /work may hold (see inside/agent.py's _mount_work): each costs
    # kernel memory that workdir_mb does not count.
    workdir_inodes: int = 4096
    network: bool = False  # True shares the host's network namespace
    # Signals queued and not yet delivered (real-time signals, POSIX timers) per sandbox uid,
    # RLIMIT_SIGPENDING: the kernel charges them to the owner of the sandbox's user namespace too.
    pending_signals: int = 64

    def __post_init__(self) -> None:
        if not (self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise InvalidArgumentError(
                f"timeout_s: must be a positive number of seconds, got {self.timeout_s!r}", "timeout_s"
            )
        if self.cpu_s is not None and self.cpu_s < 1:
            raise InvalidArgumentError(f"cpu_s: must be at least 1, got {self.cpu_s!r}", "cpu_s")
        if self.memory_mb < 32:
            raise InvalidArgumentError(f"memory_mb: must be at least 32, got {self.memory_mb!r}", "memory_mb")
        if self.output_bytes < 1024:
            raise InvalidArgumentError(
                f"output_bytes: must be at least 1024, got {self.output_bytes!r}", "output_bytes"
            )
        if self.max_open_files < 8:
            raise InvalidArgumentError(
                f"max_open_files: must be at least 8, got {self.max_open_files!r}", "max_open_files"
            )
        if self.max_processes < 4:
            raise InvalidArgumentError(
                f"max_processes: must be at least 4, got {self.max_processes!r}", "max_processes"
            )
        if self.workdir_mb < 1:
            raise InvalidArgumentError(f"workdir_mb: must be at least 1, got {self.workdir_mb!r}", "workdir_mb")
        if self.pending_signals < 8:
            raise InvalidArgumentError(
                f"pending_signals: must be at least 8, got {self.pending_signals!r}", "pending_signals"
            )
        if self.workdir_inodes < 16:
            raise InvalidArgumentError(
                f"workdir_inodes: must be at least 16, got {self.workdir_inodes!r}", "workdir_inodes"
            )

    def agent_config(self) -> dict[str, object]:
        return {
            "cpu_s": self.cpu_s or max(1, math.ceil(self.timeout_s)),
            "memory_bytes": self.memory_mb << 20,
            "output_bytes": self.output_bytes,
            "max_open_files": self.max_open_files,
            "max_processes": self.max_processes,
            "pending_signals": self.pending_signals,
        }


@dataclass(frozen=True)
class SandboxResult:
    """What a sandboxed run did. ``returncode`` is 128+signal when a signal ended it."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    output_truncated: bool
    duration_s: float
    pgid: int  # the launcher's process group; gone once this result exists
    # Inode of the run's PID namespace (None when unsandboxed); reused by later namespaces.
    pid_namespace: int | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def cpu_exceeded(self) -> bool:
        """The program used up its CPU-time limit (the kernel sent SIGXCPU)."""
        return self.returncode == 128 + signal.SIGXCPU
