"""Warnings a logger of ours gives, captured whatever another test's framework did to logging in
the same process: it may replace the root logger's handlers (which caplog relies on), raise the
root's level, disable logging globally (``logging.disable``) or reload logging so that
``getLogger()`` returns a new object (seen after the AReaL tests). So the handler goes on the
logger object the code logs to, at WARNING whatever the root's level, and the old state is
restored afterwards."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def warnings_of(log: logging.Logger) -> Iterator[list[str]]:
    """The messages ``log`` gives at WARNING or above inside the block."""
    handler = Records()
    level, disabled = log.level, logging.root.manager.disable
    log.setLevel(logging.WARNING)
    logging.disable(logging.NOTSET)
    log.addHandler(handler)
    try:
        yield handler.messages
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        logging.disable(disabled)
