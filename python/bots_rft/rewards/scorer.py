"""``RewardScorer``: scores batches of responses with the right verifier per ``data_source``,
so that a verifier that raises, hangs, crashes or returns garbage costs that one rollout (reward
0, counted as a *verifier error* of its kind and logged) and never the caller.

By default verifiers run in worker processes (not threads): the verifiers are CPU-bound Python
(sympy, reasoning-gym), and a hung call — even one stuck inside C code — can only be stopped by
killing its process. Each worker gets a private temporary directory (``TMPDIR``) that is deleted
whenever the worker ends (finished, timed out, crashed, killed, scorer closed), so temporary files
a verifier or its sandbox leave behind do not outlive the worker. Workers die with the scorer's
process (Linux parent-death signal), so a killed trainer leaves no verifier running.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError
from ._leftovers import dead_owner_dirs
from ._protocol import HEADER, frame, read_exact
from .base import RewardItem, RewardResult, Verifier, coerce_result, verifier_error
from .registry import get_verifier

__all__ = ["RewardScorer", "StopScoring", "score_one", "verifier_name"]

log = logging.getLogger("bots_rft.rewards")

# Private directories of the workers of one scorer live under
# ``<tmp>/bots-reward-<pid>-<random>``; a later scorer removes those of dead processes.
_ROOT_PREFIX = "bots-reward-"


class StopScoring(BaseException):
    """Raised (by a signal handler, e.g. the trainer's SIGTERM handler) to abandon scoring. It
    passes through the scorer untouched — it is never taken for a verifier's own exception."""


class _VerifierTimeout(BaseException):
    """Raised by the in-process timer inside a verifier that ran out of time."""


def verifier_name(verifier: Any) -> str:
    """``module:qualname`` of a verifier, for messages."""
    module = getattr(verifier, "__module__", None) or "?"
    return f"{module}:{getattr(verifier, '__qualname__', None) or getattr(verifier, '__name__', repr(verifier))}"


@contextmanager
def _in_process_guard(timeout: float) -> Iterator[dict[str, bool]]:
    """Bound an in-process verifier call by ``timeout`` seconds (an interval timer that raises
    inside the verifier) and tell a real Ctrl-C apart from a KeyboardInterrupt the verifier
    raises itself. Only possible on the main thread; elsewhere the call is unguarded."""
    state = {"sigint": False}
    if threading.current_thread() is not threading.main_thread() or signal.getitimer(signal.ITIMER_REAL)[0]:
        yield state
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _VerifierTimeout()

    previous_int = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        state["sigint"] = True
        if callable(previous_int):
            previous_int(signum, frame)  # Python's default handler raises KeyboardInterrupt itself
        elif previous_int != signal.SIG_IGN:
            raise KeyboardInterrupt

    previous_alarm = signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGINT, on_sigint)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield state
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_alarm)
        signal.signal(signal.SIGINT, previous_int)


def score_one(item: RewardItem, verifier: Verifier | None = None, timeout: float | None = None) -> RewardResult:
    """Score one item in this process. Whatever the verifier raises (SystemExit and
    KeyboardInterrupt included) or returns that is not a reward is a verifier error. With
    ``timeout`` (seconds, main thread only), a verifier still running is stopped by a timer: that
    stops Python code (loops, sleeps) but not a call stuck inside a C extension — only a worker
    process (:class:`RewardScorer` with ``workers >= 1``) bounds those."""
    fn = verifier or get_verifier(item.data_source)
    args = (item.data_source, item.response, item.ground_truth, item.extra_info)
    if timeout is None:
        try:
            return coerce_result(fn(*args))
        except StopScoring:
            raise
        except BaseException as exc:  # noqa: BLE001 - a failing verifier costs one reward
            return verifier_error("raised", f"verifier raised {type(exc).__name__}: {exc}")
    try:
        with _in_process_guard(timeout) as guard:
            try:
                value = fn(*args)
            except _VerifierTimeout:
                raise
            except KeyboardInterrupt:
                if guard["sigint"]:
                    raise  # a real Ctrl-C
                return verifier_error("raised", "verifier raised KeyboardInterrupt")
            except StopScoring:
                raise
            except BaseException as exc:  # noqa: BLE001
                return verifier_error("raised", f"verifier raised {type(exc).__name__}: {exc}")
    except _VerifierTimeout:
        return verifier_error("timeout", f"verifier timed out after {timeout:g}s (in-process)")
    return coerce_result(value)


