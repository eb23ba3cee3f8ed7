"""The implementations of the :class:`~bots_rft.BOTS` selector, each behind one contract
(:class:`bots_rft.PosteriorSelector`):

- ``rust`` (:mod:`bots_rft.selector.backends.rust`, the default): the posterior in numpy arrays,
  updated and ranked by the Rust core;
- ``torch`` (:mod:`bots_rft.selector.backends.torch`): ``BOTS(..., backend="torch",
  device="cuda")`` builds a :class:`~bots_rft.selector.backends.torch.TorchBOTS`, which keeps the
  posterior in torch tensors on a device (``device="cpu"`` runs the same code on CPU). It is
  imported only when asked for, so importing this package does not import torch;
- ``sharded`` (:mod:`bots_rft.selector.backends.sharded`):
  :class:`~bots_rft.selector.backends.sharded.ShardedBOTS`, a pool spread over Ray actors.

Importing this package registers the ``rust`` and ``torch`` backends with ``BOTS`` (``bots_rft``
imports it when it loads).
"""

from __future__ import annotations

import importlib
from typing import cast

from ...errors import UnsupportedByBackendError
from ..bots.bots import BOTS, register_backend
from .rust import RustPosterior

__all__ = ["UnsupportedByBackendError", "RustPosterior"]


def _torch_selector() -> type[BOTS]:
    # By name, at the first use: importing torch takes seconds and most runs never need it.
    module = importlib.import_module("bots_rft.selector.backends.torch")
    return cast(type[BOTS], module.TorchBOTS)


register_backend("torch", selector=_torch_selector, takes_device=True)
