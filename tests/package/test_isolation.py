"""The test suite's own isolation (tests/conftest.py): process-wide state a test changes, as the
frameworks under test do (a handler on the root logger, loggers disabled by ``dictConfig``,
logging's root and manager replaced as AReaL's ``getLogger`` does, SIGINT ignored by C code or
blocked), is back as it was for the next test. The two tests run in this order in one process
(one file runs on one worker)."""

from __future__ import annotations

import ctypes
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
    # AReaL's getLogger: a new root and manager, so a logger made now hangs under the new root.
    logging.Logger.root = logging.RootLogger(logging.WARNING)
    logging.Logger.manager = logging.Manager(logging.Logger.root)
    made_after = logging.getLogger("bots_rft.isolation_probe")
    assert made_after.parent is not logging.root
    # SIGINT ignored below Python (as C code does: Python's own record of the handler is unchanged).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(int(signal.SIGINT), ctypes.c_void_p(1))  # SIG_IGN
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])


def test_the_next_test_finds_the_state_as_it_was() -> None:
    root = logging.getLogger()
    assert [h for h in root.handlers if not type(h).__module__.startswith("_pytest")] == _STATE["root_handlers"]
    assert logging.getLogger("bots_rft.rewards.scorer").disabled == _STATE["disabled"] is False
    assert signal.getsignal(signal.SIGINT) == _STATE["sigint"]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == _STATE["blocked"]
    # The logger made under the replacement is in logging's own tree: pytest's capture sees it.
    assert logging.Logger.manager is logging.root.manager
    probe: logging.Logger | None = logging.getLogger("bots_rft.isolation_probe")
    while probe is not None and probe is not logging.root:
        probe = probe.parent
    assert probe is logging.root and logging.Logger.root is logging.root
    # A child started now can be interrupted.
    code = "import signal, sys; sys.exit(0 if signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, []) and signal.getsignal(signal.SIGINT) is signal.default_int_handler else 1)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
