"""Moved to :mod:`bots_rft.selector.guard`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import guard as _moved
from .selector.guard import *  # noqa: F403

sys.modules[__name__] = _moved
