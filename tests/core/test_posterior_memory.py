"""The core's posterior (`_core.Posterior`) owns its memory: what Python gets are read-only
snapshot views that no pass changes and that outlive the posterior; a pass in the background
holds everything it reads and writes; a spec owns copies of its inputs; a second call on a
posterior that is busy is an error, never a race."""

from __future__ import annotations

import copy
import gc
import pickle
import threading

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation, _core
from bots_rft.errors import InvalidArgumentError, InvalidTypeError

N = 200_000  # large enough that a background pass is still running when the test looks


def _update(n: int, weak: np.ndarray | None = None, strong: np.ndarray | None = None) -> _core.UpdateSpec:
    batch = _core.aggregate(n, np.arange(64), np.full(64, 5.0), np.array([8.0]))
    if weak is None:
        return _core.UpdateSpec(batch, lam=0.1, rho=0.1, n_rollouts=16.0)
    return _core.UpdateSpec(batch, lam=0.1, rho=0.1, n_rollouts=16.0, weak=weak, strong=strong, capability=0.4)


def test_a_view_is_read_only_and_cannot_be_made_writeable() -> None:
    post = _core.Posterior(np.ones(10), np.full(10, 2.0))
    view = post.alpha
    assert not view.flags.writeable and not view.flags.owndata
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 5.0
    with pytest.raises(ValueError):
        view.setflags(write=True)
    with pytest.raises(ValueError):
        np.add(view, 1.0, out=view)
    np.testing.assert_array_equal(post.alpha, np.ones(10))


def test_a_view_is_a_snapshot_that_passes_never_change() -> None:
    post = _core.Posterior(np.ones(N), np.ones(N))
    alpha, beta = post.alpha, post.beta
    before_a, before_b = alpha.copy(), beta.copy()
    running = post.start_step(_update(N), _core.SelectSpec(16, seed=3))
    # Read while the pass runs (usually still running at N = 200k): the snapshot, unchanged.
    np.testing.assert_array_equal(alpha, before_a)
    np.testing.assert_array_equal(beta, before_b)
    ids, kth, distances = running.wait()
    assert ids.shape == (16,) and distances[-1] == kth
    np.testing.assert_array_equal(alpha, before_a)
    np.testing.assert_array_equal(beta, before_b)
    # A new view sees the update; the old one still does not.
    after = post.alpha
    assert not np.array_equal(after, before_a)
    post.step(_update(N))
    assert not np.array_equal(post.alpha, after)
    np.testing.assert_array_equal(alpha, before_a)


def test_the_same_pass_with_and_without_a_live_view_gives_the_same_posterior() -> None:
    # With a view alive the pass writes a new copy; without, in place: same numbers.
    a, b = _core.Posterior(np.ones(N), np.ones(N)), _core.Posterior(np.ones(N), np.ones(N))
    held = a.alpha, a.beta
    ra = a.step(_update(N), _core.SelectSpec(32, seed=7))
    rb = b.step(_update(N), _core.SelectSpec(32, seed=7))
    assert ra is not None and rb is not None
    np.testing.assert_array_equal(ra[0], rb[0])
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.beta, b.beta)
    np.testing.assert_array_equal(held[0], np.ones(N))


def test_views_outlive_the_posterior_and_a_running_pass() -> None:
    post = _core.Posterior(np.full(N, 3.0), np.full(N, 4.0))
    alpha = post.alpha
    running = post.start_step(_update(N), _core.SelectSpec(8, seed=1))
    del post  # the pass holds the arrays it writes; the view holds its snapshot
    gc.collect()
    assert running.wait() is not None
    del running
    gc.collect()
    np.testing.assert_array_equal(alpha, np.full(N, 3.0))
    assert float(alpha.sum()) == 3.0 * N


def test_a_selector_dropped_with_a_pass_in_flight_leaves_its_views_intact() -> None:
    rng = np.random.default_rng(0)
    sel = BOTS(N, seed=2, evidence=Interpolation(rng.uniform(0, 0.5, N), rng.uniform(0.5, 1, N)))
    sel.select(64)
    view = sel._posterior.arrays()[0]  # the raw view, without waiting for passes
    snapshot = view.copy()
    sel.update(np.arange(64), np.full(64, 3.0), 8)  # starts a background pass (prefetch)
    del sel
    gc.collect()
    np.testing.assert_array_equal(view, snapshot)


def test_a_spec_owns_its_inputs() -> None:
    # Writing the arrays a spec was built from, even while its pass runs, changes nothing.
    weak, strong = np.full(N, 0.2, dtype=np.float32), np.full(N, 0.8, dtype=np.float32)
    spec = _update(N, weak, strong)
    ref = _core.Posterior(np.ones(N), np.ones(N))
    expected = ref.step(_update(N, weak.copy(), strong.copy()), _core.SelectSpec(8, seed=5))
    post = _core.Posterior(np.ones(N), np.ones(N))
    running = post.start_step(spec, _core.SelectSpec(8, seed=5))
    weak[:] = 1.0
    strong[:] = 0.0
    got = running.wait()
    assert got is not None and expected is not None
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(post.alpha, ref.alpha)


