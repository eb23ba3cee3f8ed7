"""Moved to :mod:`bots_rft.selector.protocol`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import protocol as _moved
from .selector.protocol import *  # noqa: F403

sys.modules[__name__] = _moved
