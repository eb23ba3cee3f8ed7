"""The estimators of bots_rft.estimators: MultiReference (k references, weights fitted online;
exactly the interpolation at k = 2) and Similarity (top-k neighbour kernel over embeddings)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, CheckpointError, Interpolation, _core
from bots_rft.checkpoint import load_state, save_state
from bots_rft.errors import InvalidArgumentError, InvalidTypeError
from bots_rft.estimators import MultiReference, Similarity
from bots_rft.estimators.similarity import top_k_neighbours

N = 24


def _batch(n: int, ids: Any, successes: Any, trials: Any) -> _core.Batch:
    return _core.aggregate(
        n, np.asarray(ids, np.int64), np.asarray(successes, np.float64), np.atleast_1d(np.asarray(trials, np.float64))
    )


rate = st.one_of(st.floats(0.0, 1.0), st.just(float("nan")), st.sampled_from([0.0, 0.25, 0.5, 1.0]))


@st.composite
def interpolation_worlds(
    draw: st.DrawFn,
) -> tuple[np.ndarray, np.ndarray, float, float, list[tuple[list[int], list[int]]]]:
    n = draw(st.integers(3, N))
    weak = np.array(draw(st.lists(rate, min_size=n, max_size=n)))
    strong = np.array(draw(st.lists(rate, min_size=n, max_size=n)))
    momentum = draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]) | st.floats(0.0, 1.0))
    min_gap = draw(st.floats(0.01, 0.3))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        ids = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n))
        steps.append((ids, [draw(st.integers(0, 8)) for _ in ids]))
    return weak, strong, momentum, min_gap, steps


# ---------------------------------------------------------------------------------------------
# MultiReference
# ---------------------------------------------------------------------------------------------


@given(interpolation_worlds())
def test_two_references_are_the_interpolation(world: Any) -> None:
    """k = 2, no features: the same μ̃, the same p̃ and the same posterior as Interpolation."""
    weak, strong, momentum, min_gap, steps = world
    n = len(weak)
    interp = BOTS(n, evidence=Interpolation(weak, strong, momentum, min_gap=min_gap), seed=5, n_rollouts=8)
    multi = BOTS(n, evidence=MultiReference([weak, strong], momentum=momentum, min_gap=min_gap), seed=5, n_rollouts=8)
    for ids, succ in steps:
        for sel in (interp, multi):
            sel.update(ids, succ, 8)
        if interp.capability is None:
            assert multi.capability is None and multi.predicted() is None
        else:
            assert multi.capability == pytest.approx(interp.capability, rel=1e-12, abs=1e-12)
            np.testing.assert_allclose(multi.predicted(), interp.predicted(), rtol=0, atol=1e-10)
        np.testing.assert_allclose(multi.alpha, interp.alpha, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(multi.beta, interp.beta, rtol=1e-12, atol=1e-9)
    assert multi.select(min(3, n)).tolist() == interp.select(min(3, n)).tolist()


@given(
    st.integers(3, 5).flatmap(
        lambda k: st.tuples(
            st.just(k),
            st.lists(st.floats(-0.5, 1.5), min_size=k - 1, max_size=k - 1),
            st.integers(0, 2**31 - 1),
        )
    )
)
def test_weights_recover_an_exact_combination(case: tuple[int, list[float], int]) -> None:
    """When the policy's rates are exactly an affine combination of the references, one batch
    that spans them recovers the combination (momentum 0, no ridge pull)."""
    k, head, seed = case
    truth = np.array([*head, 1.0 - sum(head)])
    rng = np.random.default_rng(seed)
    refs = rng.uniform(0.0, 1.0, (40, k))
    refs[:, 0] *= 0.5  # reference means apart, so the batch has an estimate
    rates = refs.astype(np.float32).astype(np.float64) @ truth
    rates = np.clip(rates, 0.0, 1.0)
    inside = (refs.astype(np.float32).astype(np.float64) @ truth >= 0) & (
        refs.astype(np.float32).astype(np.float64) @ truth <= 1
    )
    if inside.sum() < k + 2:
        return
    ids = np.flatnonzero(inside)
    spread = refs[ids].mean(axis=0)
    if spread.max() - spread.min() < 1e-3:
        return
    est = MultiReference(refs, momentum=0.0, ridge=1e-12)
    est.commit(est.observe(_batch(40, ids, rates[ids], 1.0)))
    w = est.weights
    assert w is not None
    assert w.sum() == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_allclose(refs[ids].astype(np.float32) @ w, rates[ids], atol=1e-6)


@given(st.integers(0, 2**31 - 1), st.integers(2, 5), st.floats(0.0, 1.0), st.floats(0.0, 10.0))
def test_weights_always_sum_to_one_and_match_the_batch_mean(seed: int, k: int, momentum: float, ridge: float) -> None:
    rng = np.random.default_rng(seed)
    refs = rng.uniform(0.0, 1.0, (30, k))
    feats = rng.normal(size=(30, 2))
    est = MultiReference(refs, features=feats, momentum=momentum, ridge=ridge)
    for _ in range(4):
        ids = rng.choice(30, 10, replace=False)
        succ = rng.integers(0, 9, 10)
        batch = _batch(30, ids, succ, 8)
        fitted = est._batch_weights(batch)
        if fitted is not None:
            # Calibration in the large: the batch's mean prediction (unclipped) is its mean rate.
            cols = est._columns[np.sort(ids)].astype(np.float64)
            assert float((cols @ fitted).mean()) == pytest.approx(float((succ[np.argsort(ids)] / 8).mean()), abs=1e-9)
        est.commit(est.observe(batch))
        w = est.weights
        assert w is not None and w[:k].sum() == pytest.approx(1.0, abs=1e-9)
        pred = est.predict_all()
        assert pred is not None and ((pred >= 0) & (pred <= 1)).all()


def test_more_references_use_every_column_and_nan_gives_no_prediction() -> None:
    rng = np.random.default_rng(1)
    refs = rng.uniform(0, 1, (N, 3))
    refs[4, 2] = np.nan
    est = MultiReference(refs)
    assert est.predict_all() is None and est.capability is None
    est.commit(est.observe(_batch(N, np.arange(10), rng.integers(0, 9, 10), 8)))
    pred = est.predict_all()
    assert pred is not None and np.isnan(pred[4]) and np.isfinite(np.delete(pred, 4)).all()
    assert est.capability is None  # three references: no single coefficient


def test_a_batch_whose_references_coincide_leaves_the_weights() -> None:
    refs = np.tile(np.array([[0.3, 0.3, 0.3]]), (N, 1))
    refs[10:, 1] = 0.9
    est = MultiReference(refs, min_gap=0.05)
    est.commit(est.observe(_batch(N, [0, 1, 2], [4, 4, 4], 8)))  # all three means 0.3: no estimate
    assert est.weights is None
    est.commit(est.observe(_batch(N, [10, 11], [4, 8], 8)))
    before = est.weights
    est.commit(est.observe(_batch(N, [0, 1], [8, 8], 8)))
    np.testing.assert_array_equal(est.weights, before)


BAD_MULTI: list[tuple[str, dict[str, Any], type, str]] = [
    ("one reference", {"references": np.zeros((N, 1))}, InvalidArgumentError, "references"),
    ("empty list", {"references": []}, InvalidArgumentError, "references"),
    ("1-D array", {"references": np.zeros(N)}, InvalidTypeError, "references"),
    ("rate above 1", {"references": np.full((N, 2), 1.5)}, InvalidArgumentError, "references"),
    ("lengths differ", {"references": [np.zeros(N), np.zeros(N + 1)]}, InvalidTypeError, "references[1]"),
    ("strings", {"references": [["a"] * N, ["b"] * N]}, InvalidTypeError, "references[0]"),
    ("features rows", {"features": np.zeros((N + 1, 2))}, InvalidTypeError, "features"),
    ("features inf", {"features": np.full((N, 1), np.inf)}, InvalidArgumentError, "features"),
    ("momentum", {"momentum": 1.5}, InvalidArgumentError, "momentum"),
    ("momentum type", {"momentum": "0.9"}, InvalidTypeError, "momentum"),
    ("ridge", {"ridge": -1.0}, InvalidArgumentError, "ridge"),
    ("min_gap", {"min_gap": 1.0}, InvalidArgumentError, "min_gap"),
]


@pytest.mark.parametrize("case,kwargs,exc,argument", BAD_MULTI, ids=[c[0] for c in BAD_MULTI])
def test_multi_reference_bad_arguments(case: str, kwargs: dict[str, Any], exc: type, argument: str) -> None:
    args = {"references": np.full((N, 2), 0.5), **kwargs}
    with pytest.raises(exc) as info:
        MultiReference(args.pop("references"), **args)
    assert str(info.value).startswith(f"{argument}:"), str(info.value)


# ---------------------------------------------------------------------------------------------
# Similarity
# ---------------------------------------------------------------------------------------------


def _brute_top_k(emb: np.ndarray, ids: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
    out = []
    for b in ids:
        s = emb @ emb[b]
        cand = [(int(j), float(s[j])) for j in range(len(emb)) if j not in set(ids.tolist())]
        cand.sort(key=lambda t: (-t[1], t[0]))
        out.append(cand[:k])
    return out


@given(st.integers(0, 2**31 - 1), st.integers(1, 6), st.integers(1, 7), st.booleans())
def test_top_k_matches_brute_force_with_ties_and_chunks(seed: int, k: int, chunk: int, integer: bool) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    emb = (rng.integers(-1, 2, (n, 3)) if integer else rng.normal(size=(n, 3))).astype(np.float32)  # integers: ties
    ids = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    q, tasks, sims = top_k_neighbours(emb, emb[ids], k, ids, chunk)
    got = [[(int(t), float(s)) for t, s in zip(tasks[q == i], sims[q == i])] for i in range(ids.size)]
    want = _brute_top_k(emb, ids, k)
    assert [[t for t, _ in row] for row in got] == [[t for t, _ in row] for row in want]
    np.testing.assert_allclose(
        [s for row in got for _, s in row], [s for row in want for _, s in row], rtol=1e-6, atol=1e-6
    )


@given(st.integers(0, 2**31 - 1), st.integers(1, 5), st.floats(0.01, 10.0))
def test_similarity_is_the_kernel_average_of_the_rates_that_reach_a_task(seed: int, k: int, temperature: float) -> None:
    rng = np.random.default_rng(seed)
    n = 30
    raw = rng.normal(size=(n, 4))
    est = Similarity(raw, k=k, temperature=temperature, chunk_size=7)
    emb = (raw / np.linalg.norm(raw, axis=1, keepdims=True)).astype(np.float32)
    ids = np.sort(rng.choice(n, 6, replace=False))
    succ = rng.integers(0, 9, 6)
    step = est.observe(_batch(n, ids, succ, 8))
    assert est.predict_all() is None  # observe changes nothing
    num, den = np.zeros(n), np.zeros(n)
    reached: dict[int, list[tuple[float, float]]] = {}
    for b, row in zip(ids, _brute_top_k(emb, ids, k)):
        for j, s in row:
            reached.setdefault(j, []).append((s, succ[list(ids).index(b)] / 8))
    for j, pairs in reached.items():
        top = max(s for s, _ in pairs)
        w = np.array([np.exp((s - top) / temperature) for s, _ in pairs])
        num[j] = (w * [r for _, r in pairs]).sum()
        den[j] = w.sum()
    want = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    est.commit(step)
    got = est.predict_all()
    assert got is not None
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-5, atol=1e-6)
    assert np.isnan(got[ids]).all()  # rolled-out tasks are never neighbours


def test_min_similarity_keeps_evidence_local() -> None:
    emb = np.eye(6, dtype=np.float32)
    emb[1] = [1, 0.1, 0, 0, 0, 0]  # the only task near task 0
    est = Similarity(emb, k=3, min_similarity=0.5)
    est.commit(est.observe(_batch(6, [0], [8], 8)))
    pred = est.predict_all()
    assert pred is not None
    assert pred[1] == 1.0 and np.isnan(np.delete(pred, 1)).all()


def test_similarity_in_the_selector_and_a_rejected_update_commits_nothing() -> None:
    rng = np.random.default_rng(3)
    est = Similarity(rng.normal(size=(N, 5)), k=4)
    sel = BOTS(N, evidence=est, rho=0.5, n_rollouts=8, lam=0.0)
    sel.update([0, 1], [8, 0], 8)
    first = sel.predicted()
    assert first is not None and np.isfinite(first).sum() > 0
    reached = np.isfinite(first)
    np.testing.assert_allclose(sel.alpha[reached] + sel.beta[reached], 2 + 0.5 * 8)  # prior + ρ·n
    unreached = ~reached
    unreached[[0, 1]] = False
    np.testing.assert_allclose(sel.alpha[unreached] + sel.beta[unreached], 2.0)
    with pytest.raises(InvalidArgumentError):
        sel.update([2, N], [1, 1], 8)
    np.testing.assert_array_equal(sel.predicted(), first)


BAD_SIM: list[tuple[str, dict[str, Any], type, str]] = [
    ("1-D", {"embeddings": np.ones(N)}, InvalidTypeError, "embeddings"),
    ("strings", {"embeddings": np.array([["a", "b"]] * N)}, InvalidTypeError, "embeddings"),
    ("nan", {"embeddings": np.full((N, 2), np.nan)}, InvalidArgumentError, "embeddings"),
    ("zero row", {"embeddings": np.zeros((N, 2))}, InvalidArgumentError, "embeddings"),
    ("no columns", {"embeddings": np.zeros((N, 0))}, InvalidArgumentError, "embeddings"),
    ("k zero", {"k": 0}, InvalidArgumentError, "k"),
    ("k float", {"k": 2.5}, InvalidTypeError, "k"),
    ("temperature", {"temperature": 0.0}, InvalidArgumentError, "temperature"),
    ("temperature inf", {"temperature": float("inf")}, InvalidArgumentError, "temperature"),
    ("min_similarity nan", {"min_similarity": float("nan")}, InvalidArgumentError, "min_similarity"),
    ("normalize", {"normalize": 1}, InvalidTypeError, "normalize"),
    ("chunk", {"chunk_size": 0}, InvalidArgumentError, "chunk_size"),
]


@pytest.mark.parametrize("case,kwargs,exc,argument", BAD_SIM, ids=[c[0] for c in BAD_SIM])
def test_similarity_bad_arguments(case: str, kwargs: dict[str, Any], exc: type, argument: str) -> None:
    args = {"embeddings": np.ones((N, 2)), **kwargs}
    with pytest.raises(exc) as info:
        Similarity(args.pop("embeddings"), **args)
    assert str(info.value).startswith(f"{argument}:"), str(info.value)


# ---------------------------------------------------------------------------------------------
# Exact resume, for both
# ---------------------------------------------------------------------------------------------


def _estimators() -> list[Any]:
    rng = np.random.default_rng(7)
    refs = rng.uniform(0, 1, (N, 3))
    return [
        MultiReference(refs, features=rng.normal(size=(N, 1)), momentum=0.5),
        MultiReference([refs[:, 0], refs[:, 1]]),
        Similarity(rng.normal(size=(N, 6)), k=3, min_similarity=-0.5),
    ]


def _run(sel: BOTS, steps: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        ids = sel.select(5)
        out.append(ids.tolist())
        sel.update(ids, rng.integers(0, 9, ids.size), 8)
    return out


@pytest.mark.parametrize("index", range(3))
def test_checkpoints_resume_exactly_without_passing_the_estimator(index: int, tmp_path: Path) -> None:
    sel = BOTS(N, evidence=_estimators()[index], seed=2, n_rollouts=8)
    _run(sel, 4, 0)
    sel.save(tmp_path / "s.bots")
    save_state(tmp_path / "raw.bots", sel.state_dict())
    for back in (BOTS.load(tmp_path / "s.bots"), pickle.loads(pickle.dumps(sel))):
        assert type(back.evidence) is type(sel.evidence)
        np.testing.assert_array_equal(back.predicted(), sel.predicted())
        twin = pickle.loads(pickle.dumps(sel))
        assert _run(back, 4, 1) == _run(twin, 4, 1)
        np.testing.assert_array_equal(back.alpha, twin.alpha)
    fresh = BOTS(N, evidence=_estimators()[index], seed=2, n_rollouts=8)
    fresh.load_state_dict(load_state(tmp_path / "raw.bots"))
    np.testing.assert_array_equal(fresh.predicted(), sel.predicted())


def test_malformed_states_are_checkpoint_errors() -> None:
    multi = _estimators()[0].state_dict()
    with pytest.raises(CheckpointError, match="weights"):
        MultiReference.from_state_dict({**multi, "weights": np.array([1.0, np.nan])})
    with pytest.raises(CheckpointError, match="malformed"):
        MultiReference.from_state_dict({k: v for k, v in multi.items() if k != "momentum"})
    sim = _estimators()[2].state_dict()
    with pytest.raises(CheckpointError, match="malformed"):
        Similarity.from_state_dict({**sim, "last_tasks": np.array([N]), "last_predicted": np.array([0.5])})
    with pytest.raises(CheckpointError, match="not a similarity state"):
        Similarity.from_state_dict(multi)


# ---------------------------------------------------------------------------------------------
# In the simulator
# ---------------------------------------------------------------------------------------------


def test_the_simulator_compares_both_methods_with_signals_of_its_own() -> None:
    from bots_rft.simulate import LearnerConfig, SimConfig, make_world, run_experiment
    from bots_rft.simulate.signals import simulated_signals

    learner = LearnerConfig(num_tasks=400, eval_tasks=64)
    world = make_world(learner, 3)
    a = simulated_signals(world, 3, ("references", "embeddings"))
    b = simulated_signals(make_world(learner, 3), 3, ("references", "embeddings"))
    assert a["references"].shape == (400, 4) and a["embeddings"].shape == (400, 32)
    np.testing.assert_array_equal(a["references"][:, :2], np.column_stack([world.weak, world.strong]))
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])  # a function of (world, seed) only
    np.testing.assert_array_equal(make_world(learner, 3).weak, world.weak)  # the world itself unchanged
    config = SimConfig(
        learner=learner,
        steps=4,
        batch_size=16,
        seeds=(3,),
        methods=("bots", "bots-multiref", "bots-sim"),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )
    result = run_experiment(config, progress=False)
    assert [label for label, _ in result.groups["methods"]] == ["Random", "BOTS", "BOTS-MultiRef", "BOTS-Sim"]
    for _, spec in result.groups["methods"][2:]:
        (rec,) = result.records(spec)
        assert np.isfinite(rec.perf).all() and np.isfinite(rec.pearson_true).any()
