"""Moved to :mod:`bots_rft.selector.backends._triton_kernels`; this path re-exports it for code written against it."""

# temporary: removed when the move lands
from __future__ import annotations

import sys

from ..selector.backends import _triton_kernels as _moved
from ..selector.backends._triton_kernels import *  # noqa: F403

sys.modules[__name__] = _moved
