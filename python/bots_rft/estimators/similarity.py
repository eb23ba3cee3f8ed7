"""Implicit evidence spread from the rolled-out tasks to similar ones (DOTS-style).

:class:`Similarity` needs no reference model: a user-supplied embedding per task (of the prompt,
say) and a top-k neighbour kernel carry each step's observed success rates to the tasks most like
the ones rolled out. See the class docstring for the rule and its cost.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _core
from .._portable import exp as portable_exp
from .._validation import FloatArray, IntArray, as_floats, as_int, as_real
from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from .base import Estimator, StepEvidence
from .features import DEFAULT_CHUNK, embedding_matrix

__all__ = ["Similarity", "top_k_neighbours"]

KIND = "similarity"


def top_k_neighbours(
    embeddings: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    k: int,
    exclude: IntArray,
    chunk: int = DEFAULT_CHUNK,
) -> tuple[IntArray, IntArray, npt.NDArray[np.float32]]:
    """For each query row, its ``k`` pool rows of largest dot product, ``exclude`` left out.

    Returns flat (query, task, similarity) arrays, ordered by query, then similarity descending,
    then task ascending (ties go to the lower task id); a query has fewer than ``k`` entries only
    when the pool outside ``exclude`` has fewer rows. The pool is scored in chunks of ``chunk``
    rows; after the first, a chunk only contributes entries above each query's current k-th
    similarity, so past the matrix product the work is proportional to what enters a top-k list.
    """
    num_q = queries.shape[0]
    q_rows: IntArray = np.empty(0, np.int64)
    tasks: IntArray = np.empty(0, np.int64)
    sims: npt.NDArray[np.float32] = np.empty(0, np.float32)
    if num_q == 0 or k == 0:
        return q_rows, tasks, sims
    threshold = np.full(num_q, -np.inf, dtype=np.float32)
    exclude = np.sort(exclude)
    n = embeddings.shape[0]
    # A small first chunk sets every query's threshold cheaply (its partition is the one step
    # whose cost grows with the chunk); later chunks only compare against the thresholds.
    first = min(chunk, max(4 * k, 4096))
    bounds = [0, *range(first, n, chunk), n] if n > first else [0, n]
    for start, stop in zip(bounds[:-1], bounds[1:]):
        scores = embeddings[start:stop] @ queries.T  # [C, Q] float32
        lo, hi = np.searchsorted(exclude, [start, stop])
        scores[exclude[lo:hi] - start, :] = -np.inf
        if not np.isfinite(threshold).all():
            # Some query has fewer than k entries yet: everything at or above the chunk's own
            # k-th best enters (ties included, so the merge below applies the tie rule).
            kk = min(k, stop - start)
            kth = np.partition(scores, stop - start - kk, axis=0)[stop - start - kk]
            floor = np.where(np.isfinite(threshold), threshold, kth)
            enter = (scores >= floor[None, :]) & (scores > -np.inf)
        else:
            # Strictly above: an equal similarity in a later chunk has a higher task id and loses the tie.
            enter = scores > threshold[None, :]
        # Few rows enter once the thresholds settle: find them first, then their columns.
        hit = np.flatnonzero(enter.any(axis=1))
        if hit.size == 0:
            continue
        sub, cols = np.nonzero(enter[hit])
        rows = hit[sub]
        q_rows = np.concatenate([q_rows, cols.astype(np.int64)])
        tasks = np.concatenate([tasks, rows.astype(np.int64) + start])
        sims = np.concatenate([sims, scores[rows, cols]])
        order = np.lexsort((tasks, -sims, q_rows))
        q_rows, tasks, sims = q_rows[order], tasks[order], sims[order]
        group_start = np.searchsorted(q_rows, np.arange(num_q))
        rank = np.arange(q_rows.size) - group_start[q_rows]
        keep = rank < k
        q_rows, tasks, sims, rank = q_rows[keep], tasks[keep], sims[keep], rank[keep]
        full = np.bincount(q_rows, minlength=num_q) == k
        kth_entry = np.flatnonzero(rank == k - 1)
        threshold[q_rows[kth_entry]] = sims[kth_entry]
        threshold[~full] = -np.inf
    return q_rows, tasks, sims


class Similarity(Estimator):
    """p̃ spread from the rolled-out tasks to their nearest neighbours in an embedding space.

    ``embeddings`` is one vector per task ([N, d], stored as float32; with ``normalize`` each row
    is scaled to unit length, so similarity is cosine similarity, else it is the raw dot product).

    Per update, each rolled-out task b with observed rate y_b = S_b/T_b finds its ``k`` most
    similar tasks outside the batch (similarity s_bj = e_b·e_j; ties to the lower task id), and
    keeps those with s_bj >= ``min_similarity`` (when given). A task j that some batch task
    reached gets the kernel-weighted average of the rates that reached it,

        p̃_j = Σ_b κ_bj·y_b / Σ_b κ_bj,   κ_bj = exp((s_bj − max_b' s_b'j) / ``temperature``),

    (a softmax over the similarities of the batch tasks that reached j, as DOTS' attention over its
    reference set); every other task gets no prediction (NaN), so implicit evidence stays local:
    at most B·k tasks get a prediction per step. The estimator is memoryless, as the
    interpolation's prediction is: the posterior (its λ and ρ) is what accumulates evidence over
    steps; p̃ is the latest step's. The rolled-out tasks' own p̃ would be unused (their explicit
    evidence takes its place), which is why they are not neighbour candidates.

    Cost per update: one [B, d] × [d, N] float32 product, chunked over the pool, then work
    proportional to the candidates that enter a top-k list, so O(B·N·d) in all and O(B·k + N)
    memory beyond the embeddings. docs/estimators.md has the measured time at N = 10^6, d = 64,
    B = 256. A checkpoint stores the embeddings (N·d·4 bytes) with the last step's sparse p̃.
    """

    rebuilt_from_state = True

    def __init__(
        self,
        embeddings: npt.ArrayLike,
        *,
        k: int = 16,
        temperature: float = 0.1,
        min_similarity: float | None = None,
        normalize: bool = True,
        chunk_size: int = DEFAULT_CHUNK,
    ) -> None:
        if not isinstance(normalize, (bool, np.bool_)):
            raise InvalidTypeError(f"normalize: must be a bool, got {normalize!r}", "normalize")
        self._k = as_int(k, "k", minimum=1)
        t = as_real(temperature, "temperature")
        if not (np.isfinite(t) and t > 0.0):
            raise InvalidArgumentError(f"temperature: must be finite and > 0, got {t}", "temperature")
        self._temperature = t
        if min_similarity is None:
            self._min_similarity: float | None = None
        else:
            s = as_real(min_similarity, "min_similarity")
            if not np.isfinite(s):
                raise InvalidArgumentError(f"min_similarity: must be finite or None, got {s}", "min_similarity")
            self._min_similarity = s
        self._chunk = as_int(chunk_size, "chunk_size", minimum=1)
        self._normalize = bool(normalize)
        self._embeddings = embedding_matrix(embeddings, self._normalize)
        # The last committed step's p̃, sparse: the tasks reached and their predictions.
        self._last: tuple[IntArray, FloatArray] | None = None

    # ------------------------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int(self._embeddings.shape[0])

    def __repr__(self) -> str:
        return (
            f"Similarity(num_tasks={len(self)}, dim={self._embeddings.shape[1]}, k={self._k}, "
            f"temperature={self._temperature}, min_similarity={self._min_similarity})"
        )

    @property
    def k(self) -> int:
        return self._k

    @property
    def temperature(self) -> float:
        return self._temperature

    @property
    def min_similarity(self) -> float | None:
        return self._min_similarity

    @property
    def embeddings(self) -> npt.NDArray[np.float32]:
        """The embeddings as stored (normalised when ``normalize``), read-only."""
        return self._embeddings

    # ------------------------------------------------------------------------------- spreading
    def spread(self, batch: _core.Batch) -> tuple[IntArray, FloatArray]:
        """The tasks this batch reaches and their p̃ (ascending task ids); changes nothing."""
        ids = np.asarray(batch.ids, dtype=np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            bad = int(ids[(ids < 0) | (ids >= len(self))][0])
            raise InvalidArgumentError(f"task_ids: {bad} is out of range [0, {len(self)})", "task_ids")
        rates = np.asarray(batch.successes, dtype=np.float64) / np.asarray(batch.trials, dtype=np.float64)
        src, tasks, sims = top_k_neighbours(self._embeddings, self._embeddings[ids], self._k, ids, self._chunk)
        if self._min_similarity is not None:
            near = sims >= self._min_similarity
            src, tasks, sims = src[near], tasks[near], sims[near]
        if tasks.size == 0:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        reached, inverse = np.unique(tasks, return_inverse=True)
        s = sims.astype(np.float64)
        best = np.full(reached.size, -np.inf)
        np.maximum.at(best, inverse, s)
        # The largest term of each task is 1. exp from IEEE-exact operations (numpy's differs between
        # CPUs in the last bits, and p̃ reaches the posterior).
        kernel = portable_exp((s - best[inverse]) / self._temperature)
        num = np.bincount(inverse, weights=kernel * rates[src], minlength=reached.size)
        den = np.bincount(inverse, weights=kernel, minlength=reached.size)
        return reached.astype(np.int64), np.clip(num / den, 0.0, 1.0)

    def _dense(self, sparse: tuple[IntArray, FloatArray]) -> FloatArray:
        out = np.full(len(self), np.nan)
        out[sparse[0]] = sparse[1]
        return out

    # ------------------------------------------------------------------------------- Estimator
    def observe(self, batch: _core.Batch) -> StepEvidence:
        sparse = self.spread(batch)
        if sparse[0].size == 0:
            return StepEvidence({}, sparse)
        return StepEvidence({"predicted": self._dense(sparse)}, sparse)

    def commit(self, step: StepEvidence) -> None:
        state = step.next_state
        self._last = None if state is None else (np.array(state[0], np.int64), np.array(state[1], np.float64))

    def predict_all(self) -> FloatArray | None:
        return None if self._last is None else self._dense(self._last)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "embeddings": self._embeddings.copy(),
            "normalize": self._normalize,
            "k": self._k,
            "temperature": self._temperature,
            "min_similarity": self._min_similarity,
            "chunk_size": self._chunk,
            "last_tasks": None if self._last is None else self._last[0].copy(),
            "last_predicted": None if self._last is None else self._last[1].copy(),
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Similarity:
        if not isinstance(state, dict) or state.get("kind") != KIND:
            raise CheckpointError(f"evidence: not a {KIND} state: {state!r:.80}")
        try:
            # The stored rows are already normalised: normalising again could move their last bit.
            est = cls(
                np.asarray(state["embeddings"]),
                k=state["k"],
                temperature=state["temperature"],
                min_similarity=state["min_similarity"],
                normalize=False,
                chunk_size=state["chunk_size"],
            )
            est._normalize = bool(state["normalize"])
            tasks, pred = state.get("last_tasks"), state.get("last_predicted")
            if (tasks is None) != (pred is None):
                raise ValueError("last_tasks and last_predicted must both be present or both absent")
            if tasks is not None:
                t = np.asarray(tasks, dtype=np.int64)
                p = as_floats(pred, "last_predicted", len(t))
                if t.ndim != 1 or (t.size and (t.min() < 0 or t.max() >= len(est))) or not ((p >= 0) & (p <= 1)).all():
                    raise ValueError("last_tasks / last_predicted out of range")
                est._last = (t.copy(), np.array(p, copy=True))
        except CheckpointError:
            raise
        except (KeyError, ValueError, TypeError) as exc:
            raise CheckpointError(f"evidence: malformed {KIND} state ({type(exc).__name__}: {exc})") from None
        return est
