"""Moved to :mod:`bots_rft.selector.peers`; this package re-exports it (and each of its modules) for code
written against the old path."""

# temporary: removed when the move lands
from __future__ import annotations

from ..selector.peers import *  # noqa: F403
