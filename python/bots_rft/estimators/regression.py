"""Implicit evidence learnt from the run's own rollouts: an online Bayesian logistic regression of
the observed success rates on task embeddings (``bots-embed``).

:class:`EmbeddingRegression` needs no reference model. Each step it fits the rolled-out tasks'
successes out of their trials on those tasks' embeddings, keeps the fit as a Gaussian posterior
over the weights (forgetting old steps at the rate λ, as the Beta posteriors do), and predicts
every task of the pool from it, so a task never rolled out gets a prediction from the tasks that
resemble it. See the class docstring for the rule and its cost.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import _core
from .._portable import exp as portable_exp
from .._validation import FloatArray, as_int
from ..errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from ..parameters import LAM, PRIOR_PRECISION
from .base import Estimator, StepEvidence
from .features import DEFAULT_CHUNK, embedding_matrix

__all__ = ["EmbeddingRegression", "DEFAULT_PRIOR_PRECISION", "DEFAULT_FORGETTING"]

KIND = "embedding-regression"

#: The weights' prior precision (the catalogue's): on standardised features scaled to unit mean
#: square norm, a task's logit a priori has standard deviation 1/sqrt(0.25) = 2, so pass rates
#: between about 0.02 and 0.98 are all plausible before any rollout.
DEFAULT_PRIOR_PRECISION: float = PRIOR_PRECISION.default
#: The forgetting rate when none is given: λ's default (a BOTS selector passes its own λ).
DEFAULT_FORGETTING: float = LAM.default
#: Newton's method on one step's batch stops when no weight moves by more than this.
_NEWTON_TOL = 1e-9
_NEWTON_MAX = 50


def _standardisation(rows: npt.NDArray[np.float32]) -> tuple[FloatArray, FloatArray]:
    """Per-column mean and the scale that makes each column unit variance and each row's
    mean squared norm 1 (a column constant over the pool gets scale 0: it says nothing)."""
    n, d = rows.shape
    total = np.zeros(d)
    for start in range(0, n, DEFAULT_CHUNK):
        total += rows[start : start + DEFAULT_CHUNK].sum(axis=0, dtype=np.float64)
    mean = total / n
    sq = np.zeros(d)
    for start in range(0, n, DEFAULT_CHUNK):
        centred = rows[start : start + DEFAULT_CHUNK].astype(np.float64) - mean
        sq += np.einsum("ij,ij->j", centred, centred)
    std = np.sqrt(sq / n)
    informative = std > 1e-12 * np.maximum(1.0, np.abs(mean))
    used = max(int(informative.sum()), 1)
    scale = np.where(informative, 1.0 / (np.where(informative, std, 1.0) * math.sqrt(used)), 0.0)
    return mean, scale


def _sigmoid(x: FloatArray) -> FloatArray:
    # exp from IEEE-exact operations (numpy's differs between CPUs in the last bits, and p̃
    # reaches the posterior).
    e = portable_exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _log1pexp(x: FloatArray) -> FloatArray:
    """log(1 + e^x), stable for large |x| (only the line search reads it)."""
    return np.maximum(x, 0.0) + np.log1p(portable_exp(-np.abs(x)))


class EmbeddingRegression(Estimator):
    """p̃ for every task from a logistic regression of the run's observed success rates on task
    embeddings, fitted online.

    ``embeddings`` is one vector per task ([N, d]; e.g. the starting policy's mean-pooled last
    hidden state of each prompt, ``bots embed``). Each column is standardised over the pool and
    scaled by 1/sqrt(d), so a task's feature vector z_k has mean squared norm 1; a constant 1 is
    appended as the bias. The weights w have a Gaussian posterior N(m, P⁻¹), starting from the
    prior N(0, I/``prior_precision``).

    Per update, with the batch's distinct tasks b, their summed successes S_b and trials T_b:

    1. *forget*: the evidence in the posterior fades at the rate ``forgetting`` (BOTS passes its
       λ, so old steps fade as the Beta posteriors' evidence does): P ← (1−λ)·P + λ·P₀ and, in
       information form, P·m ← (1−λ)·P·m (the prior's mean is 0);
    2. *fit*: m ← argmax of the forgotten Gaussian times the batch's binomial likelihood
       Π_b σ(z_b·w)^S_b (1−σ(z_b·w))^(T_b−S_b), by Newton's method with a backtracking line
       search (the objective is strictly concave: it always converges); P ← its Hessian at m
       (the Laplace approximation);
    3. *predict*: p̃_k = σ(z_k·m) for every task k (the posterior mean's prediction). The core
       uses it for the tasks not rolled out this step; the rolled-out tasks take their explicit
       evidence instead.

    Before the first update there is no prediction (NaN), as with the interpolation estimator.
    Fractional successes (graded rewards in [0, 1]) enter the likelihood as they are.

    Cost per update: O(N·d) for the prediction (one [N, d] × [d] float32 product) and
    O(B·d² + d³) for the fit (each Newton iteration one linear solve of a (d+1)² system;
    3 to 6 iterations); memory N·d·4 bytes for the features and (d+1)²·8 for P. docs/estimators.md
    has the measured time at N = 10^6, d = 64 and 256. For embeddings of thousands of dimensions
    (a 7B model's hidden state), reduce them first (``bots embed --dim 256``).

    A checkpoint stores the embeddings as given (float32), m and P; a selector resumed with other
    embeddings is refused, as one resumed with other reference pass rates is.
    """

    rebuilt_from_state = True

    def __init__(
        self,
        embeddings: npt.ArrayLike,
        *,
        forgetting: float = DEFAULT_FORGETTING,
        prior_precision: float = DEFAULT_PRIOR_PRECISION,
    ) -> None:
        # The forgetting rate is λ by another name (a BOTS selector passes its own): λ's range.
        self._forgetting: float = LAM.check(forgetting, "forgetting")
        self._prior_precision: float = PRIOR_PRECISION.check(prior_precision)
        self._embeddings = embedding_matrix(embeddings, normalize=False)
        self._mean, self._scale = _standardisation(self._embeddings)
        dim = self._embeddings.shape[1] + 1
        self._precision: FloatArray = np.eye(dim) * self._prior_precision
        self._weights: FloatArray = np.zeros(dim)
        self._updates = 0  # updates with at least one observed task

    # ------------------------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int(self._embeddings.shape[0])

    def __repr__(self) -> str:
        return (
            f"EmbeddingRegression(num_tasks={len(self)}, dim={self._embeddings.shape[1]}, "
            f"forgetting={self._forgetting}, prior_precision={self._prior_precision}, updates={self._updates})"
        )

    @property
    def forgetting(self) -> float:
        return self._forgetting

    @property
    def prior_precision(self) -> float:
        return self._prior_precision

    @property
    def embeddings(self) -> npt.NDArray[np.float32]:
        """The embeddings as given (float32), read-only."""
        return self._embeddings

    @property
    def weights(self) -> FloatArray:
        """The posterior mean m of the weights (the bias last), a copy."""
        return self._weights.copy()

    @property
    def updates(self) -> int:
        """How many updates observed at least one task."""
        return self._updates

    def features(self, task_ids: Any) -> FloatArray:
        """z for the tasks ``task_ids``: standardised, scaled, with the bias column (float64)."""
        ids = np.asarray(task_ids, dtype=np.int64)
        z = (self._embeddings[ids].astype(np.float64) - self._mean) * self._scale
        return np.concatenate([z, np.ones((ids.size, 1))], axis=1)

    # ------------------------------------------------------------------------------- fitting
    def _check_ids(self, ids: npt.NDArray[np.int64]) -> None:
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            bad = int(ids[(ids < 0) | (ids >= len(self))][0])
            raise InvalidArgumentError(f"task_ids: {bad} is out of range [0, {len(self)})", "task_ids")

    def fit_step(self, task_ids: Any, successes: Any, trials: Any) -> tuple[FloatArray, FloatArray]:
        """The (m, P) one update with this batch would leave; changes nothing."""
        ids = np.asarray(task_ids, dtype=np.int64)
        self._check_ids(ids)
        s = np.asarray(successes, dtype=np.float64)
        t = np.asarray(trials, dtype=np.float64)
        lam = self._forgetting
        dim = self._weights.size
        prior = np.eye(dim) * self._prior_precision
        precision = (1.0 - lam) * self._precision + lam * prior
        info = (1.0 - lam) * (self._precision @ self._weights)
        keep = t > 0
        ids, s, t = ids[keep], s[keep], t[keep]
        start: FloatArray = np.asarray(np.linalg.solve(precision, info), dtype=np.float64)
        if ids.size == 0:
            return start, precision
        z = self.features(ids)
        f = t - s

        def objective(w: FloatArray) -> float:
            a = z @ w
            # -log posterior up to a constant: ½wᵀPw − wᵀh + Σ S·log(1+e^−a) + F·log(1+e^a)
            return float(0.5 * w @ precision @ w - w @ info + s @ _log1pexp(-a) + f @ _log1pexp(a))

        w = start
        value = objective(w)
        for _ in range(_NEWTON_MAX):
            p = _sigmoid(z @ w)
            grad = precision @ w - info - z.T @ (s - t * p)
            hess = precision + (z.T * (t * p * (1.0 - p))) @ z
            step = np.linalg.solve(hess, grad)
            size = 1.0
            while True:  # backtracking: Newton's full step can overshoot on a flat likelihood
                candidate = w - size * step
                new = objective(candidate)
                if new <= value or size < 1e-6:
                    break
                size *= 0.5
            w, value = candidate, new
            if np.max(np.abs(size * step)) < _NEWTON_TOL:
                break
        p = _sigmoid(z @ w)
        hess = precision + (z.T * (t * p * (1.0 - p))) @ z
        return w, hess

    def predict_weights(self, weights: FloatArray) -> FloatArray:
        """σ(z_k·w) for every task k."""
        d = self._embeddings.shape[1]
        w = np.asarray(weights, dtype=np.float64)
        # The constant part folded into the bias: z·w = (x − mean)·(scale·w) + bias.
        coef = self._scale * w[:d]
        offset = w[d] - float(self._mean @ coef)
        # One float32 matrix-vector product (memory-bound: the features are read once); the
        # logits' rounding error, about 1e-6 relative, is far below what moves a posterior.
        logits = (self._embeddings @ coef.astype(np.float32)).astype(np.float64) + offset
        return _sigmoid(logits)

    # ------------------------------------------------------------------------------- Estimator
    def observe(self, batch: _core.Batch) -> StepEvidence:
        weights, precision = self.fit_step(batch.ids, batch.successes, batch.trials)
        observed = bool(np.any(np.asarray(batch.trials) > 0))
        updates = self._updates + int(observed)
        state = (weights, precision, updates)
        if updates == 0:
            return StepEvidence({}, state)
        return StepEvidence({"predicted": self.predict_weights(weights)}, state)

    def commit(self, step: StepEvidence) -> None:
        weights, precision, updates = step.next_state
        self._weights = np.array(weights, dtype=np.float64)
        self._precision = np.array(precision, dtype=np.float64)
        self._updates = int(updates)

    def predict_all(self) -> FloatArray | None:
        return None if self._updates == 0 else self.predict_weights(self._weights)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "embeddings": self._embeddings.copy(),
            "forgetting": self._forgetting,
            "prior_precision": self._prior_precision,
            "weights": self._weights.copy(),
            "precision": self._precision.copy(),
            "updates": self._updates,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> EmbeddingRegression:
        if not isinstance(state, dict) or state.get("kind") != KIND:
            raise CheckpointError(f"evidence: not an {KIND} state: {state!r:.80}")
        try:
            est = cls(
                np.asarray(state["embeddings"]),
                forgetting=state["forgetting"],
                prior_precision=state["prior_precision"],
            )
            dim = est._weights.size
            weights = np.asarray(state["weights"], dtype=np.float64)
            precision = np.asarray(state["precision"], dtype=np.float64)
            if weights.shape != (dim,) or precision.shape != (dim, dim):
                raise ValueError(f"weights/precision have shapes {weights.shape}/{precision.shape}, expected ({dim},)")
            if not (np.isfinite(weights).all() and np.isfinite(precision).all()):
                raise ValueError("weights/precision hold non-finite values")
            est._weights = weights.copy()
            est._precision = precision.copy()
            est._updates = as_int(state["updates"], "updates", minimum=0)
        except CheckpointError:
            raise
        except (KeyError, ValueError, TypeError, InvalidArgumentError, InvalidTypeError) as exc:
            raise CheckpointError(f"evidence: malformed {KIND} state ({type(exc).__name__}: {exc})") from None
        return est
