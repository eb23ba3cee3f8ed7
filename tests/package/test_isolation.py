"""The test suite's own isolation (tests/conftest.py): process-wide state a test changes, as the
frameworks under test do (a handler on the root logger, loggers disabled by ``dictConfig``,
SIGINT ignored or blocked), is back as it was for the next test. The two tests run in this order
in one process (one file runs on one worker)."""

from __future__ import annotations

import logging
import logging.config
import signal
import subprocess
import sys

_STATE: dict[str, object] = {}


def test_a_framework_like_test_changes_process_wide_state() -> None:
    root = logging.getLogger()
    package = logging.getLogger("bots_rft.rewards.scorer")
    _STATE.update(
        root_handlers=[h for h in root.handlers if not type(h).__module__.startswith("_pytest")],
        disabled=package.disabled,
        sigint=signal.getsignal(signal.SIGINT),
        blocked=signal.pthread_sigmask(signal.SIG_BLOCK, []),
    )
    root.addHandler(logging.StreamHandler())
    logging.config.dictConfig({"version": 1})  # disables every logger that exists, the package's too
    assert package.disabled
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])


def test_the_next_test_finds_the_state_as_it_was() -> None:
    root = logging.getLogger()
    assert [h for h in root.handlers if not type(h).__module__.startswith("_pytest")] == _STATE["root_handlers"]
    assert logging.getLogger("bots_rft.rewards.scorer").disabled == _STATE["disabled"] is False
    assert signal.getsignal(signal.SIGINT) == _STATE["sigint"]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == _STATE["blocked"]
    # A child started now can be interrupted.
    code = "import signal, sys; sys.exit(0 if signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, []) and signal.getsignal(signal.SIGINT) is signal.default_int_handler else 1)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
