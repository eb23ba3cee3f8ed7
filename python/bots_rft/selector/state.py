"""Moved to :mod:`bots_rft.selector.bots.state`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.bots import state as _moved
from ..selector.bots.state import *  # noqa: F403

sys.modules[__name__] = _moved
