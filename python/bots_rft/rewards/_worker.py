"""A reward worker process (``python -m bots_rft.rewards._worker``), driven by
:class:`bots_rft.rewards.scorer.RewardScorer` over its stdin/stdout.

Messages are length-prefixed pickles: in ``(job_id, inner)`` where ``inner`` is the pickle of
``(verifier, args)``; out ``("unloadable", job_id, reason)`` when ``inner`` cannot be loaded here
(the scorer raises: it is a setup error, not a verifier error), else ``("begin", job_id)`` once the
verifier's module is prepared (its ``prepare()`` hook, if any, imports heavy libraries: that time
does not count against the per-response timeout), then ``("done", job_id, reward, reason, error,
kind, retire)``: ``retire`` when the call left this worker unfit for the next one (see
:func:`_left_broken`), so that the scorer replaces it before the next verdict. Whatever the
verifier raises — SystemExit and KeyboardInterrupt included — is reported,
never fatal; a verifier that hangs or exits the process is handled from outside.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys

from bots_rft.rewards._protocol import HEADER, frame, read_exact


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when the scorer's process dies, even while a verifier hangs."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _children() -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _left_broken(baseline_fds: int) -> bool:
    """Whether the last call left this worker unfit to score the next one, so that no verdict
    depends on the one before it: a child process still running (killed and reaped here), a
    sandbox identity never given back, or descriptors leaking (64 more than after the first call)."""
    broken = False
    for pid in _children():
        broken = True
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    sandbox = sys.modules.get("bots_rft.rewards.sandbox")
    ids = getattr(sandbox, "_identities", None) if sandbox is not None else None
    if ids is not None and ids.pid == os.getpid() and len(ids.free) != getattr(sandbox, "_SLOTS", len(ids.free)):
        broken = True
    try:
        if len(os.listdir("/proc/self/fd")) > baseline_fds + 64:
            broken = True
    except OSError:
        pass
    return broken


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    _die_with_parent()
    # The protocol owns the original stdout; anything a verifier prints goes to stderr.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    from bots_rft.rewards.base import coerce_result, verifier_error

    prepared: set[str] = set()
    baseline_fds = -1
    while True:
        header = read_exact(inp, HEADER.size)
        if header is None:
            return
        payload = read_exact(inp, HEADER.unpack(header)[0])
        if payload is None:
            return
        job_id, inner = pickle.loads(payload)
        try:
            verifier, args = pickle.loads(inner)
        except BaseException as exc:  # noqa: BLE001 - e.g. a function of the caller's __main__
            out.write(frame(pickle.dumps(("unloadable", job_id, f"{type(exc).__name__}: {exc}"[:500]))))
            continue
        module = getattr(verifier, "__module__", None)
        if module and module not in prepared:
            prepared.add(module)
            hook = getattr(sys.modules.get(module), "prepare", None)
            if callable(hook):
                try:
                    hook()
                except BaseException:  # noqa: BLE001 - the verifier call itself will report it
                    pass
        out.write(frame(pickle.dumps(("begin", job_id))))
        try:
            res = coerce_result(verifier(*args))
        except BaseException as exc:  # noqa: BLE001 - a failing verifier costs one reward
            res = verifier_error("raised", f"verifier raised {type(exc).__name__}: {exc}")
        if baseline_fds < 0:
            baseline_fds = len(os.listdir("/proc/self/fd"))
        retire = _left_broken(baseline_fds)
        out.write(frame(pickle.dumps(("done", job_id, res.reward, res.reason, res.error, res.kind, retire))))


if __name__ == "__main__":
    main()