def _remove_stale_roots(tmp: str) -> None:
    """Worker directories of scorers whose process died without cleaning up (SIGKILL)."""
    for entry in dead_owner_dirs(tmp, _ROOT_PREFIX):
        shutil.rmtree(entry.path, ignore_errors=True)


class _Spawner:
    """Starts worker processes from a thread that lives as long as this process.

    A worker dies with its parent through the kernel's parent-death signal, and the kernel sends
    that signal when the *thread* that started the worker ends, not the process: a scorer first
    used from a thread that then ended (a thread pool's, a trainer's callback thread) had its
    workers killed, and the next response sent to one scored 0 as "its worker died (killed by
    signal 9)". The main thread, and this one daemon thread, end only with the process."""

    def __init__(self) -> None:
        import queue

        self.pid = os.getpid()
        self.requests: queue.SimpleQueue[tuple[Any, list[Any], threading.Event]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="bots-reward-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            start, box, done = self.requests.get()
            try:
                box.append(start())
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box.append(exc)
            done.set()

    def run(self, start: Any) -> Any:
        box: list[Any] = []
        done = threading.Event()
        self.requests.put((start, box, done))
        done.wait()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _start_process(start: Any) -> Any:
    """``start()`` (which starts a worker process) on a thread that lives as long as this process."""
    global _spawner
    if threading.current_thread() is threading.main_thread():
        return start()
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.run(start)


class _Worker:
    def __init__(self, root: Path) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="w-", dir=root)
        env = dict(os.environ)
        # The worker must import whatever the caller can (e.g. a module of custom verifiers).
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # Everything the verifier (and its sandbox) creates through tempfile lands here.
        env["TMPDIR"] = self.tmpdir
        self.proc: subprocess.Popen[bytes] = _start_process(
            lambda: subprocess.Popen(
                [sys.executable, "-m", "bots_rft.rewards._worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                bufsize=0,
            )
        )
        self.job: int | None = None
        self.deadline = 0.0
        self.started = False

    def send(self, job: int, verifier: Verifier, item: RewardItem, startup_timeout: float) -> None:
        args = (item.data_source, item.response, item.ground_truth, dict(item.extra_info))
        # The verifier and its arguments travel as an inner pickle, so that a worker that cannot
        # load them (e.g. a function of the caller's __main__) can still say so for this job.
        payload = pickle.dumps((job, pickle.dumps((verifier, args))))
        assert self.proc.stdin is not None
        self.proc.stdin.write(frame(payload))
        # Until the worker says "begin", it may still be importing the verifier's libraries.
        self.job, self.deadline, self.started = job, time.monotonic() + startup_timeout, False

    def receive(self) -> tuple[Any, ...] | None:
        assert self.proc.stdout is not None
        header = read_exact(self.proc.stdout, HEADER.size)  # type: ignore[arg-type]
        if header is None:
            return None
        payload = read_exact(self.proc.stdout, HEADER.unpack(header)[0])  # type: ignore[arg-type]
        return None if payload is None else pickle.loads(payload)  # type: ignore[no-any-return]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def close(self) -> None:
        """Ask an idle worker politely (EOF on stdin), then kill; a busy one is killed at once."""
        if self.job is None:
            try:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


class RewardScorer:
    """Scores responses in ``workers`` processes with a per-response ``timeout`` (seconds).
    ``startup_timeout`` bounds a worker's one-off import of a verifier's libraries.

    ``workers=0`` scores in the calling thread: exceptions are caught and, on the main thread,
    a timer stops a verifier after ``timeout`` — but not one stuck inside C code (use a worker).

    ``fault_streak``: after a verifier hung (timed out) or crashed its worker on this many calls
    in a row with one and the same response and ground truth within one batch, the remaining
    copies of that response in the batch are not run and count as errors of the same kind (a
    group of identical hostile samples costs about ``fault_streak * timeout / workers`` seconds).
    Other responses are always run: every fault kills that worker and a fresh one takes the next
    response, so a response that hangs or crashes costs only its own verdict. None: run all.

    Verifier errors are counted by kind in :attr:`error_counts` (see
    :data:`~bots_rft.rewards.base.ERROR_KINDS`) and logged once per kind and batch, with the count,
    the verifier and the first reason. Use as a context manager, or call :meth:`close`.

    >>> with RewardScorer(workers=2) as scorer:                      # doctest: +SKIP
    ...     scorer.score_batch([RewardItem("math", "... \\\\boxed{4}", "4", {})])
    """

    def __init__(
        self,
        workers: int | None = None,
        timeout: float = 30.0,
        startup_timeout: float = 120.0,
        fault_streak: int | None = 2,
    ) -> None:
        if workers is None:
            workers = min(2, os.cpu_count() or 1)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
            raise InvalidArgumentError(f"workers: expected an integer >= 0, got {workers!r}", "workers")
        for name, value in (("timeout", timeout), ("startup_timeout", startup_timeout)):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and value > 0):
                raise InvalidArgumentError(f"{name}: expected seconds > 0, got {value!r}", name)
        if fault_streak is not None and (
            isinstance(fault_streak, bool) or not isinstance(fault_streak, int) or fault_streak < 1
        ):
            raise InvalidArgumentError(
                f"fault_streak: expected an integer >= 1 or None, got {fault_streak!r}", "fault_streak"
            )
        self.workers = workers
        self.timeout = float(timeout)
        self.startup_timeout = float(startup_timeout)
        self.fault_streak = fault_streak
        #: Verifier errors by kind over this scorer's life.
        self.error_counts: Counter[str] = Counter()
        self._pool: list[_Worker] = []
        self._root: Path | None = None

    def __enter__(self) -> RewardScorer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the running workers."""
        return [w.proc.pid for w in self._pool if w.proc.poll() is None]

    def close(self) -> None:
        """Stop every worker and delete the workers' temporary directories."""
        pool, self._pool = self._pool, []
        for w in pool:
            w.close()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def score(
        self, data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None
    ) -> RewardResult:
        return self.score_batch([RewardItem(data_source, response, ground_truth, extra_info or {})])[0]

    def score_batch(self, items: Iterable[RewardItem | Sequence[Any]]) -> list[RewardResult]:
        """One :class:`RewardResult` per item, in order. An unknown ``data_source``, or a verifier
        the worker processes cannot load, raises a typed error before any reward is returned."""
        batch = [it if isinstance(it, RewardItem) else RewardItem(*it) for it in items]
        verifiers = [get_verifier(it.data_source) for it in batch]
        if self.workers == 0:
            results = [score_one(it, fn, self.timeout) for it, fn in zip(batch, verifiers)]
        else:
            for fn in verifiers:
                if getattr(fn, "__module__", None) == "__main__":
                    raise InvalidArgumentError(
                        f"verifier: {verifier_name(fn)} is defined in the script being run (__main__), which "
                        "the reward worker processes cannot import; move it into a module and register it "
                        "from there, or score in-process (workers=0)",
                        "verifier",
                    )
            results = self._run(batch, verifiers)
        self._count_and_log(batch, verifiers, results)
        return results

    def _count_and_log(self, batch: list[RewardItem], verifiers: list[Verifier], results: list[RewardResult]) -> None:
        by_kind: dict[str, list[int]] = {}
        for i, res in enumerate(results):
            if res.error:
                by_kind.setdefault(res.kind or "reported", []).append(i)
        for kind, idx in by_kind.items():
            self.error_counts[kind] += len(idx)
            first = idx[0]
            log.warning(
                "verifier error (%s) on %d of %d responses, reward 0: %s for data_source %r; first: %s",
                kind,
                len(idx),
                len(batch),
                verifier_name(verifiers[first]),
                batch[first].data_source,
                results[first].reason,
            )

    def _ensure_root(self) -> Path:
        if self._root is None or not self._root.is_dir():
            tmp = tempfile.gettempdir()
            _remove_stale_roots(tmp)
            self._root = Path(tempfile.mkdtemp(prefix=f"{_ROOT_PREFIX}{os.getpid()}-", dir=tmp))
        return self._root

    def _new_worker(self) -> _Worker:
        return _Worker(self._ensure_root())

    def _run(self, batch: list[RewardItem], verifiers: list[Verifier]) -> list[RewardResult]:
        try:
            return self._dispatch(batch, verifiers)
        except BaseException:
            # Interrupted (StopScoring, KeyboardInterrupt) or a verifier the workers cannot load:
            # the busy workers' jobs belong to an abandoned batch.
            for w in self._pool:
                if w.job is not None:
                    w.kill()
            self._pool = [w for w in self._pool if w.proc.poll() is None and w.job is None]
            raise

    def _dispatch(self, batch: list[RewardItem], verifiers: list[Verifier]) -> list[RewardResult]:
        results: list[RewardResult | None] = [None] * len(batch)
        pending = deque(range(len(batch)))
        # Consecutive hangs/crashes per (verifier, response, ground truth): a streak skips only
        # copies of the very response that faulted, never another response, so one hostile
        # answer (or two different ones) cannot turn its neighbours' right answers into zeros.
        streak: Counter[tuple[int, str, str]] = Counter()

        keys: dict[int, tuple[int, str, str]] = {}
        retried: set[int] = set()

        def same(job: int) -> tuple[int, str, str]:
            if job not in keys:  # computed on demand: most batches have no fault at all
                item = batch[job]
                keys[job] = (id(verifiers[job]), str(item.response), repr(item.ground_truth))
            return keys[job]

        def fault(job: int, kind: str, reason: str) -> None:
            results[job] = verifier_error(kind, reason)
            key = same(job)
            streak[key] += 1
            if self.fault_streak is not None and streak[key] >= self.fault_streak:
                for other in [j for j in pending if same(j) == key]:
                    pending.remove(other)
                    results[other] = verifier_error(
                        kind,
                        f"not run: the verifier's last {streak[key]} calls on this same response in this batch "
                        f"ended with: {reason}",
                    )

        while len(self._pool) < min(self.workers, len(batch)):
            self._pool.append(self._new_worker())
        while pending or any(w.job is not None for w in self._pool):
            for i, w in enumerate(self._pool):
                if w.job is None and pending:
                    if w.proc.poll() is not None:  # died between jobs (or was killed)
                        w.kill()
                        self._pool[i] = w = self._new_worker()
                    job = pending.popleft()
                    try:
                        w.send(job, verifiers[job], batch[job], self.startup_timeout)
                    except (BrokenPipeError, OSError):
                        # The worker died while idle: replace it and try the job again later.
                        pending.appendleft(job)
                        w.job = None
                        w.kill()
                        self._pool[i] = self._new_worker()
            busy = [w for w in self._pool if w.job is not None]
            if not busy:
                continue
            wait = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready, _, _ = select.select([w.proc.stdout.fileno() for w in busy if w.proc.stdout], [], [], wait)
            now = time.monotonic()
            for i, w in enumerate(self._pool):
                if w.job is None:
                    continue
                job = w.job
                if w.proc.stdout is not None and w.proc.stdout.fileno() in ready:
                    msg = w.receive()
                    if msg is None:
                        code = w.proc.wait()
                        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
                        w.kill()
                        self._pool[i] = self._new_worker()
                        if not w.started and job not in retried:
                            # It died before the job began (before its verifier ran): not this
                            # response's doing; a fresh worker takes it once more.
                            retried.add(job)
                            pending.appendleft(job)
                        else:
                            fault(job, "crashed", f"verifier crashed: its worker died ({how})")
                    elif msg[0] == "begin":
                        w.started, w.deadline = True, now + self.timeout
                    elif msg[0] == "unloadable":
                        w.job = None
                        raise InvalidArgumentError(
                            f"verifier: the reward worker processes cannot load {verifier_name(verifiers[job])} "
                            f"for data_source {batch[job].data_source!r} ({msg[2]}); register a module-level "
                            "function of an importable module",
                            "verifier",
                        )
                    else:
                        _, _, reward, reason, error, kind, retire = msg
                        results[job] = RewardResult(reward, reason, error, kind)
                        if streak:
                            streak.pop(same(job), None)
                        w.job = None
                        if retire:  # the call left it unfit: a fresh one scores the next response
                            w.kill()
                            self._pool[i] = self._new_worker()
                elif now >= w.deadline:
                    what = (
                        f"timed out after {self.timeout:g}s"
                        if w.started
                        else f"did not start within {self.startup_timeout:g}s"
                    )
                    w.kill()
                    self._pool[i] = self._new_worker()
                    fault(job, "timeout", f"verifier {what}")
        return [r if r is not None else verifier_error("crashed", "not scored") for r in results]
