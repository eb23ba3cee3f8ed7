"""Alternative implementations of the :class:`~bots_rft.BOTS` selector.

``BOTS(..., backend="torch", device="cuda")`` builds :class:`bots_rft.backends.torch.TorchBOTS`,
which keeps the posterior in torch tensors on a device (``device="cpu"`` runs the same code on
CPU). It is imported on demand, so this package does not import torch.
"""

from __future__ import annotations

from ..errors import BotsError

__all__ = ["UnsupportedByBackendError"]


class UnsupportedByBackendError(BotsError, NotImplementedError):
    """A feature of :class:`~bots_rft.BOTS` that a backend does not implement (``feature`` names
    it). Raised when the feature is asked for, never silently ignored."""

    def __init__(self, feature: str, backend: str) -> None:
        super().__init__(f"{feature}: not supported by the {backend} backend (use backend='rust')")
        self.feature = feature
        self.backend = backend
