"""Moved to :mod:`bots_rft.selector.static`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import static as _moved
from .selector.static import *  # noqa: F403

sys.modules[__name__] = _moved
