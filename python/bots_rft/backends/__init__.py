"""Moved to :mod:`bots_rft.selector.backends`; this package re-exports it (and each of its modules) for code
written against the old path."""

# temporary: removed when the move lands
from __future__ import annotations

from ..selector.backends import *  # noqa: F403
