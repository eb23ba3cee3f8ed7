"""Moved to :mod:`bots_rft.selector.bots.stream`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.bots import stream as _moved
from ..selector.bots.stream import *  # noqa: F403

sys.modules[__name__] = _moved
