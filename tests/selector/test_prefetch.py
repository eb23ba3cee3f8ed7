"""Selection computed in the background (prefetch) and the streaming interface (`take`).

The contract under test: with prefetch on, every call returns bit for bit what it returns with
prefetch off, for any sequence of calls (updates, selections with changing batch sizes and
exclusions, parameter changes, checkpoints, streaming); and a background pass never leaks
(garbage collection, pickling, threads).
"""

from __future__ import annotations

import gc
import pickle
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from bots_rft import BOTS, Interpolation, _core
from bots_rft.errors import InvalidArgumentError

N = 3000  # three chunks of the core, so passes split across threads


def _refs(n: int) -> Interpolation:
    weak = np.linspace(0.0, 0.7, n)
    weak[::11] = np.nan
    return Interpolation(weak, np.clip(weak + 0.25, 0.0, 1.0))


def _pair(n: int = N, **kwargs: Any) -> tuple[BOTS, BOTS]:
    on = BOTS(n, seed=9, evidence=_refs(n), prefetch=True, **kwargs)
    off = BOTS(n, seed=9, evidence=_refs(n), prefetch=False, **kwargs)
    return on, off


def _assert_same_state(a: BOTS, b: BOTS) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert np.array_equal(sa["alpha"], sb["alpha"])
    assert np.array_equal(sa["beta"], sb["beta"])
    assert sa["num_selections"] == sb["num_selections"]
    assert sa["num_updates"] == sb["num_updates"]
    assert sa["evidence"]["capability"] == sb["evidence"]["capability"]
    assert np.array_equal(a.in_flight, b.in_flight)


