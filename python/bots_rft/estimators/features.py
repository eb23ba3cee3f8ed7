"""The per-task feature matrix the embedding estimators (:class:`~.similarity.Similarity`,
:class:`~.regression.EmbeddingRegression`) take: one validated float32 row per task."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import InvalidArgumentError, InvalidTypeError

__all__ = ["DEFAULT_CHUNK", "embedding_matrix"]

#: Pool rows handled per block: validated, normalised, or scored by one matrix product (a
#: [chunk, B] float32 block is 64 MiB at B = 256).
DEFAULT_CHUNK = 65_536


def embedding_matrix(embeddings: Any, normalize: bool) -> npt.NDArray[np.float32]:
    """A private, read-only float32 [N, d] copy, validated (and normalised) a chunk of rows at a
    time, so a large float32 input never has a float64 copy made of it whole."""
    try:
        arr = np.asarray(embeddings)
    except ValueError as exc:  # ragged nested sequences
        raise InvalidTypeError(f"embeddings: must be a numeric [N, d] array ({exc})", "embeddings") from None
    if arr.dtype.kind not in "biuf" or arr.dtype == np.bool_:
        raise InvalidTypeError(f"embeddings: must be a real-valued array, got dtype {arr.dtype}", "embeddings")
    if arr.ndim != 2:
        raise InvalidTypeError(f"embeddings: must be 2-D [N, d], got shape {arr.shape}", "embeddings")
    n, d = arr.shape
    if n == 0 or d == 0:
        raise InvalidArgumentError(
            f"embeddings: needs at least one task and one dimension, got shape {arr.shape}", "embeddings"
        )
    out = np.empty((n, d), dtype=np.float32)
    for start in range(0, n, DEFAULT_CHUNK):
        rows = arr[start : start + DEFAULT_CHUNK].astype(np.float64)
        finite = np.isfinite(rows).all(axis=1)
        if not finite.all():
            i = start + int(np.flatnonzero(~finite)[0])
            raise InvalidArgumentError(f"embeddings: must be finite, got a non-finite value in row {i}", "embeddings")
        if normalize:
            norms = np.sqrt(np.einsum("ij,ij->i", rows, rows))
            if (norms == 0.0).any():
                i = start + int(np.flatnonzero(norms == 0.0)[0])
                raise InvalidArgumentError(
                    f"embeddings: row {i} is zero and has no direction (normalize=True), got norm 0.0", "embeddings"
                )
            rows /= norms[:, None]
        with np.errstate(over="ignore"):
            block = rows.astype(np.float32)
        fits = np.isfinite(block).all(axis=1)  # a value beyond float32's range becomes inf
        if not fits.all():
            i = start + int(np.flatnonzero(~fits)[0])
            raise InvalidArgumentError(
                f"embeddings: row {i} does not fit float32 (a value beyond ±3.4e38)", "embeddings"
            )
        out[start : start + DEFAULT_CHUNK] = block
    out.flags.writeable = False
    return out
