"""Moved to :mod:`bots_rft.selector.registry`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from .selector import registry as _moved
from .selector.registry import *  # noqa: F403

sys.modules[__name__] = _moved
