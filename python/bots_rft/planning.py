"""Moved to :mod:`bots_rft.selector.plan`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import plan as _moved
from .selector.plan import *  # noqa: F403

sys.modules[__name__] = _moved
