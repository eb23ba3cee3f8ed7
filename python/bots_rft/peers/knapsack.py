"""Moved to :mod:`bots_rft.selector.peers.knapsack`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.peers import knapsack as _moved
from ..selector.peers.knapsack import *  # noqa: F403

sys.modules[__name__] = _moved