class PrefetchOnEqualsOff(RuleBasedStateMachine):
    """Two selectors, prefetch on and off, get the same calls and must give the same answers."""

    def __init__(self) -> None:
        super().__init__()
        self.on, self.off = _pair(threads=2)
        self.rng = np.random.default_rng(0)

    def _both(self, call: Any) -> None:
        got, want = call(self.on), call(self.off)
        if isinstance(want, np.ndarray):
            assert np.array_equal(got, want), (got, want)

    @rule(size=st.integers(1, 40), seed=st.integers(0, 2**16))
    def update(self, size: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        ids = rng.integers(0, N, size)
        succ = rng.integers(0, 9, size)
        self._both(lambda s: s.update(ids, succ, 8))

    @rule(
        k=st.sampled_from([0, 1, 16, 64, 64, 64]),
        how=st.sampled_from(["none", "ids", "mask", "many"]),
        seed=st.integers(0, 99),
    )
    def select(self, k: int, how: str, seed: int) -> None:
        rng = np.random.default_rng(seed)
        exclude: Any = None
        if how == "ids":
            exclude = rng.choice(N, 30, replace=False)
        elif how == "mask":
            exclude = rng.random(N) < 0.02
        elif how == "many":  # more than any speculation ranks: the fallback path
            exclude = rng.random(N) < 0.6
        self._both(lambda s: s.select(k, exclude=exclude))

    @rule(p_star=st.sampled_from([0.3, 0.5, 0.7]), thompson=st.booleans())
    def set_params(self, p_star: float, thompson: bool) -> None:
        self._both(lambda s: s.set_params(target=p_star, thompson=thompson))

    @rule(k=st.integers(0, 20), draw_size=st.sampled_from([8, 32, 256]), exclude_some=st.booleans())
    def take(self, k: int, draw_size: int, exclude_some: bool) -> None:
        exclude = np.arange(0, N, 7) if exclude_some else None
        self._both(lambda s: s.take(k, draw_size=draw_size, exclude=exclude))

    @rule(count=st.integers(0, 10))
    def release(self, count: int) -> None:
        ids = self.off.in_flight[:count]
        self._both(lambda s: s.release(ids))

    @rule()
    def checkpoint_round_trip(self) -> None:
        # Mid-sequence, with a pass possibly in flight on one of them.
        self.on = pickle.loads(pickle.dumps(self.on))
        state = self.off.state_dict()
        self.off = BOTS(N, seed=9, evidence=_refs(N), prefetch=False, threads=2)
        self.off.load_state_dict(state, params="checkpoint")

    @invariant()
    def same_state(self) -> None:
        _assert_same_state(self.on, self.off)


TestPrefetchOnEqualsOff = PrefetchOnEqualsOff.TestCase
TestPrefetchOnEqualsOff.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


def test_the_prefetched_answer_is_used_and_equals_the_synchronous_one(monkeypatch: pytest.MonkeyPatch) -> None:
    reused = []
    original = BOTS._reuse

    def counting(self: BOTS, *args: Any) -> Any:
        got = original(self, *args)
        reused.append(got is not None)
        return got

    monkeypatch.setattr(BOTS, "_reuse", counting)
    on, off = _pair(200_000)
    for step in range(5):
        a, b = on.select(256), off.select(256)
        assert np.array_equal(a, b)
        ids = a[:64]
        succ = np.arange(64) % 9
        on.update(ids, succ, 8)
        off.update(ids, succ, 8)
        if step:
            # The update's pass started in the background with the expected selection.
            assert on._pass is not None or on._speculation is not None
        on.flush()
        assert on._speculation is not None and on._speculation.counter == on.num_selections
    assert np.array_equal(on.select(256), off.select(256))
    # on: the first select had nothing prefetched, the five after each update reused the pass;
    # off never has anything to reuse.
    assert reused == [False, False, True, False, True, False, True, False, True, False, True, False]


def test_a_changed_batch_size_or_exclusion_is_answered_exactly() -> None:
    on, off = _pair()
    on.select(64)
    off.select(64)
    for k, exclude in [(32, None), (100, None), (64, np.arange(0, N, 3)), (10, np.arange(N) % 2 == 0), (N // 2, None)]:
        on.update([1, 2, 3], [1, 5, 8], 8)
        off.update([1, 2, 3], [1, 5, 8], 8)
        assert np.array_equal(on.select(k, exclude=exclude), off.select(k, exclude=exclude))


def test_parameters_changed_after_update_discard_the_prefetched_selection() -> None:
    on, off = _pair()
    on.select(50)
    off.select(50)
    on.update([4, 5], [2, 6], 8)
    off.update([4, 5], [2, 6], 8)
    on.set_params(target=0.2)
    off.set_params(target=0.2)
    assert np.array_equal(on.select(50), off.select(50))


def test_errors_are_raised_at_the_call_and_change_nothing() -> None:
    on, _ = _pair()
    on.select(10)
    on.update([1], [1], 2)
    before = on.state_dict()
    with pytest.raises(InvalidArgumentError):
        on.select(N + 1)
    with pytest.raises(InvalidArgumentError):
        on.update([N], [1], 2)
    after = on.state_dict()
    assert np.array_equal(before["alpha"], after["alpha"]) and before["num_selections"] == after["num_selections"]


def test_alpha_is_a_snapshot_that_later_passes_do_not_touch() -> None:
    sel = BOTS(N, seed=1)
    snap = sel.alpha
    sel.update([0, 1], [3, 0], 4)
    sel.select(8)
    assert snap[0] == 1.0 and not snap.flags.writeable
    assert sel.alpha[0] == 4.0
    a, b = sel.posterior([0, 1])
    assert a.tolist() == [4.0, 1.0] and b.tolist() == [2.0, 5.0]
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        sel.posterior([N])


def test_garbage_collection_and_close_with_a_pass_in_flight() -> None:
    for _ in range(3):
        sel = BOTS(500_000, seed=2)
        sel.select(16)
        sel.update(np.arange(16), np.ones(16), 2)  # starts a pass over 500,000 tasks
        del sel
        gc.collect()
    with BOTS(500_000, seed=2) as sel:
        sel.select(16)
        sel.update(np.arange(16), np.ones(16), 2)
    assert sel._pass is None


def test_a_select_after_update_takes_the_pass_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer's loop (update, then select with no exclusions) takes the background pass's
    first k ids directly, running or done, and they equal the synchronous selection; any other
    call goes the general way."""
    taken = []
    original = BOTS._take_prefetched

    def counting(self: BOTS, k: int) -> Any:
        got = original(self, k)
        if self is on:
            taken.append(got is not None)
        return got

    monkeypatch.setattr(BOTS, "_take_prefetched", counting)
    on, off = _pair(200_000)
    for _ in range(4):
        a, b = on.select(256), off.select(256)
        np.testing.assert_array_equal(a, b)
        succ = np.arange(256) % 9
        on.update(a, succ, 8)
        off.update(a, succ, 8)
    np.testing.assert_array_equal(on.select(128), off.select(128))  # fewer than the pass ranked
    on.update(np.arange(4), np.ones(4), 8)
    off.update(np.arange(4), np.ones(4), 8)
    np.testing.assert_array_equal(on.select(256, exclude=np.arange(3)), off.select(256, exclude=np.arange(3)))
    np.testing.assert_array_equal(on.alpha, off.alpha)
    # The first select had no pass; the next four (and the smaller one) took it; the one with
    # an exclusion did not try.
    assert taken == [False, True, True, True, True]


def test_wait_take_returns_the_first_ids_and_the_kth_distance() -> None:
    post = _core.Posterior(np.ones(5000), np.ones(5000))
    ids, kth, _ = post.start_step(None, _core.SelectSpec(8, seed=1)).wait()
    first, kth_taken = post.start_step(None, _core.SelectSpec(8, seed=1)).wait_take(5)
    np.testing.assert_array_equal(first, ids[:5])
    assert kth_taken == kth
    running = post.start_step(None, _core.SelectSpec(8, seed=1))
    assert running.wait_take(9) == (None, kth)  # the pass ranked fewer than asked
    with pytest.raises(RuntimeError, match="already collected"):
        running.wait_take(1)
    assert post.start_step(None, None).wait_take(3) is None


def test_the_speculation_asks_for_the_last_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The background pass is told the batch size the next ``select`` will probably ask for (the
    last one), so its answer's array is made while the caller is still busy."""
    from bots_rft.selector.backends.rust import RustPosterior

    asked: list[int | None] = []
    original = RustPosterior.start

    def recording(self: RustPosterior, update: Any, select: Any, take: int | None = None) -> Any:
        asked.append(take)
        return original(self, update, select, take)

    monkeypatch.setattr(RustPosterior, "start", recording)
    on, off = _pair(20_000)
    for k, exclude in ((64, None), (32, None), (32, np.arange(5))):
        ids = on.select(k, exclude=exclude)
        np.testing.assert_array_equal(ids, off.select(k, exclude=exclude))
        on.update(ids, np.arange(k) % 3, 4)
        off.update(ids, np.arange(k) % 3, 4)
    assert asked == [64, 32, 32]  # the speculation with exclusions ranks more, but k stays 32
    np.testing.assert_array_equal(on.select(32), off.select(32))


def test_wait_take_fills_the_array_made_when_the_pass_started() -> None:
    """``start_step(take=k)`` makes the result array up front; ``wait_take(k)`` fills it with the
    same ids as without it, and any other k (or a pass that ranked fewer) is answered as before."""
    post = _core.Posterior(np.ones(5000), np.ones(5000))
    ids, kth, _ = post.start_step(None, _core.SelectSpec(8, seed=1)).wait()
    for asked in (5, 3, 8):
        first, kth_taken = post.start_step(None, _core.SelectSpec(8, seed=1), take=5).wait_take(asked)
        assert first is not None and first.dtype == np.int64 and first.flags.c_contiguous and first.flags.writeable
        np.testing.assert_array_equal(first, ids[:asked])
        assert kth_taken == kth
    with pytest.raises(InvalidArgumentError, match=r"take: 9 is more than the pass selects \(8\)") as err:
        post.start_step(None, _core.SelectSpec(8, seed=1), take=9)
    assert err.value.argument == "take"
    with pytest.raises(InvalidArgumentError, match=r"take: 1 is more than the pass selects \(0\)"):
        post.start_step(None, None, take=1)
    np.testing.assert_array_equal(post.alpha, np.ones(5000))  # a refused start changed nothing
    # Two passes' arrays are their own: a returned array changed by its caller leaves the next alone.
    a = post.start_step(None, _core.SelectSpec(8, seed=1), take=8).wait_take(8)[0]
    a[:] = -1
    np.testing.assert_array_equal(post.start_step(None, _core.SelectSpec(8, seed=1), take=8).wait_take(8)[0], ids)


def test_a_pass_is_collected_once() -> None:
    post = _core.Posterior(np.ones(5000), np.ones(5000))
    done = post.start_step(None, _core.SelectSpec(3, seed=1))
    ids, kth, distances = done.wait()
    assert ids.shape == (3,) and distances.shape == (3,) and distances[-1] == kth and done.done()
    with pytest.raises(RuntimeError, match="already collected"):
        done.wait()
    with pytest.raises(InvalidArgumentError, match="beta"):
        _core.Posterior(np.ones(5000), np.ones(4999))


def test_threads_hammering_one_selector_finish_and_stay_consistent() -> None:
    sel = BOTS(20_000, seed=3, evidence=_refs(20_000))
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(40):
                op = rng.integers(0, 5)
                if op == 0:
                    ids = sel.select(32)
                    sel.update(ids, rng.integers(0, 5, 32), 4)
                elif op == 1:
                    got = sel.take(4, draw_size=64)
                    sel.update(got, np.ones(4), 4)
                elif op == 2:
                    sel.state_dict()
                elif op == 3:
                    sel.mean()
                else:
                    pickle.loads(pickle.dumps(sel))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)  # a deadlock would hang here; the bound only turns it into a failure
    assert not any(t.is_alive() for t in threads)
    assert not errors, errors
    assert sel.in_flight.size == 0
    assert np.all(np.isfinite(sel.alpha)) and np.all(sel.alpha > 0)


# ------------------------------------------------------------------------------ take semantics
def test_take_from_a_fresh_draw_equals_select() -> None:
    a, b = BOTS(N, seed=4), BOTS(N, seed=4)
    first = a.take(32, draw_size=32)
    assert np.array_equal(first, b.select(32))
    # The next draw was made as the first ran out, at the next position of the stream; it skips
    # the tasks still in flight.
    assert a.num_selections == 2
    assert np.array_equal(a.take(32, draw_size=32), b.select(32, exclude=first))


def test_take_hands_out_each_draw_in_rank_order_and_never_a_task_in_flight() -> None:
    sel, twin = BOTS(N, seed=6), BOTS(N, seed=6)
    draw = twin.select(64)
    got = np.concatenate([sel.take(5, draw_size=64) for _ in range(6)])  # 30 of the first draw
    assert np.array_equal(got, draw[:30])
    assert np.array_equal(sel.in_flight, np.sort(got))
    more = sel.take(100, draw_size=64)  # the rest of draw 1, then draw 2 (skipping tasks in flight)
    assert np.array_equal(more[:34], draw[30:])
    assert not set(more.tolist()) & set(got.tolist())
    assert len(set(np.concatenate([got, more]).tolist())) == 130


def test_evidence_and_release_end_in_flight() -> None:
    sel = BOTS(100, seed=1)
    got = sel.take(10, draw_size=10)
    sel.update(got[:4], np.ones(4), 2)
    assert set(sel.in_flight.tolist()) == set(got[4:].tolist())
    assert sel.release(got[4:7]) == 3
    assert sel.release([got[4]]) == 0  # not in flight any more: ignored
    assert set(sel.in_flight.tolist()) == set(got[7:].tolist())
    with pytest.raises(InvalidArgumentError, match="k: 98 exceeds the 97 tasks neither in flight nor excluded"):
        sel.take(98)


def test_take_resumes_exactly_from_a_checkpoint(tmp_path: Any) -> None:
    sel = BOTS(N, seed=8, evidence=_refs(N))
    sel.take(7, draw_size=20)
    sel.update([1, 2], [1, 0], 1)
    sel.take(9, draw_size=20)
    path = tmp_path / "sel.bots"
    sel.save(path)
    back = BOTS.load(path, prefetch=False)
    for _ in range(5):
        got, want = sel.take(6, draw_size=20), back.take(6, draw_size=20)
        assert np.array_equal(got, want)
        sel.update(got, np.ones(6), 2)
        back.update(want, np.ones(6), 2)
    _assert_same_state(sel, back)


def test_take_never_hands_out_an_excluded_task() -> None:
    sel, twin = BOTS(N, seed=6), BOTS(N, seed=6)
    evens = np.arange(0, N, 2)
    got = sel.take(10, draw_size=10, exclude=evens)
    assert np.array_equal(got, twin.select(10, exclude=evens))
    mask = np.zeros(N, dtype=bool)
    mask[: N - 5] = True
    rest = sel.take(5, exclude=mask)  # only the last five tasks are allowed
    assert sorted(rest.tolist()) == list(range(N - 5, N))
    with pytest.raises(InvalidArgumentError, match="k: 1 exceeds the 0 tasks"):
        sel.take(1, exclude=mask)
