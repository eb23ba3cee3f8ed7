"""Moved to :mod:`bots_rft.selector.backends.torch`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.backends import torch as _moved
from ..selector.backends.torch import *  # noqa: F403

sys.modules[__name__] = _moved
