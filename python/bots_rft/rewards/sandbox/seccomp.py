"""The seccomp filter of the code sandbox, as the classic-BPF program bubblewrap loads (``--seccomp``).

Default allow, with a deny list of the calls a sandboxed program could use to change its own
confinement or reach outside it: mounting (classic and the new mount API), namespaces (``setns``,
``unshare``, ``clone`` with a ``CLONE_NEW*`` flag), tracing and reading other processes' memory,
BPF, kernel keyrings, perf events, kernel modules, kexec, reboot, io_uring (its operations bypass
seccomp), userfaultfd, the kernel log, swap, quotas, file handles, System V IPC objects (shared memory,
message queues, semaphores: kernel memory outside every per-process limit), and the calls that
take from a per-user count of the kernel (inotify and fanotify instances, POSIX message queue
bytes): started as a user, the sandbox's uid is the scorer's, so a program could use up that
user's share for the host; and ``socket()`` of the ``AF_VSOCK`` family (the hypervisor's host
channel, outside every network namespace); and ``setsid`` (a new session is a new scheduler
autogroup: a verdict's processes share one CPU share only while they stay in its session). Denied
calls fail with ``EPERM``; file locks (``flock``, and ``fcntl``'s lock and lease commands) fail
with ``ENOLCK``, because the view's files are the host's own; ``clone3`` fails with ``ENOSYS`` because its flags live in memory a filter cannot read
(the C library then falls back to ``clone``, whose flags are checked). A call made through another
architecture's system-call table (32-bit x86 on x86-64) kills the process; so does any x32 call.

Filters exist for x86-64 and aarch64; :func:`seccomp_filter` returns None elsewhere.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Collection

__all__ = ["seccomp_filter", "DENIED_SYSCALLS", "DENIED_SOCKET_FAMILIES", "LOCK_SYSCALLS", "DENIED_FCNTL_COMMANDS"]

# Names of the denied calls (for the docs and the log); their numbers per architecture below.
DENIED_SYSCALLS = (
    "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "setns", "unshare", "ptrace", "process_vm_readv", "process_vm_writev",
    "pidfd_getfd", "kcmp", "bpf", "keyctl", "add_key", "request_key", "perf_event_open",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "syslog", "acct",
    "swapon", "swapoff", "quotactl", "quotactl_fd", "name_to_handle_at", "open_by_handle_at",
    "shmget", "msgget", "semget", "inotify_init", "inotify_init1", "fanotify_init", "mq_open",
    "setsid",
)  # fmt: skip

# File locks fail with ENOLCK ("no locks available"): ``flock``, and ``fcntl`` with these commands
# (F_GETLK, F_SETLK, F_SETLKW, their 32-bit forms, the open-file-description locks, leases). The
# view's files are the host's own, bound read-only: a lock on one would show in the host's
# /proc/locks, could hold up the host, and could be read by a concurrent verdict.
LOCK_SYSCALLS = ("flock",)
DENIED_FCNTL_COMMANDS = {
    "F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_GETLK64": 12, "F_SETLK64": 13, "F_SETLKW64": 14,
    "F_OFD_GETLK": 36, "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38, "F_SETLEASE": 1024, "F_GETLEASE": 1025,
}  # fmt: skip

# The numbers from the kernel's unistd tables (asm/unistd_64.h; asm-generic/unistd.h for aarch64).
_NUMBERS = {
    "x86_64": dict(
        mount=165, umount2=166, pivot_root=155, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, setns=308, unshare=272,
        ptrace=101, process_vm_readv=310, process_vm_writev=311, pidfd_getfd=438, kcmp=312,
        bpf=321, keyctl=250, add_key=248, request_key=249, perf_event_open=298, init_module=175,
        finit_module=313, delete_module=176, kexec_load=246, kexec_file_load=320, reboot=169,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427, userfaultfd=323,
        syslog=103, acct=163, swapon=167, swapoff=168, quotactl=179, quotactl_fd=443,
        name_to_handle_at=303, open_by_handle_at=304, shmget=29, msgget=68, semget=64, clone=56,
        clone3=435, inotify_init=253, inotify_init1=294, fanotify_init=300, mq_open=240, socket=41,
        setsid=112, flock=73, fcntl=72,
    ),
    "aarch64": dict(
        mount=40, umount2=39, pivot_root=41, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, setns=268, unshare=97,
        ptrace=117, process_vm_readv=270, process_vm_writev=271, pidfd_getfd=438, kcmp=272,
        bpf=280, keyctl=219, add_key=217, request_key=218, perf_event_open=241, init_module=105,
        finit_module=273, delete_module=106, kexec_load=104, kexec_file_load=294, reboot=142,
        io_uring_setup=425, io_uring_enter=426, io_uring_register=427, userfaultfd=282,
        syslog=116, acct=89, swapon=224, swapoff=225, quotactl=60, quotactl_fd=443,
        name_to_handle_at=264, open_by_handle_at=265, shmget=194, msgget=186, semget=190, clone=220,
        clone3=435, inotify_init1=26, fanotify_init=262, mq_open=180, socket=198,  # (no inotify_init)
        setsid=157, flock=32, fcntl=25,
    ),
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000

# Every namespace flag clone() accepts: CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
# NEWPID, NEWNET.
_CLONE_NEW_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# Socket families refused by ``socket()``: AF_VSOCK (40) reaches the host and its hypervisor
# through a virtio device whatever the network namespace (it has no namespace of its own); no
# program needs it.
DENIED_SOCKET_FAMILIES = {"AF_VSOCK": 40}

# Classic BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
# Offsets in struct seccomp_data: nr, arch, then args[6] as 64-bit values from byte 16.
_OFF_NR, _OFF_ARCH, _OFF_ARG0_LOW, _OFF_ARG1_LOW = 0, 4, 16, 24


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_filter(machine: str | None = None, allow: Collection[str] = ()) -> bytes | None:
    """The filter for ``machine`` (default: this one) as packed ``struct sock_filter`` records,
    or None when the architecture has no filter here. ``allow`` names denied calls to leave out:
    bubblewrap loads the filter without ``mount`` so that the sandbox's agent can mount the work
    directory, and the agent then loads the whole filter on top of it before any program runs."""
    arch = (machine or platform.machine()).lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    if arch not in _NUMBERS:
        return None
    nr = _NUMBERS[arch]
    eperm = _RET_ERRNO | errno.EPERM
    prog = [
        _insn(_LD_W_ABS, _OFF_ARCH),
        _insn(_JEQ_K, _AUDIT_ARCH[arch], jt=1),
        _insn(_RET_K, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, _OFF_NR),
    ]
    if arch == "x86_64":  # the x32 ABI shares the architecture value: refuse it outright
        prog += [_insn(_JGE_K, _X32_SYSCALL_BIT, jf=1), _insn(_RET_K, _RET_KILL_PROCESS)]
    for name in DENIED_SYSCALLS:
        if name in allow or name not in nr:
            continue
        prog += [_insn(_JEQ_K, nr[name], jf=1), _insn(_RET_K, eperm)]
    enolck = _RET_ERRNO | errno.ENOLCK
    for name in LOCK_SYSCALLS:
        if name not in allow:
            prog += [_insn(_JEQ_K, nr[name], jf=1), _insn(_RET_K, enolck)]
    if "fcntl" not in allow:
        commands = list(DENIED_FCNTL_COMMANDS.values())
        prog.append(_insn(_JEQ_K, nr["fcntl"], jf=len(commands) + 3))
        prog.append(_insn(_LD_W_ABS, _OFF_ARG1_LOW))  # fcntl()'s command
        prog += [_insn(_JEQ_K, cmd, jt=len(commands) - i) for i, cmd in enumerate(commands)]
        prog += [_insn(_RET_K, _RET_ALLOW), _insn(_RET_K, enolck)]  # any other command; a lock's
    families = list(DENIED_SOCKET_FAMILIES.values())
    prog.append(_insn(_JEQ_K, nr["socket"], jf=len(families) + 3))
    prog.append(_insn(_LD_W_ABS, _OFF_ARG0_LOW))  # socket()'s family
    prog += [_insn(_JEQ_K, family, jt=len(families) - i) for i, family in enumerate(families)]
    prog += [_insn(_RET_K, _RET_ALLOW), _insn(_RET_K, eperm)]  # any other family; a denied one
    prog += [
        _insn(_JEQ_K, nr["clone3"], jf=1),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _insn(_JEQ_K, nr["clone"], jf=3),
        _insn(_LD_W_ABS, _OFF_ARG0_LOW),  # clone's flags (all namespace flags are in the low word)
        _insn(_JSET_K, _CLONE_NEW_FLAGS, jf=1),
        _insn(_RET_K, eperm),
        _insn(_RET_K, _RET_ALLOW),
    ]
    return b"".join(prog)
