"""Moved to :mod:`bots_rft.selector.method_table`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import method_table as _moved
from .selector.method_table import *  # noqa: F403

sys.modules[__name__] = _moved
