"""Starting a sandbox (bubblewrap, or, where the user opted in, a plain process group), following
its state (:class:`LaunchState`) and ending it with everything it started."""

from __future__ import annotations

import enum
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .identities import _get_identities
from .limits import SandboxLimits
from .seccomp import seccomp_filter
from .view import _AGENT, _AGENT_IN_SANDBOX, _dev_args, _LaunchError, _Runtime, etc_files, memfd

__all__ = ["LaunchState", "finish", "group_members", "namespace_members"]

_WORK = "/work"
_SAFE_ENV_KEYS = ("LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class _Streams:
    """A run's standard streams (``/dev/null`` where None) and the descriptors it inherits."""

    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None
    pass_fds: tuple[int, ...] = ()

    def popen(self, extra_fds: Sequence[int] = ()) -> dict[str, Any]:
        """``subprocess.Popen`` keywords for these streams (a new session, as every run has)."""
        return {
            "stdin": subprocess.DEVNULL if self.stdin is None else self.stdin,
            "stdout": subprocess.DEVNULL if self.stdout is None else self.stdout,
            "stderr": subprocess.DEVNULL if self.stderr is None else self.stderr,
            "pass_fds": [*extra_fds, *self.pass_fds],
            "start_new_session": True,
        }


class LaunchState(enum.Enum):
    """Where a started run stands, for :func:`finish`."""

    #: No sandbox (the user opted in to running code unconfined): a plain process group, killed
    #: as a group.
    UNCONFINED = "unconfined"
    #: A sandbox whose PID 1 this process holds by a pidfd: killing it ends the whole namespace.
    RUNNING = "running"
    #: A sandbox that is gone: finished, its PID 1 ended before it could be watched (the kernel
    #: then ended the namespace with it), or bubblewrap never started it.
    ENDED = "ended"


@dataclass
class _Launched:
    proc: subprocess.Popen[bytes]
    pid_namespace: int | None
    state: LaunchState
    uid: int | None
    started: float
    init_pidfd: int = -1  # pidfd of the sandbox's PID 1 while RUNNING, else -1
    peer_uid: int | None = None  # verdict mode, started as root: the candidate's own identity
    lifeline: int = -1  # write end of the agent's lifeline pipe: closing it ends the sandbox
    workdir: str | None = None  # unsandboxed only: the host directory the run wrote in

    def finish(self) -> None:
        """Kill everything the run started and wait until it is gone."""
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1
        if self.state is LaunchState.UNCONFINED:  # the process group is all there is
            _kill_group(self.proc.pid)
        elif self.state is LaunchState.RUNNING:
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
        if self.state is LaunchState.UNCONFINED:
            for _ in range(100):  # stragglers caught mid-fork get the signal on their way out
                if not group_members(self.proc.pid):
                    break
                _kill_group(self.proc.pid)
                time.sleep(0.01)
        elif self.state is LaunchState.RUNNING:  # bwrap has reaped PID 1: nothing of it is left
            os.close(self.init_pidfd)
            self.init_pidfd = -1
            self.state = LaunchState.ENDED
        for uid in (self.uid, self.peer_uid):
            if uid is not None:
                _get_identities().release(uid)
        self.uid = self.peer_uid = None


def _launch_bwrap(
    binary: str,
    runtime: _Runtime,
    cfg: dict[str, object],
    limits: SandboxLimits,
    files: Mapping[str, str] | None,
    streams: _Streams,
) -> _Launched:
    started = time.monotonic()
    uid = peer_uid = None
    own_fds: list[int] = []  # closed here once bwrap has them
    shared_fds: list[int] = []  # kept open for later runs
    argv = [binary]
    # With a seccomp filter for this architecture, the agent mounts /work itself (size and inode
    # caps; see inside/agent.py's _mount_work) with a CAP_SYS_ADMIN that it gives up, and loads the
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
            fd = memfd("seccomp", bpf)
            own_fds.append(fd)
            argv += ["--seccomp", str(fd)]
            fd = memfd("seccomp-agent", full_bpf)
            own_fds.append(fd)
            cfg["work"] = {"bytes": limits.workdir_mb << 20, "inodes": limits.workdir_inodes, "seccomp_fd": fd}
        info_r, info_w = os.pipe()
        own_fds += [info_r, info_w]
        argv += ["--info-fd", str(info_w)]
        # The user database names the ids the sandbox runs as: the program's ("sandbox") and,
        # started as root, the tests' ("tests").
        me = os.getuid() if uid is None else uid
        names = {me: "sandbox"} if peer_uid is None else {peer_uid: "sandbox", me: "tests"}
        argv += _view_args(runtime, limits, files, agent_mounts, own_fds, names)
        argv += [runtime.python, "-I", "-S", "-B", _AGENT_IN_SANDBOX, json.dumps(cfg)]
        inheritable = [fd for fd in own_fds if fd != info_r] + shared_fds
        proc = subprocess.Popen(argv, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, **streams.popen(inheritable))
        os.close(info_w)
        own_fds.remove(info_w)
        info = _read_info(info_r, started + limits.timeout_s + 5.0)
        init_pidfd, state = _watch(info)
        launched = _Launched(
            proc,
            info.get("pid-namespace") if info else None,
            state or LaunchState.ENDED,
            uid,
            started,
            init_pidfd=init_pidfd,
            peer_uid=peer_uid,
        )
        uid = peer_uid = None  # released by launched.finish(), and only there (never twice)
        if state is None:  # bwrap failed before starting the sandbox
            launched.finish()
            raise _LaunchError(f"bubblewrap did not start the sandbox (exit status {proc.returncode})")
        return launched
    finally:
        for fd in own_fds:
            os.close(fd)
        for leftover in (uid, peer_uid):
            if leftover is not None:
                _get_identities().release(leftover)


def _view_args(
    runtime: _Runtime,
    limits: SandboxLimits,
    files: Mapping[str, str] | None,
    agent_mounts: bool,
    own_fds: list[int],
    names: dict[int, str],
) -> list[str]:
    """bubblewrap's arguments for what the sandbox shows: the runtime view, its ``/etc`` files
    (``names``: the user database's ids), ``/proc``, ``/dev``, ``/work`` with the launcher's
    files, the read-only remounts and the environment. The memfds they name are added to
    ``own_fds`` (closed once bubblewrap has started)."""
    args = runtime.bwrap_args(own_fds)
    for data, dest in etc_files(names):
        fd = memfd("etc", data)
        own_fds.append(fd)
        args += ["--perms", "0644", "--ro-bind-data", str(fd), dest]
    args += ["--proc", "/proc"] + _dev_args()
    if agent_mounts:
        # The agent mounts over /work and copies these in (bubblewrap's copies would be covered).
        args += ["--perms", "0755", "--dir", _WORK, "--chdir", _WORK, "--perms", "0700", "--dir", _STAGED_FILES]
        folder = _STAGED_FILES
    else:
        args += ["--perms", "0777", "--size", str(limits.workdir_mb << 20), "--tmpfs", _WORK, "--chdir", _WORK]
        folder = _WORK
    for name, text in (files or {}).items():
        fd = memfd("file", text.encode("utf-8"))
        own_fds.append(fd)
        args += ["--perms", "0644", "--file", str(fd), f"{folder}/{name}"]
    # Read-only from here on: the root and /dev are tmpfs mounts that bubblewrap fills, and,
    # started as a user, the program's uid owns them. Left writable, the program could put a
    # module where the test side imports from (/sandbox) and write past workdir_mb.
    args += ["--remount-ro", "/", "--remount-ro", "/dev"]
    for key, value in _sandbox_env(_WORK).items():
        args += ["--setenv", key, value]
    return args


def _watch(info: dict[str, int] | None) -> tuple[int, LaunchState | None]:
    """A pidfd of the sandbox's PID 1 (named in bubblewrap's ``info``) and the run's state; the
    state is None where bubblewrap never started the sandbox."""
    if info is None:
        return -1, None
    try:
        return os.pidfd_open(int(info["child-pid"])), LaunchState.RUNNING
    except ProcessLookupError:
        # A very short run on a busy machine: when PID 1 is gone, the kernel has killed
        # everything in its namespace, so there is nothing left to watch or kill.
        return -1, LaunchState.ENDED
    except (OSError, KeyError, ValueError):
        return -1, None


# Where bubblewrap puts the launcher's files for the agent to copy into the /work it mounts.
_STAGED_FILES = "/sandbox/files"


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


def _launch_unconfined(cfg: dict[str, object], files: Mapping[str, str] | None, streams: _Streams) -> _Launched:
    workdir = tempfile.mkdtemp(prefix="bots-sandbox-")
    for name, text in (files or {}).items():
        Path(workdir, name).write_text(text, encoding="utf-8")
    if cfg.get("program"):
        cfg["program"] = os.path.join(workdir, os.path.basename(str(cfg["program"])))
    proc = subprocess.Popen(
        [os.path.realpath(sys.executable), "-I", "-S", "-B", _AGENT, json.dumps(cfg)],
        cwd=workdir,
        env=_sandbox_env(workdir),
        **streams.popen(),
    )
    return _Launched(proc, None, LaunchState.UNCONFINED, None, time.monotonic(), workdir=workdir)


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
        # Two malloc arenas, not one per thread (each reserves 64 MiB of address space): the
        # threads the process cap allows then fit the address-space cap.
        MALLOC_ARENA_MAX="2",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    return env


def _probe(binary: str, runtime: _Runtime) -> dict[str, object]:
    limits = SandboxLimits(timeout_s=20.0)  # the default work dir caps (see _detect)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            config: dict[str, object] = {"mode": "probe", **limits.agent_config()}
            streams = _Streams(stdout=out.fileno(), stderr=err.fileno())
            launched = _launch_bwrap(binary, runtime, config, limits, None, streams)
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
