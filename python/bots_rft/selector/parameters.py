"""Deprecated home of the parameter catalogue, kept so that method files written against 0.1
still import: the catalogue is :mod:`bots_rft.parameters` now (at the bottom of the package, so
that the estimators read it too). Every name resolves to the catalogue's own object, with a
:class:`DeprecationWarning` naming the new import."""

from __future__ import annotations

import warnings
from typing import Any

from .. import parameters as _catalogue

__all__ = list(_catalogue.__all__)


def __getattr__(name: str) -> Any:
    if name not in _catalogue.__all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"bots_rft.selector.parameters is deprecated; import {name} from bots_rft.parameters",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(_catalogue, name)
