from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# The torch backend's Triton kernels are tested on CPU under Triton's interpreter, which Triton
# reads once, when it is first imported (any test may import it first, through torch or a trainer).
# On a host without an NVIDIA device the interpreter is the only way they can run, so it is set for
# the whole session there; a GPU host compiles them as usual.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(scope="module")
def toy_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The trainer tests' toy pool (12 tasks, 3 held out; ``bots_rft.train.toy``), once per module."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft.train.toy import write_toy_pool

    train_path, _ = write_toy_pool(tmp_path_factory.mktemp("toy"), num_tasks=12, eval_tasks=3)
    return train_path


@pytest.fixture(scope="module", autouse=True)
def _no_ray_left_running_after_a_module() -> Iterator[None]:
    """A module that starts Ray and leaves it running (the pinned selector results do, starting it
    only when needed) would make the next module's own ``ray.init`` fail; each module starts from
    no Ray."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _pytest_handler(handler: logging.Handler) -> bool:
    return type(handler).__module__.startswith("_pytest")


# logging's own root and manager, as this process started with them. AReaL's ``getLogger``
# replaces ``logging.Logger.root`` and ``logging.Logger.manager`` on every call (and it is called
# when AReaL's modules are imported, at collection): a logger made after that hangs under AReaL's
# root, which pytest's capture (on logging's root) never sees.
_ROOT, _MANAGER = logging.root, logging.Logger.manager


def _adopt_foreign_loggers() -> None:
    """Put logging's own root and manager back, and move the loggers made under a replacement
    into logging's tree, under their real parents."""
    foreign = logging.Logger.manager
    if foreign is _MANAGER:
        return
    logging.Logger.root, logging.Logger.manager = _ROOT, _MANAGER
    for name, lg in list(foreign.loggerDict.items()):
        if not isinstance(lg, logging.Logger) or isinstance(_MANAGER.loggerDict.get(name), logging.Logger):
            continue
        lg.manager = _MANAGER
        placeholder = _MANAGER.loggerDict.get(name)
        _MANAGER.loggerDict[name] = lg
        if isinstance(placeholder, logging.PlaceHolder):
            _MANAGER._fixupChildren(placeholder, lg)  # type: ignore[attr-defined]
        _MANAGER._fixupParents(lg)  # type: ignore[attr-defined]
    _MANAGER._clear_cache()


def _signals_deliverable() -> None:
    """SIGINT and SIGTERM as a shell leaves them for a command: handled by this process's Python
    handlers (set again at the OS level, where C code may have set them to be ignored) and not
    blocked. Both an ignored and a blocked signal are inherited by every child process."""
    for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
        handler = signal.getsignal(sig)
        signal.signal(sig, default if handler is None else handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])


@pytest.fixture(autouse=True)
def _process_state_restored() -> Iterator[None]:
    """The frameworks under test change process-wide state that outlives their tests: verl adds a
    handler to the root logger when imported, AReaL replaces logging's root and manager, others
    call ``logging.config.dictConfig`` (which disables every existing logger, the package's
    included) or set levels, and some ignore or block SIGINT (which every child process then
    inherits, so a command started later cannot be interrupted). Each test starts from a clean
    state and leaves the logging configuration as it found it, so that no test's outcome depends
    on which tests ran before it in the same process (pytest's own capture handlers are left to
    pytest)."""
    _adopt_foreign_loggers()
    _signals_deliverable()
    root = logging.getLogger()
    loggers = {
        name: (lg.level, lg.disabled, lg.propagate, list(lg.handlers))
        for name, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    root_state = (root.level, root.disabled, [h for h in root.handlers if not _pytest_handler(h)])
    disabled_below = logging.root.manager.disable
    yield
    _adopt_foreign_loggers()
    _signals_deliverable()
    logging.disable(disabled_below)
    root.setLevel(root_state[0])
    root.disabled = root_state[1]
    root.handlers[:] = [*root_state[2], *(h for h in root.handlers if _pytest_handler(h))]
    for name, lg in logging.Logger.manager.loggerDict.items():
        if not isinstance(lg, logging.Logger):
            continue
        if name in loggers:
            lg.level, lg.disabled, lg.propagate, handlers_before = loggers[name]
            lg.handlers[:] = handlers_before
        else:  # made during the test: it keeps its own configuration, but is not left switched off
            lg.disabled = False
    # Levels were assigned directly (setLevel would clear every logger's cache once per logger).
    logging.Logger.manager._clear_cache()
