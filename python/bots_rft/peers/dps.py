"""Moved to :mod:`bots_rft.selector.peers.dps`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.peers import dps as _moved
from ..selector.peers.dps import *  # noqa: F403

sys.modules[__name__] = _moved
