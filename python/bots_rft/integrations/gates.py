"""Version windows and seam checks for the trainer adapters.

Each adapter declares the releases of its framework it was tested against (a lower and an upper
bound, both tested) and the framework methods it overrides or wraps, private ones included, each
with the parameters it expects and a fingerprint of the method's source at the tested release.
:func:`check_framework` compares them with what is installed:

- a method whose parameters differ from the expected ones raises :class:`IntegrationError`
  (whatever the version: the adapter would call it wrongly);
- outside the window, a method whose source differs from the tested one raises it too (its
  behaviour may have changed under the same name), and a version whose methods are all unchanged
  runs with one warning;
- ``BOTS_ALLOW_UNTESTED=1`` in the environment turns each refusal into a warning that names what
  was bypassed.

A method whose source cannot be read (no source files installed) is checked by parameters only.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import logging
import os
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ..errors import IntegrationError

__all__ = ["Seam", "Window", "check_framework", "installed_version", "signature_of", "fingerprint_of", "ALLOW_ENV"]

#: Set to 1 to run an adapter on an untested framework release whose seams changed.
ALLOW_ENV = "BOTS_ALLOW_UNTESTED"

logger = logging.getLogger("bots_rft.integrations")


@dataclass(frozen=True)
class Seam:
    """A framework method an adapter overrides, wraps or calls: ``owner.name`` (``owner`` a class,
    or a module for a module-level function), called with ``params`` (as :func:`signature_of`
    writes them), whose source hashed to ``fingerprint`` at the tested release (None: not
    fingerprinted)."""

    owner: type | ModuleType
    name: str
    params: str
    fingerprint: str | None = None

    @property
    def label(self) -> str:
        return f"{self.owner.__name__}.{self.name}"


@dataclass(frozen=True)
class Window:
    """The releases an adapter was tested with: ``low`` <= version <= ``high``."""

    framework: str  # the distribution name, as importlib.metadata knows it
    low: str
    high: str
    adapter: str  # the module that declares it, for messages

    def contains(self, version: str) -> bool:
        v = _release(version)
        return v is not None and _release(self.low) <= v <= _release(self.high)  # type: ignore[operator]

    def __str__(self) -> str:
        return self.low if self.low == self.high else f"{self.low} to {self.high}"


def _release(version: str) -> tuple[int, ...] | None:
    """The numeric release of a version string ("0.9.1" -> (0, 9, 1)); a pre- or dev release
    ("0.10.0rc1") has none, so it is never inside a window."""
    match = re.fullmatch(r"(\d+(?:\.\d+)*)(\+.*)?", version.strip())
    return tuple(int(p) for p in match.group(1).split(".")) if match else None


def installed_version(distribution: str) -> str:
    """The installed version of ``distribution`` (``"unknown"`` when its metadata is missing)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def signature_of(func: Callable[..., Any]) -> str:
    """Parameter names and kinds, without annotations: ``(self, inputs, *, flag=)``."""
    parts: list[str] = []
    star_seen = False
    for p in inspect.signature(func).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_seen = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_seen:
            parts.append("*")
            star_seen = True
        parts.append(p.name + ("=" if p.default is not p.empty else ""))
    return "(" + ", ".join(parts) + ")"


def fingerprint_of(func: Callable[..., Any]) -> str | None:
    """The first 16 hex digits of the SHA-256 of the function's source (dedented), or None when
    the source cannot be read."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        return None
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def check_framework(window: Window, seams: Sequence[Seam], version: str | None = None) -> list[str]:
    """Check the installed framework against ``window`` and ``seams`` (see the module doc).
    Returns the problems found and bypassed under ``BOTS_ALLOW_UNTESTED=1`` (empty otherwise);
    raises :class:`IntegrationError` naming the framework, version and method."""
    version = installed_version(window.framework) if version is None else version
    inside = window.contains(version)
    problems: list[str] = []
    for seam in seams:
        func = inspect.getattr_static(seam.owner, seam.name, None)
        func = getattr(func, "__func__", func)  # staticmethod / classmethod
        if func is None or not callable(func):
            problems.append(f"{seam.label} is missing")
            continue
        try:
            params = signature_of(func)
        except (TypeError, ValueError):
            params = "(unreadable)"
        if params != seam.params:
            problems.append(f"{seam.label}{params} does not have the parameters {seam.params} the adapter calls")
            continue
        if not inside and seam.fingerprint is not None:
            found = fingerprint_of(func)
            if found is not None and found != seam.fingerprint:
                problems.append(f"{seam.label}'s source changed since {window.framework} {window.high}")
    where = f"{window.framework} {version}"
    tested = f"{window.adapter} was tested with {window.framework} {window}"
    if problems:
        message = f"{where}: " + "; ".join(problems) + f". {tested}"
        if os.environ.get(ALLOW_ENV, "") == "1":
            logger.warning(f"{ALLOW_ENV}=1: running anyway; bypassed: {message}")
            return problems
        raise IntegrationError(
            f"{message}; install a tested release, or set {ALLOW_ENV}=1 to run anyway", framework=window.framework
        )
    if not inside:
        checked = ", ".join(s.label for s in seams) or "none"
        logger.warning(
            f"{where} is outside the tested window ({tested}); the methods it relies on are unchanged ({checked})"
        )
    return problems