def test_a_frozen_array_is_shared_read_only_and_outlives_its_specs() -> None:
    weak = _core.frozen(np.full(N, 0.2, dtype=np.float32))
    strong = _core.frozen(np.full(N, 0.8))  # float64 stays float64
    assert weak.dtype == np.float32 and strong.dtype == np.float64
    assert not weak.flags.writeable and not weak.flags.owndata
    with pytest.raises(ValueError):
        weak.setflags(write=True)
    with pytest.raises(ValueError, match="read-only"):
        weak[0] = 1.0
    strong32 = _core.frozen(np.full(N, 0.8, dtype=np.float32))
    post = _core.Posterior(np.ones(N), np.ones(N))
    running = post.start_step(_update(N, weak, strong32), _core.SelectSpec(8, seed=5))
    ref = _core.Posterior(np.ones(N), np.ones(N))
    expected = ref.step(
        _update(N, np.full(N, 0.2, dtype=np.float32), np.full(N, 0.8, dtype=np.float32)), _core.SelectSpec(8, seed=5)
    )
    del weak, strong32
    gc.collect()
    got = running.wait()
    assert got is not None and expected is not None
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(post.alpha, ref.alpha)
    # A slice of a frozen array is not the array: copied, and still read the same.
    sliced = _core.frozen(np.full(2 * N, 0.2, dtype=np.float32))[::2]
    with pytest.raises(InvalidTypeError, match="weak"):
        _update(N, sliced, np.full(N, 0.8, dtype=np.float32))


def test_reading_waits_for_a_background_pass() -> None:
    post = _core.Posterior(np.ones(N), np.ones(N))
    ref = _core.Posterior(np.ones(N), np.ones(N))
    ref.step(_update(N))
    running = post.start_step(_update(N))
    np.testing.assert_array_equal(post.alpha, ref.alpha)  # waited for the pass, then viewed
    assert running.done() and running.wait() is None
    assert len(post) == N


def test_a_pass_whose_result_is_never_collected_gives_the_arrays_back() -> None:
    post = _core.Posterior(np.ones(N), np.ones(N))
    post.start_step(_update(N), _core.SelectSpec(4, seed=1))  # the Pass is dropped at once
    ref = _core.Posterior(np.ones(N), np.ones(N))
    ref.step(_update(N))
    np.testing.assert_array_equal(post.beta, ref.beta)


def test_concurrent_calls_on_one_posterior_are_refused_not_raced() -> None:
    post = _core.Posterior(np.ones(2_000_000), np.ones(2_000_000))
    spec = _update(2_000_000)
    errors: list[BaseException] = []
    results: list[object] = []

    def hammer() -> None:
        for _ in range(20):
            try:
                results.append(post.step(spec, threads=1))
            except RuntimeError as exc:  # PyO3's borrow check: "Already borrowed"
                errors.append(exc)

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) + len(results) == 60
    assert all("borrow" in str(e).lower() for e in errors)
    # Each call that ran applied the update once, whole: α of an untouched task is the same
    # value the same number of decays gives on one thread.
    ref = _core.Posterior(np.ones(2_000_000), np.ones(2_000_000))
    for _ in results:
        ref.step(spec, threads=1)
    np.testing.assert_array_equal(post.alpha, ref.alpha)


def test_posterior_arguments_are_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="beta"):
        _core.Posterior(np.ones(3), np.ones(4))
    with pytest.raises(InvalidTypeError, match="alpha"):
        _core.Posterior(np.ones(6)[::2], np.ones(3))
    post = _core.Posterior(np.ones(3), np.ones(3))
    with pytest.raises(InvalidArgumentError, match="alpha"):
        post.assign(np.ones(4), np.ones(3))
    post.assign(np.full(3, 2.0), np.full(3, 5.0))
    np.testing.assert_array_equal(post.beta, np.full(3, 5.0))
    with pytest.raises(InvalidArgumentError, match="threads"):
        post.start_step(None, _core.SelectSpec(1), threads=0)
    np.testing.assert_array_equal(post.alpha, np.full(3, 2.0))  # a refused pass takes nothing


def test_interpolation_references_stay_frozen_through_pickling_and_copies() -> None:
    est = Interpolation(np.linspace(0, 0.5, 50), np.linspace(0.5, 1, 50))
    for other in (est, pickle.loads(pickle.dumps(est)), copy.deepcopy(est)):
        weak, strong = other.references32()
        assert isinstance(weak.base, _core.Snapshot) and isinstance(strong.base, _core.Snapshot)
        assert weak.dtype == np.float32 and not weak.flags.writeable
        np.testing.assert_array_equal(weak, est.references32()[0])
