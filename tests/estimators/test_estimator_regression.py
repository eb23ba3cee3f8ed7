"""EmbeddingRegression (bots-embed's implicit evidence): an online Bayesian logistic regression
of the run's observed success rates on task embeddings, forgetting at λ."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bots_rft import BOTS
from bots_rft.errors import CheckpointError, InvalidArgumentError, InvalidTypeError
from bots_rft.estimators import EmbeddingRegression, estimator_from_state
from bots_rft.selector.registry import method

N, D = 300, 6


def _world(seed: int = 0, n: int = N, d: int = D) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32) * rng.uniform(0.1, 10, d).astype(np.float32)
    w = rng.normal(size=d) / x.std(axis=0) * 0.8
    p = 1.0 / (1.0 + np.exp(-(x @ w - (x @ w).mean())))
    return x, p


def _posterior_gradient(est: EmbeddingRegression, prev: tuple[np.ndarray, np.ndarray], batch: tuple[Any, ...]) -> Any:
    """The gradient of the forgotten posterior times the batch's likelihood at the fitted weights
    (zero at the optimum), recomputed here from the rule in the class docstring."""
    ids, s, t = batch
    lam, prec = est.forgetting, est.prior_precision
    w_prev, p_prev = prev
    precision = (1 - lam) * p_prev + lam * prec * np.eye(w_prev.size)
    info = (1 - lam) * p_prev @ w_prev
    z = est.features(ids)
    w = est.weights
    p = 1 / (1 + np.exp(-(z @ w)))
    return precision @ w - info - z.T @ (s - t * p)


def test_no_prediction_before_the_first_rollouts_and_one_for_every_task_after() -> None:
    x, p = _world()
    est = EmbeddingRegression(x)
    sel = BOTS(N, evidence=est, seed=0)
    assert est.predict_all() is None and sel.predicted() is None
    ids = sel.select(16)
    sel.update(ids, np.full(16, 4.0), 8)
    pred = est.predict_all()
    assert pred is not None and pred.shape == (N,) and np.isfinite(pred).all()
    assert ((pred > 0) & (pred < 1)).all()
    assert est.updates == 1


def test_each_step_is_the_maximum_of_the_forgotten_posterior_times_the_batch() -> None:
    x, p = _world(1)
    est = EmbeddingRegression(x, forgetting=0.3, prior_precision=0.5)
    rng = np.random.default_rng(1)
    sel = BOTS(N, evidence=est, lam=0.3, seed=1)
    for _ in range(5):
        prev = (est.weights, est._precision.copy())
        ids = np.sort(sel.select(12))
        s = rng.binomial(8, p[ids]).astype(float)
        sel.update(ids, s, 8)
        grad = _posterior_gradient(est, prev, (ids, s, np.full(ids.size, 8.0)))
        assert np.max(np.abs(grad)) < 1e-7


def test_it_learns_a_logistic_world_from_its_own_rollouts() -> None:
    x, p = _world(2, n=3000, d=16)
    est = EmbeddingRegression(x)
    sel = BOTS(3000, evidence=est, seed=2)
    rng = np.random.default_rng(2)
    seen = np.zeros(3000, bool)
    for _ in range(25):
        ids = sel.select(16)
        seen[ids] = True
        sel.update(ids, rng.binomial(8, p[ids]).astype(float), 8)
    pred = est.predict_all()
    assert pred is not None
    # Tasks never rolled out (87% of the pool) are predicted as well as the others.
    assert (~seen).sum() > 2500
    assert np.corrcoef(pred[~seen], p[~seen])[0, 1] > 0.9


def test_predictions_do_not_depend_on_the_embeddings_scale_or_offset() -> None:
    x, p = _world(3)
    rng = np.random.default_rng(3)
    shifted = x * rng.uniform(0.5, 4.0, D).astype(np.float32) + rng.normal(size=D).astype(np.float32) * 3
    batches = [(np.sort(rng.choice(N, 10, replace=False)), rng.integers(0, 9, 10).astype(float)) for _ in range(4)]
    preds = []
    for emb in (x, shifted):
        est = EmbeddingRegression(emb)
        sel = BOTS(N, evidence=est, seed=0)
        for ids, s in batches:
            sel.update(ids, s, 8)
        preds.append(est.predict_all())
    np.testing.assert_allclose(preds[0], preds[1], atol=1e-4)


def test_a_constant_column_is_ignored() -> None:
    x, _ = _world(4)
    with_const = np.concatenate([x, np.full((N, 1), 7.0, np.float32)], axis=1)
    rng = np.random.default_rng(4)
    ids, s = np.sort(rng.choice(N, 20, replace=False)), rng.integers(0, 9, 20).astype(float)
    a, b = EmbeddingRegression(x), EmbeddingRegression(with_const)
    for est in (a, b):
        BOTS(N, evidence=est).update(ids, s, 8)
    np.testing.assert_allclose(a.predict_all(), b.predict_all(), atol=1e-9)


def test_forgetting_one_keeps_only_the_latest_step() -> None:
    x, _ = _world(5)
    rng = np.random.default_rng(5)
    last = (np.sort(rng.choice(N, 10, replace=False)), rng.integers(0, 9, 10).astype(float))
    a, b = EmbeddingRegression(x, forgetting=1.0), EmbeddingRegression(x, forgetting=1.0)
    sa, sb = BOTS(N, evidence=a, lam=1.0), BOTS(N, evidence=b, lam=1.0)
    for _ in range(3):
        sa.update(np.sort(rng.choice(N, 10, replace=False)), rng.integers(0, 9, 10).astype(float), 8)
    for sel in (sa, sb):
        sel.update(*last, 8)
    np.testing.assert_allclose(a.predict_all(), b.predict_all(), atol=1e-12)


def test_forgetting_zero_accumulates_and_old_evidence_fades_otherwise() -> None:
    """Without forgetting, the precision only grows; with λ > 0 a step without rollouts moves it
    back toward the prior."""
    x, _ = _world(6)
    est = EmbeddingRegression(x, forgetting=0.0)
    sel = BOTS(N, evidence=est, lam=0.0)
    sel.update([1, 2, 3], [8, 0, 4], 8)
    p1 = est._precision.copy()
    sel.update([4, 5], [2, 6], 8)
    assert np.linalg.eigvalsh(est._precision - p1).min() > -1e-12
    fading = EmbeddingRegression(x, forgetting=0.5)
    sel = BOTS(N, evidence=fading, lam=0.5)
    sel.update([1, 2, 3], [8, 0, 4], 8)
    before = np.abs(fading.weights).sum()
    w, _ = fading.fit_step([], [], [])
    assert np.abs(w).sum() < before


def test_graded_rewards_enter_as_fractional_successes() -> None:
    x, _ = _world(7)
    est = EmbeddingRegression(x)
    sel = BOTS(N, evidence=est)
    sel.update_rewards([0, 1], np.array([[0.5, 1.0, 0.25, 0.0], [1.0, 1.0, 0.75, 1.0]]))
    pred = est.predict_all()
    assert pred is not None and np.isfinite(pred).all()


def test_observe_changes_nothing_and_a_refused_update_leaves_it_as_it_was() -> None:
    x, _ = _world(8)
    est = EmbeddingRegression(x)
    sel = BOTS(N, evidence=est)
    sel.update([1, 2], [3, 5], 8)
    state = est.state_dict()
    with pytest.raises(InvalidArgumentError):
        sel.update([3, N], [1, 1], 8)
    with pytest.raises(InvalidArgumentError):
        sel.update([3, 4], [9, 1], 8)  # more successes than trials
    after = est.state_dict()
    for key in ("weights", "precision", "updates"):
        np.testing.assert_array_equal(after[key], state[key])


BAD: list[tuple[str, dict[str, Any], type, str]] = [
    ("1-D", {"embeddings": np.ones(N)}, InvalidTypeError, "embeddings"),
    ("strings", {"embeddings": np.array([["a", "b"]] * N)}, InvalidTypeError, "embeddings"),
    ("bool", {"embeddings": np.ones((N, 2), bool)}, InvalidTypeError, "embeddings"),
    ("ragged", {"embeddings": [[1.0, 2.0], [1.0]]}, InvalidTypeError, "embeddings"),
    ("nan", {"embeddings": np.full((N, 2), np.nan)}, InvalidArgumentError, "embeddings"),
    ("inf", {"embeddings": np.full((N, 2), np.inf)}, InvalidArgumentError, "embeddings"),
    ("beyond float32", {"embeddings": np.full((N, 2), 1e39)}, InvalidArgumentError, "embeddings"),
    ("no columns", {"embeddings": np.zeros((N, 0))}, InvalidArgumentError, "embeddings"),
    ("no rows", {"embeddings": np.zeros((0, 3))}, InvalidArgumentError, "embeddings"),
    ("forgetting", {"forgetting": 1.5}, InvalidArgumentError, "forgetting"),
    ("forgetting str", {"forgetting": "0.1"}, InvalidTypeError, "forgetting"),
    ("prior_precision", {"prior_precision": 0.0}, InvalidArgumentError, "prior_precision"),
    ("prior_precision nan", {"prior_precision": float("nan")}, InvalidArgumentError, "prior_precision"),
]


@pytest.mark.parametrize("case,kwargs,exc,argument", BAD, ids=[c[0] for c in BAD])
def test_bad_arguments_are_typed_errors_naming_them(
    case: str, kwargs: dict[str, Any], exc: type, argument: str
) -> None:
    args = {"embeddings": np.ones((N, 2)), **kwargs}
    with pytest.raises(exc) as info:
        EmbeddingRegression(args.pop("embeddings"), **args)
    assert str(info.value).startswith(f"{argument}:"), str(info.value)
    assert "\n" not in str(info.value)


def test_a_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    x, p = _world(9)
    rng = np.random.default_rng(9)
    sel = BOTS(N, evidence=EmbeddingRegression(x), seed=9)
    for _ in range(3):
        ids = sel.select(8)
        sel.update(ids, rng.binomial(8, p[ids]).astype(float), 8)
    sel.save(tmp_path / "s.bots")
    back = BOTS.load(tmp_path / "s.bots")
    for _ in range(3):
        a, b = sel.select(8), back.select(8)
        np.testing.assert_array_equal(a, b)
        s = rng.binomial(8, p[a]).astype(float)
        sel.update(a, s, 8)
        back.update(b, s, 8)
    np.testing.assert_array_equal(sel.alpha, back.alpha)
    np.testing.assert_array_equal(sel.predicted(), back.predicted())


def test_resuming_with_other_embeddings_is_refused(tmp_path: Path) -> None:
    x, _ = _world(10)
    sel = BOTS(N, evidence=EmbeddingRegression(x))
    sel.update([1, 2], [3, 4], 8)
    state = sel.state_dict()
    other = BOTS(N, evidence=EmbeddingRegression(x + 1.0))
    with pytest.raises(CheckpointError, match="evidence"):
        other.load_state_dict(state)
    same = BOTS(N, evidence=EmbeddingRegression(x))
    same.load_state_dict(state)
    np.testing.assert_array_equal(same.predicted(), sel.predicted())


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "similarity"},
        {"weights": np.zeros(3)},
        {"precision": np.full((D + 1, D + 1), np.nan)},
        {"updates": -1},
        {"forgetting": 2.0},
    ],
    ids=["kind", "weights shape", "precision nan", "updates", "forgetting"],
)
def test_a_malformed_state_is_a_checkpoint_error(change: dict[str, Any]) -> None:
    x, _ = _world(11)
    state = {**EmbeddingRegression(x).state_dict(), **change}
    with pytest.raises(CheckpointError):
        if change.get("kind") == "similarity":
            EmbeddingRegression.from_state_dict(state)
        else:
            estimator_from_state(state, None, N)


def test_bots_embed_is_a_method_whose_regression_forgets_at_its_lambda() -> None:
    x, _ = _world(12)
    m = method("bots-embed")
    assert m.signals == ("embeddings",) and m.references == "unused"
    sel = m.build(N, signals={"embeddings": x}, lam=0.25, prior_precision=2.0, seed=3)
    est = sel.evidence  # type: ignore[attr-defined]
    assert isinstance(est, EmbeddingRegression)
    assert est.forgetting == 0.25 and est.prior_precision == 2.0
    with pytest.raises(InvalidArgumentError, match="signals"):
        m.build(N)
    with pytest.raises(InvalidArgumentError, match="^embeddings: has 299 rows"):
        m.build(N, signals={"embeddings": x[:-1]})
    with pytest.raises(InvalidArgumentError, match="^prior_precision"):
        m.build(N, signals={"embeddings": x}, prior_precision=-1.0)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    lam=st.floats(0.0, 1.0),
    successes=st.lists(st.floats(0.0, 8.0), min_size=1, max_size=12),
)
def test_any_batch_gives_finite_predictions_in_the_unit_interval(seed: int, lam: float, successes: list[float]) -> None:
    x, _ = _world(seed % 7, n=60, d=4)
    est = EmbeddingRegression(x, forgetting=lam)
    ids = np.arange(len(successes)) * 3
    w, precision = est.fit_step(ids, successes, np.full(len(successes), 8.0))
    assert np.isfinite(w).all() and np.linalg.eigvalsh(precision).min() > 0
    pred = est.predict_weights(w)
    assert ((pred >= 0) & (pred <= 1)).all()


def test_its_defaults_are_the_catalogues() -> None:
    """The regression forgets at the paper's λ unless told otherwise, and bots-embed's prior is
    the catalogue's parameter (one definition each)."""
    from bots_rft.estimators.regression import DEFAULT_FORGETTING, DEFAULT_PRIOR_PRECISION
    from bots_rft.parameters import LAM, PRIOR_PRECISION

    assert LAM.default == DEFAULT_FORGETTING
    assert PRIOR_PRECISION.default == DEFAULT_PRIOR_PRECISION
    est = EmbeddingRegression(np.ones((4, 2)) * np.arange(4)[:, None])
    assert est.forgetting == LAM.default and est.prior_precision == PRIOR_PRECISION.default
