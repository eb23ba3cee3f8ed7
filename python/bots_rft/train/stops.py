"""How a training run stops before its last step, and the exit status ``bots train`` gives each way.

- ``0``: the run finished (or had finished its last step when a signal came);
- ``2``: bad input (config, pool, an output directory holding another run, a changed pool on resume);
- ``3``: a step's verifications were verifier errors at or above ``verifier_error_stop`` (all of them,
  by default): the checkpoint of the last finished step is saved first;
- ``128 + signal`` (143 for SIGTERM, 130 for SIGINT): stopped by a signal; the checkpoint of the
  last finished step is saved first. A step that is still rolling out or scoring is abandoned (its
  selection is replayed on resume, so a resumed run selects exactly what an uninterrupted one
  would); a step already in its optimizer updates is finished first.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..rewards.scorer import StopScoring

__all__ = [
    "RunInterrupted",
    "VerifierErrorStop",
    "EXIT_VERIFIER_ERRORS",
    "exit_status_for_signal",
    "signal_name",
    "handle_signals",
]

EXIT_VERIFIER_ERRORS = 3


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def exit_status_for_signal(signum: int) -> int:
    return 128 + int(signum)


class RunInterrupted(StopScoring):
    """Raised by the trainer's signal handler to abandon the step in progress (a BaseException, so
    neither verifier code nor generic ``except Exception`` handlers swallow it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


class VerifierErrorStop(RuntimeError):
    """A step's verifications were (almost) all verifier errors: the rewards say nothing about the
    policy, so the run stops instead of training on them. ``saved_step`` is the checkpoint written
    before stopping (None until it is)."""

    def __init__(self, step: int, count: int, scored: int, first: str | None, threshold: float) -> None:
        self.step, self.count, self.scored, self.first, self.threshold = step, count, scored, first, threshold
        self.saved_step: int | None = None
        self.checkpoint: str | None = None
        super().__init__(self._message())

    def _message(self) -> str:
        text = (
            f"step {self.step}: {self.count} of {self.scored} verifications were verifier errors "
            f"(verifier_error_stop={self.threshold:g}); first: {self.first}"
        )
        if self.saved_step is not None:
            text += f"; checkpoint of step {self.saved_step} saved in {self.checkpoint}; fix the verifier and continue with --resume"
        return text

    def saved(self, step: int, checkpoint: str) -> None:
        self.saved_step, self.checkpoint = step, checkpoint
        self.args = (self._message(),)

    def __str__(self) -> str:
        return self._message()


@contextlib.contextmanager
def handle_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGTERM and SIGINT handled by ``handler`` (in the main thread only, where Python delivers
    signals), the previous handlers restored afterwards."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
