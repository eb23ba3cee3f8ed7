"""``run_python``: run a Python source in a sandbox and return what it did."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from ...errors import InvalidArgumentError
from .launching import _WORK, finish, launch
from .limits import SandboxLimits, SandboxResult
from .view import memfd

__all__ = ["run_python"]


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
