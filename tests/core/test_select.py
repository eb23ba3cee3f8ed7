"""Selection: greedy order, exclusion, Thompson frequencies, determinism."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft import BOTS, _core
from reference import reference_greedy


def _with_posterior(alpha: np.ndarray, beta: np.ndarray, **kw) -> BOTS:  # type: ignore[no-untyped-def]
    # The initial posterior equals the prior, so per-task priors set any posterior we like.
    return BOTS(len(alpha), prior_alpha=alpha, prior_beta=beta, **kw)


@given(
    st.integers(1, 3 * _core.CHUNK),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.5, 0.2, 0.77]),
    st.booleans(),
)
def test_greedy_equals_stable_sort(n: int, seed: int, target: float, use_exclude: bool) -> None:
    rng = np.random.default_rng(seed)
    # Small integer parameters give many exact ties in the mean.
    alpha = rng.integers(1, 5, n).astype(float)
    beta = rng.integers(1, 5, n).astype(float)
    sel = _with_posterior(alpha, beta, thompson=False, target=target)
    excluded = rng.random(n) < 0.3 if use_exclude else np.zeros(n, bool)
    k = int(rng.integers(0, int((~excluded).sum()) + 1))
    want = reference_greedy(alpha, beta, k, target, excluded)
    got = sel.select(k, exclude=excluded if use_exclude else None)
    np.testing.assert_array_equal(got, want)
    if use_exclude:
        np.testing.assert_array_equal(sel.select(k, exclude=np.flatnonzero(excluded)), want)


def test_selection_is_distinct_best_first_and_int64() -> None:
    sel = BOTS(10_000, seed=3)
    ids = sel.select(256)
    assert ids.dtype == np.int64 and ids.shape == (256,)
    assert len(np.unique(ids)) == 256


def test_select_never_changes_the_posterior(rng: np.random.Generator) -> None:
    sel = BOTS(5000)
    sel.update(rng.integers(0, 5000, 300), rng.integers(0, 17, 300), 16)
    a, b = sel.alpha.copy(), sel.beta.copy()
    for _ in range(3):
        sel.select(100)
    np.testing.assert_array_equal(sel.alpha, a)
    np.testing.assert_array_equal(sel.beta, b)


def test_update_never_draws_random_numbers(rng: np.random.Generator) -> None:
    """The random stream is a function of (seed, selections so far): updates do not advance it."""
    a = BOTS(3000, seed=11)
    b = BOTS(3000, seed=11)
    a.select(10)
    b.select(10)
    ids, succ = rng.integers(0, 3000, 64), rng.integers(0, 17, 64)
    a.update(ids, succ, 16)
    a.update(ids, succ, 16)
    b.update(ids, succ, 16)
    b.update(ids, succ, 16)
    assert a.num_selections == b.num_selections == 1
    np.testing.assert_array_equal(a.select(50), b.select(50))
    # and with the same posterior but another counter, the draws differ
    c = BOTS(3000, seed=11)
    c.load_state_dict({**a.state_dict(), "num_selections": 7})
    assert not np.array_equal(c.select(50), b.select(50))


def test_exclusion_does_not_move_other_tasks_draws() -> None:
    rng = np.random.default_rng(0)
    alpha, beta = rng.uniform(0.5, 20, 20_000), rng.uniform(0.5, 20, 20_000)
    excluded = rng.choice(20_000, 500, replace=False)
    a = _with_posterior(alpha, beta, seed=5)
    b = _with_posterior(alpha, beta, seed=5)
    got = a.select(100, exclude=excluded)
    full = b.select(600)
    np.testing.assert_array_equal(got, full[~np.isin(full, excluded)][:100])
    assert not np.isin(got, excluded).any()


@pytest.fixture(params=_core.available_simd_paths())
def simd_path(request):  # type: ignore[no-untyped-def]
    """Runs a test once per SIMD path of the sampler (SIMD width or portable)."""
    _core.set_simd_path(request.param)
    yield request.param
    _core.set_simd_path(None)


def test_thompson_frequencies_match_monte_carlo(simd_path: str) -> None:
    """P(task k is chosen) for B=1 equals P(|p̂_k - p*| is the smallest) under independent Betas."""
    alpha = np.array([1.0, 2.0, 8.0, 0.5, 30.0])
    beta = np.array([1.0, 5.0, 8.0, 0.7, 12.0])
    sel = _with_posterior(alpha, beta, seed=2024)
    trials = 20_000
    counts = np.bincount([int(sel.select(1)[0]) for _ in range(trials)], minlength=5) / trials
    mc_rng = np.random.default_rng(99)
    draws = mc_rng.beta(alpha, beta, size=(400_000, 5))
    expected = np.bincount(np.abs(draws - 0.5).argmin(axis=1), minlength=5) / 400_000
    se = np.sqrt(expected * (1 - expected) / trials)
    assert np.all(np.abs(counts - expected) < 5 * se + 2e-3), (counts, expected)


def test_thompson_top_b_frequencies_match_monte_carlo(simd_path: str) -> None:
    """Inclusion frequencies for B=3 of 8 tasks."""
    alpha = np.array([1, 3, 6, 2, 9, 1.5, 4, 0.8])
    beta = np.array([1, 3, 2, 6, 9, 0.6, 12, 0.8])
    sel = _with_posterior(alpha, beta, seed=7)
    trials = 10_000
    counts = np.zeros(8)
    for _ in range(trials):
        counts[sel.select(3)] += 1
    counts /= trials
    draws = np.random.default_rng(1).beta(alpha, beta, size=(200_000, 8))
    top = np.argsort(np.abs(draws - 0.5), axis=1)[:, :3]
    expected = np.bincount(top.ravel(), minlength=8) / 200_000
    se = np.sqrt(expected * (1 - expected) / trials)
    assert np.all(np.abs(counts - expected) < 5 * se + 2e-3), (counts, expected)


@pytest.mark.parametrize("thompson", [True, False])
def test_identical_for_one_and_two_threads(thompson: bool) -> None:
    n = 25 * _core.CHUNK + 123  # many chunks
    weak = np.random.default_rng(0).random(n)
    strong = np.clip(weak + 0.3, 0, 1)
    from bots_rft import Interpolation

    sels = [BOTS(n, seed=9, threads=t, thompson=thompson, evidence=Interpolation(weak, strong)) for t in (1, 2)]
    rng = np.random.default_rng(4)
    for _ in range(6):
        picks = [s.select(256) for s in sels]
        np.testing.assert_array_equal(picks[0], picks[1])
        succ = rng.binomial(16, 0.4, 256)
        for s in sels:
            s.update(picks[0], succ, 16)
        np.testing.assert_array_equal(sels[0].alpha, sels[1].alpha)
        np.testing.assert_array_equal(sels[0].beta, sels[1].beta)
    assert _core.thread_count(1) == 1 and _core.thread_count(2) == 2


def test_fused_update_select_equals_update_then_select() -> None:
    """update() defers its pass to the next select(); the fused pass must equal doing them apart."""
    from bots_rft import Interpolation

    n = 7 * _core.CHUNK + 1
    rng = np.random.default_rng(8)
    weak = rng.random(n)
    strong = np.clip(weak + 0.2, 0, 1)
    fused = BOTS(n, evidence=Interpolation(weak, strong), seed=2)
    apart = BOTS(n, evidence=Interpolation(weak, strong), seed=2)
    ids = fused.select(128)
    np.testing.assert_array_equal(ids, apart.select(128))
    for _ in range(4):
        succ = rng.binomial(16, 0.5, 128)
        fused.update(ids, succ, 16)
        apart.update(ids, succ, 16)
        apart.flush()
        np.testing.assert_array_equal(fused.alpha, apart.alpha)  # reading applies the pending pass
        fused.update(ids, succ, 16)
        apart.update(ids, succ, 16)
        apart.flush()
        excluded = ids[:5]
        ids = fused.select(128, exclude=excluded)
        np.testing.assert_array_equal(ids, apart.select(128, exclude=excluded))
        np.testing.assert_array_equal(fused.beta, apart.beta)
    # A failed select leaves the pending update in place and the counter unmoved.
    fused.update(ids, rng.binomial(16, 0.5, 128), 16)
    before = fused.num_selections
    with pytest.raises(Exception, match="batch_size"):
        fused.select(n + 1)
    assert fused.num_selections == before


def test_only_boolean_arrays_are_masks() -> None:
    sel = BOTS(4, prior_alpha=[1.0, 2.0, 3.0, 4.0], prior_beta=4.0, thompson=False)
    # Ids of length num_tasks are still ids when they are not a 0/1 pattern with repeats.
    np.testing.assert_array_equal(sel.select(2, exclude=[True, False, True, False]), [3, 1])
    np.testing.assert_array_equal(sel.select(1, exclude=[3, 2, 1, 0][:3]), [0])
    np.testing.assert_array_equal(BOTS(2, thompson=False).select(0, exclude=[0, 1]), [])
    with pytest.raises(TypeError, match="exclude: an integer array of 4 zeros and ones"):
        sel.select(1, exclude=np.array([0, 1, 0, 0], dtype=np.uint8))


def test_the_class_is_called_with_the_constructors_parameters() -> None:
    # BOTS.__new__ takes (*args, backend=, device=, **kwargs) to pick a backend; the class's
    # signature must still be the constructor's, for help(), IDEs and tools that read it.
    params = inspect.signature(BOTS).parameters
    assert list(params)[0] == "num_tasks"
    assert {"lam", "rho", "target", "backend", "device", "prefetch"} <= set(params)


def _run_like_posterior(rng: np.random.Generator, n: int, share_at_prior: float) -> tuple[np.ndarray, np.ndarray]:
    """Posteriors as a run leaves them: some at the prior, most confident (α + β from 18, the
    implicit-evidence equilibrium, to 200) around spread success rates, a few with a shape < 1."""
    p = rng.random(n)
    total = rng.uniform(18.0, 200.0, n)
    alpha, beta = 1.0 + p * total, 1.0 + (1.0 - p) * total
    at_prior = rng.random(n) < share_at_prior
    alpha[at_prior], beta[at_prior] = 1.0, 1.0
    small = rng.random(n) < 0.01
    alpha[small] = rng.uniform(0.05, 1.0, int(small.sum()))
    return alpha, beta


@given(
    st.integers(_core.CHUNK, 12 * _core.CHUNK),
    st.integers(0, 2**32 - 1),
    st.integers(1, 300),
    st.sampled_from([0.5, 0.3, 0.9]),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.integers(0, 2**40),
)
def test_thompson_selection_equals_the_full_draw_on_run_like_posteriors(
    n: int, seed: int, k: int, target: float, share_at_prior: float, counter: int
) -> None:
    """The Thompson pass prunes draws beyond the admission bound; its selection equals the top B
    of the full draw (every task's draw, sorted by (f32 distance, id)), on one and two threads,
    with and without the selector's bound hint."""
    rng = np.random.default_rng(seed)
    alpha, beta = _run_like_posterior(rng, n, share_at_prior)
    k = min(k, n)
    draws = _core.thompson_draws(alpha, beta, seed, counter)
    distance = np.abs(draws - np.float32(target)).astype(np.float64)
    want = np.lexsort((np.arange(n), distance))[:k]
    for threads in (1, 2):
        for hint in (None, 1.5 * float(distance[want[-1]])):
            spec = _core.SelectSpec(k, target=target, thompson=True, seed=seed, counter=counter, bound_hint=hint)
            got, kth = _core.select(alpha, beta, spec, threads=threads)
            np.testing.assert_array_equal(got, want)
            assert kth == distance[want[-1]]
