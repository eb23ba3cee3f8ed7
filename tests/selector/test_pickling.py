"""Selectors, estimators and the integration samplers move between processes losslessly and
cheaply: under pickle protocol 5 their arrays go out of band as raw buffers (no per-task Python
objects), and the copy selects exactly what the original would. Also through a real Ray actor
(when ray is installed) and a spawned multiprocessing worker."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from bots_rft.integrations.ray import SelectorActor, pickled_sizes
from bots_rft.integrations.tasks import rows_of_tasks

N = 100_000


def trained_selector(**kwargs: Any) -> BOTS:
    rng = np.random.default_rng(1)
    weak = rng.random(N)
    strong = np.minimum(1.0, weak + 0.3)
    weak[::97] = np.nan
    sel = BOTS(N, evidence=Interpolation(weak, strong), seed=7, threads=1, **kwargs)
    for _ in range(3):
        ids = sel.select(32)
        sel.update(ids, rng.integers(0, 17, ids.size), 16)
    return sel  # the last update is still pending (deferred): pickling must apply it


def roundtrip(obj: Any) -> tuple[Any, int, int, int]:
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    nbytes = sum(memoryview(b).nbytes for b in buffers)
    return pickle.loads(data, buffers=buffers), len(data), nbytes, len(buffers)


def assert_same_selector(a: BOTS, b: BOTS) -> None:
    np.testing.assert_array_equal(a.alpha, b.alpha)
    np.testing.assert_array_equal(a.beta, b.beta)
    assert a.capability == b.capability and a.params == b.params
    assert a.num_selections == b.num_selections and a.num_updates == b.num_updates
    for _ in range(2):  # same draws now and after one more identical update
        ia, ib = a.select(50), b.select(50)
        np.testing.assert_array_equal(ia, ib)
        a.update(ia, np.arange(50) % 17, 16)
        b.update(ib, np.arange(50) % 17, 16)


def test_selector_arrays_travel_out_of_band() -> None:
    sel = trained_selector(prior_alpha=np.full(N, 1.5))
    copy, inband, outband, nbuf = roundtrip(sel)
    # alpha, beta, per-task prior (float64) and the two float32 references: raw buffers.
    assert nbuf == 5 and outband == N * (8 * 3 + 4 * 2)
    assert inband < 4096  # parameters and counters only, independent of N
    assert pickled_sizes(sel)[:2] == (inband, outband)
    assert_same_selector(sel, copy)
    # Without buffer_callback (plain pickle, torch.save) it is still lossless.
    assert_same_selector(sel, pickle.loads(pickle.dumps(sel, protocol=pickle.HIGHEST_PROTOCOL)))


def test_estimator_pickles_out_of_band() -> None:
    ev = trained_selector().evidence
    assert isinstance(ev, Interpolation)
    copy, inband, outband, nbuf = roundtrip(ev)
    assert nbuf == 2 and outband == N * 4 * 2 and inband < 1024
    assert copy.capability == ev.capability and copy.momentum == ev.momentum
    np.testing.assert_array_equal(copy.predict_all(), ev.predict_all())


def test_samplers_pickle_out_of_band() -> None:
    pytest.importorskip("torch")
    from bots_rft.integrations.trl import BOTSRepeatSampler

    sel = trained_selector()
    rows = rows_of_tasks(np.arange(N)[::-1], N)
    sampler = BOTSRepeatSampler(sel, rows, mini_repeat_count=4, batch_size=8, repeat_count=2, num_chunks=3)
    copy, inband, outband, _ = roundtrip(sampler)
    assert inband < 4096 and outband >= N * (8 + 8 + 8)
    assert list(copy) == list(sampler)

    from itertools import islice

    from bots_rft import BOTS
    from bots_rft.integrations.verl import BOTSPromptSampler

    vs = BOTSPromptSampler(BOTS(10_000, seed=3, threads=1), [10 * r for r in range(1000)], chunk_size=16)
    it = iter(vs)
    [next(it) for _ in range(20)]  # mid-chunk, with prompts in flight
    vcopy, inband, _, nbuf = roundtrip(vs)
    assert inband < 4096 and nbuf >= 4
    np.testing.assert_array_equal(vcopy.selector.alpha, vs.selector.alpha)
    vcopy.load_state_dict(vs.state_dict())
    vs.load_state_dict(vs.state_dict())
    assert list(islice(iter(vcopy), 40)) == list(islice(iter(vs), 40))  # both continue with the same rows


def _child(conn: Any) -> None:
    sel = conn.recv()
    ids = sel.select(16)
    sel.update(ids, np.full(16, 8.0), 16)
    conn.send((ids, sel))


def test_selector_through_a_spawned_process() -> None:
    sel = trained_selector()
    ctx = mp.get_context("spawn")  # fork would copy the core's thread pool in a bad state
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child,))
    proc.start()
    child.close()  # the parent's copy: should the child die, recv() then ends with EOFError
    try:
        parent.send(sel)
        if not parent.poll(300):  # a hang guard, not a speed check
            pytest.fail("the spawned process sent nothing back within 300 s")
        ids, back = parent.recv()
    finally:
        proc.join(timeout=60)
    np.testing.assert_array_equal(ids, sel.select(16))
    sel.update(ids, np.full(16, 8.0), 16)
    assert_same_selector(sel, back)


@pytest.mark.slow
def test_selector_in_a_ray_actor() -> None:
    ray = pytest.importorskip("ray")
    from bots_rft.integrations.ray import remote_selector

    sel = trained_selector()
    local = pickle.loads(pickle.dumps(sel, protocol=5))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        actor = remote_selector(sel)
        for _ in range(2):
            ids = ray.get(actor.select.remote(24))
            np.testing.assert_array_equal(ids, local.select(24))
            ray.get(actor.update.remote(ids, np.arange(24) % 17, 16))
            local.update(ids, np.arange(24) % 17, 16)
        state = ray.get(actor.state_dict.remote())
        back = ray.get(actor.get.remote())
        np.testing.assert_array_equal(state["alpha"], back.alpha)
        # Objects fetched from Ray's store can be read-only views of shared memory; the
        # selector must still accept updates (its arrays are private copies).
        assert_same_selector(local, back)
    finally:
        ray.shutdown()


def test_selector_actor_without_ray() -> None:
    sel = trained_selector()
    actor = SelectorActor(pickle.loads(pickle.dumps(sel)))
    np.testing.assert_array_equal(actor.select(8), sel.select(8))
    assert actor.state_dict()["num_selections"] == sel.num_selections
