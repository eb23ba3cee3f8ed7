"""Starting a sandbox: ``launch`` (the agent in a mode, confined when the host allows it, after
the isolation check), and ``run_python`` (a Python source in a sandbox, and what it did).

``launch`` lives here rather than in :mod:`.launching` because it asks :mod:`.detection` whether
the host confines code, and detection starts its probe sandbox through :mod:`.launching`."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ...errors import InvalidArgumentError
from .detection import _bwrap_binary, require_isolation
from .launching import _WORK, _launch_bwrap, _launch_unconfined, _Launched, _Streams, finish
from .limits import SandboxLimits, SandboxResult
from .view import _LaunchError, _Runtime, memfd

__all__ = ["launch", "run_python"]


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
    streams = _Streams(stdin, stdout, stderr, (*pass_fds, life_r))
    try:
        if iso is not None and not iso.kernel:
            launched = _launch_unconfined(cfg, files, streams)
        else:
            binary, why = _bwrap_binary()
            if binary is None:
                raise _LaunchError(why)
            launched = _launch_bwrap(binary, _Runtime.get(), cfg, limits, files, streams)
    except BaseException:
        os.close(life_w)
        raise
    finally:
        os.close(life_r)
    launched.lifeline = life_w
    return launched


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
        in_fd = memfd("stdin", (stdin or "").encode("utf-8"))
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
