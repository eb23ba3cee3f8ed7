"""Moved to :mod:`bots_rft.selector.bots.params`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.bots import params as _moved
from ..selector.bots.params import *  # noqa: F403

sys.modules[__name__] = _moved
