"""Moved to :mod:`bots_rft.selector.peers.speed`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.peers import speed as _moved
from ..selector.peers.speed import *  # noqa: F403

sys.modules[__name__] = _moved
