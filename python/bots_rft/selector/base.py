"""Moved to :mod:`bots_rft.selector.bots.base`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.bots import base as _moved
from ..selector.bots.base import *  # noqa: F403

sys.modules[__name__] = _moved
