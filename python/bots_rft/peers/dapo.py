"""Moved to :mod:`bots_rft.selector.peers.dapo`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.peers import dapo as _moved
from ..selector.peers.dapo import *  # noqa: F403

sys.modules[__name__] = _moved
