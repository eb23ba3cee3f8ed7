"""The read-only view a sandbox shows: the interpreter, its standard library (no site-packages),
the shared libraries they load, the sandbox's own files (the agent and the test side, copied in
as data), and a minimal ``/dev``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["memfd"]

# The in-sandbox side: scripts read as data and run by path inside the sandbox, never imported here.
_INSIDE = Path(__file__).resolve().parent / "inside"
_AGENT = str(_INSIDE / "agent.py")
_AGENT_IN_SANDBOX = "/sandbox/agent.py"
# The test side of a verdict (``verdict`` mode), next to the agent under the name it imports.
_JUDGE = str(_INSIDE / "judge.py")
_JUDGE_IN_SANDBOX = "/sandbox/judge.py"


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
        # Host data the standard library reads, public and read-only: the time-zone database
        # (zoneinfo; the first folder of the interpreter's TZPATH that exists), the C.UTF-8
        # locale (setlocale(LC_ALL, "") under LANG=C.UTF-8) and the service and protocol names
        # (socket.getservbyname).
        tzpath = str(sysconfig.get_config_var("TZPATH") or "/usr/share/zoneinfo").split(os.pathsep)
        self.data_dirs = [os.path.realpath(p) for p in tzpath if os.path.isdir(p)][:1]
        self.data_dirs += [p for p in ("/usr/lib/locale/C.utf8",) if os.path.isdir(p)]
        self.data_files = [p for p in ("/etc/services", "/etc/protocols") if os.path.isfile(p)]
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
        files = [self.python, *self.libraries, *self.data_files, _AGENT_IN_SANDBOX, "/etc/passwd"]
        if os.path.isfile("/etc/ld.so.cache"):
            files.append("/etc/ld.so.cache")
        dirs = sorted(
            {str(p) for f in [*files, self.stdlib, *self.data_dirs] for p in Path(f).parents if str(p) != "/"},
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
        for path in [*self.data_dirs, *self.data_files]:
            args += ["--ro-bind", path, path]
        for m in self.masked:
            args += ["--tmpfs", m, "--remount-ro", m]
        for data, dest in self.own_files:
            fd = memfd("sandbox-file", data)  # one per start: bubblewrap reads it to its end
            own_fds.append(fd)
            args += ["--perms", "0755", "--dir", os.path.dirname(dest)]
            args += ["--perms", "0644", "--ro-bind-data", str(fd), dest]
        return args


def etc_files(ids: dict[int, str]) -> list[tuple[bytes, str]]:
    """The sandbox's own user database and name service, as data: ``ids`` (uid = gid) by name,
    ``root`` and ``nobody``, ``localhost`` and the sandbox's host name, looked up in these files
    only (no DNS: there is no network)."""
    users = {0: "root", 65534: "nobody", **ids}
    passwd = "".join(
        f"{name}:x:{uid}:{uid}:{name}:{'/work' if uid in ids else '/nonexistent'}:/usr/sbin/nologin\n"
        for uid, name in sorted(users.items())
    )
    group = "".join(f"{'nogroup' if uid == 65534 else name}:x:{uid}:\n" for uid, name in sorted(users.items()))
    hosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"
    nsswitch = "".join(
        f"{db}: files\n" for db in ("passwd", "group", "shadow", "hosts", "networks", "protocols", "services")
    )
    return [
        (passwd.encode(), "/etc/passwd"),
        (group.encode(), "/etc/group"),
        (hosts.encode(), "/etc/hosts"),
        (nsswitch.encode(), "/etc/nsswitch.conf"),
    ]


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


def memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:  # a write may be short: the data is whole or this raises
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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
