"""The trusted side of a code verdict: it starts one sandbox and receives one verdict.

Both sides of a verdict run in the sandbox (see :mod:`bots_rft.rewards.sandbox`, ``verdict``
mode): the candidate program in one process, as one unprivileged identity, and the ground
truth's tests (with the prompt's helpers) in another, as a second identity, the two talking only
through a bounded, data-only channel (:mod:`bots_rft.rewards.sandbox.inside.judge`). This process
writes the task into the test side's pipe and reads back one verdict: a small JSON object of at
most :data:`_MAX_VERDICT_BYTES`, pass, or fail with a reason *code* and a few small integers or
built-in exception names. The reason's words come from :data:`_REASONS`, a fixed table here:
nothing the sandbox sends is shown, imported, unpickled, evaluated or used as a name. Anything
else (no verdict before the deadline, more than one object, an unknown code, a value out of
range, a pass from a test side that did not end cleanly) is a failed verdict with a reason of its
own.
"""

from __future__ import annotations

import builtins
import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Any

from ..base import RewardResult
from .detection import require_isolation
from .launching import finish
from .limits import SandboxLimits
from .run import launch
from .view import memfd

__all__ = ["run_verdict", "REASON_CODES"]

_MAX_VERDICT_BYTES = 4096
_REASON_CHARS = 200
# A little longer than the verdict's own deadline, which the test side enforces: time for it to
# say "timed out" itself before this side gives up on it.
_GRACE_S = 1.0
_MAX_VALUE = 1 << 31

_EXCEPTIONS = frozenset(
    name for name, cls in vars(builtins).items() if isinstance(cls, type) and issubclass(cls, BaseException)
) | {"CandidateRaised"}


def _where(line: Any) -> str:
    return "test" if line is None else f"test line {line}"


# code -> (kinds of its values: "n" a small non-negative int, "line" one or None, "exc" a built-in
# exception name; the words, from the values and the limits)
_Words = Callable[[list[Any], SandboxLimits], str]
_REASONS: dict[str, tuple[str, _Words]] = {
    "timeout": ("", lambda v, lim: f"timed out after {lim.timeout_s:g}s"),
    "too_big": ("", lambda v, lim: "the program's answer exceeds 16 MiB"),
    "not_plain": ("", lambda v, lim: "the program's answer is not plain data"),
    "closed": ("", lambda v, lim: "the program closed its connection to the tests"),
    "exited": ("", lambda v, lim: "the program exited before the tests finished"),
    "exit_status": ("n", lambda v, lim: f"the program exited before the tests finished (exit status {v[0]})"),
    "killed": ("n", lambda v, lim: f"the program was killed (signal {v[0]}: a resource limit or a crash)"),
    "bad_len": ("", lambda v, lim: "the candidate's len() was not a non-negative integer"),
    "bad_iter": ("", lambda v, lim: "the candidate's iteration did not give a list"),
    "bad_bool": ("", lambda v, lim: "the candidate's truth value was not a bool"),
    "raised_loading": ("e", lambda v, lim: f"the program raised {v[0]} while loading"),
    "raised": ("el", lambda v, lim: f"the program raised {v[0]} ({_where(v[1])})"),
    "assertion": ("l", lambda v, lim: f"wrong answer (failed assertion at {_where(v[0])})"),
    "test_raised": ("el", lambda v, lim: f"the test raised {v[0]} ({_where(v[1])})"),
    "case_output": ("nn", lambda v, lim: f"case {v[0]}: output exceeds {v[1]} bytes"),
    "case_timeout": (
        "n",
        lambda v, lim: f"case {v[0]}: timed out ({lim.timeout_s:g}s for the whole verdict, all cases together)",
    ),
    "case_input": ("nn", lambda v, lim: f"case {v[0]}: its input ({v[1]} bytes) did not reach the program whole"),
    "case_killed": (
        "nn",
        lambda v, lim: f"case {v[0]}: the program was killed (signal {v[1]}: a resource limit or a crash)",
    ),
    "case_status": ("nn", lambda v, lim: f"case {v[0]}: the program exited with status {v[1]}"),
    "case_wrong": ("n", lambda v, lim: f"case {v[0]}: wrong output"),
}
#: Every reason code the test side may send.
REASON_CODES = frozenset(_REASONS) | {"no_entry"}


