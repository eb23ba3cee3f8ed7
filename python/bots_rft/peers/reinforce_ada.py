"""Moved to :mod:`bots_rft.selector.peers.reinforce_ada`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.peers import reinforce_ada as _moved
from ..selector.peers.reinforce_ada import *  # noqa: F403

sys.modules[__name__] = _moved
