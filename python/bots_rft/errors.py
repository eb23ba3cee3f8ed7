"""The package's exception hierarchy.

Every error raised on bad input is a :class:`BotsError`, and also a ``ValueError`` or ``TypeError``
so that generic handlers keep working. Messages name the offending argument and value.
"""

from __future__ import annotations

import errno

__all__ = [
    "BotsError",
    "InvalidArgumentError",
    "InvalidTypeError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConfigError",
    "DataError",
    "IntegrationError",
]


class BotsError(Exception):
    """Base class of every exception bots-rft raises on purpose."""


class InvalidArgumentError(BotsError, ValueError):
    """An argument has the right type but a value outside its domain."""

    def __init__(self, message: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


class InvalidTypeError(BotsError, TypeError):
    """An argument has the wrong type, dtype or shape kind."""

    def __init__(self, message: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


class CheckpointError(BotsError, ValueError):
    """A checkpoint is truncated, corrupt, of an unknown format or from a newer version."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint at the path given: a :class:`CheckpointError` and also a
    ``FileNotFoundError``, so the usual resume pattern (``except FileNotFoundError:`` start
    fresh) works. ``filename`` is the path."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOENT
        self.filename = path

    def __str__(self) -> str:  # the message, not OSError's "[Errno 2] ..." layout
        return str(self.args[0])


class ConfigError(BotsError, ValueError):
    """A configuration file or option is invalid."""


class DataError(BotsError, ValueError):
    """A task pool is malformed: missing columns, bad ids, pass rates outside [0, 1]."""


class IntegrationError(ConfigError):
    """The installed trainer framework does not match what an integration was built for: a
    release outside the tested window whose overridden methods changed, or a method with other
    parameters. The message names the framework, its version and the method."""

    def __init__(self, message: str, framework: str | None = None) -> None:
        super().__init__(message)
        self.framework = framework


class UnsupportedByBackendError(BotsError, NotImplementedError):
    """A feature of :class:`~bots_rft.BOTS` that a backend does not implement (``feature`` names
    it). Raised when the feature is asked for, never silently ignored. Also importable as
    ``bots_rft.selector.backends.UnsupportedByBackendError``."""

    def __init__(self, feature: str, backend: str, *, instead: str = "use backend='rust'") -> None:
        super().__init__(f"{feature}: not supported by the {backend} backend ({instead})")
        self.feature = feature
        self.backend = backend