def _valid(kinds: str, values: Any) -> bool:
    if type(values) is not list or len(values) != len(kinds):
        return False
    for kind, v in zip(kinds, values):
        small = type(v) is int and 0 <= v < _MAX_VALUE
        if kind == "n" and not small:
            return False
        if kind == "l" and not (v is None or small):
            return False
        if kind == "e" and not (type(v) is str and v in _EXCEPTIONS):
            return False
    return True


def _fail(reason: str) -> RewardResult:
    return RewardResult(0.0, reason[:_REASON_CHARS])


class GroundTruthError(ValueError):
    """The ground truth does not run in the sandbox (its prompt raises, or its test defines no
    ``check``): a data error, like a ground truth that does not parse."""


def _read_verdict(fd: int, deadline: float) -> bytes | None:
    """Everything the test side wrote, up to end of file (cut at one byte over the size cap, which
    no verdict reaches); None past the deadline."""
    data = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, _MAX_VERDICT_BYTES + 1)
        if not chunk:
            return data
        data += chunk
        if len(data) > _MAX_VERDICT_BYTES:
            return data


def run_verdict(task: dict[str, Any], limits: SandboxLimits, allow_unsandboxed: bool | None) -> RewardResult:
    """Judge ``task`` (built by :func:`bots_rft.rewards.code.verify_code`) in one sandbox and
    return its reward; the reason, if any, in this module's words."""
    # The process's one-time set-up (finding the runtime, the probe sandbox, the identities)
    # happens here, before the clock starts: a process's first verdict on a busy host would
    # otherwise spend its time limit on it and fail a right answer as timed out.
    require_isolation(allow_unsandboxed)
    deadline = time.monotonic() + limits.timeout_s
    # The largest case input: the program's file-size limit leaves room for it (see the agent).
    inputs = [len(str(given).encode("utf-8")) for given, _ in task.get("cases", ())]
    task_fd = memfd("task", json.dumps(task).encode("utf-8"))
    verdict_r, verdict_w = os.pipe()
    try:
        launched = launch(
            "verdict",
            limits,
            allow_unsandboxed=allow_unsandboxed,
            pass_fds=(task_fd, verdict_w),
            extra={
                "task_fd": task_fd,
                "verdict_fd": verdict_w,
                "deadline": deadline,
                "input_bytes": max(inputs, default=0),
            },
        )
    except BaseException:
        os.close(verdict_r)
        raise
    finally:
        os.close(task_fd)
        os.close(verdict_w)
    try:
        data = _read_verdict(verdict_r, deadline + _GRACE_S)
        status = None
        if data and len(data) <= _MAX_VERDICT_BYTES:  # it has ended (end of file): its exit status
            try:
                status = launched.proc.wait(timeout=max(0.1, deadline + _GRACE_S - time.monotonic()))
            except subprocess.TimeoutExpired:
                status = None
    finally:
        finish(launched)
        os.close(verdict_r)
    if data is None:
        return _fail(f"timed out after {limits.timeout_s:g}s")
    if not data:
        return _fail("the tests ended without a verdict")
    return _decide(data, status, limits, task.get("entry"))


def _decide(data: bytes, status: int | None, limits: SandboxLimits, entry: object) -> RewardResult:
    malformed = _fail("the test sandbox sent a malformed verdict")
    if len(data) > _MAX_VERDICT_BYTES:
        return malformed
    try:
        verdict = json.loads(data)
    except (ValueError, RecursionError):
        return malformed
    if type(verdict) is not dict or type(verdict.get("pass")) is not bool:
        return malformed
    if verdict["pass"]:
        if set(verdict) != {"pass"}:
            return malformed
        if status != 0:  # a pass counts only from a test side that finished as it should
            return _fail("the tests did not end cleanly")
        return RewardResult(1.0)
    if "ground_truth" in verdict:
        what = verdict["ground_truth"]
        values = verdict.get("values") or []
        if what == "prompt" and _valid("e", values):
            raise GroundTruthError(f"code ground truth 'prompt' does not run: it raised {values[0]}")
        if what == "no_check" and values == []:
            raise GroundTruthError("code ground truth 'test' defines no check(candidate) function")
        return malformed
    code, values = verdict.get("code"), verdict.get("values") or []
    if code == "no_entry" and values == [] and type(entry) is str:  # the name is the task's, not the sandbox's
        return _fail(f"the program defines no {entry!r}")
    if set(verdict) != {"pass", "code", "values"} or type(code) is not str or code not in _REASONS:
        return malformed
    kinds, words = _REASONS[code]
    if not _valid(kinds, values):
        return malformed
    return _fail(words(values, limits))
