"""Checkpoints, resume and pickling."""

from __future__ import annotations

import copy
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest

from bots_rft import BOTS, BotsError, CheckpointError, Interpolation, checkpoint
from checkpoint_files import edit_info


def _pool(n: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    weak = rng.random(n)
    weak[::17] = np.nan
    return weak, np.clip(weak + 0.25, 0, 1)


def _step(sel: BOTS, t: int) -> np.ndarray:
    ids = sel.select(128)
    rng = np.random.default_rng(1000 + t)  # rollouts depend only on the step
    sel.update(ids, rng.binomial(16, 0.45, len(ids)), 16)
    return ids


def _make(**kw) -> BOTS:  # type: ignore[no-untyped-def]
    weak, strong = _pool()
    return BOTS(
        len(weak), prior_alpha=np.linspace(0.5, 2, len(weak)), evidence=Interpolation(weak, strong), seed=77, **kw
    )


def test_save_load_resume_selects_exactly_the_same(tmp_path: Path) -> None:
    straight = _make()
    picks = [_step(straight, t) for t in range(20)]

    first = _make()
    for t in range(10):
        _step(first, t)
    first.save(tmp_path / "sel.bots")
    resumed = BOTS.load(tmp_path / "sel.bots")
    assert resumed.num_selections == 10 and resumed.capability == first.capability
    for t in range(10, 20):
        np.testing.assert_array_equal(_step(resumed, t), picks[t])
    np.testing.assert_array_equal(resumed.alpha, straight.alpha)
    np.testing.assert_array_equal(resumed.beta, straight.beta)
    assert resumed.capability == straight.capability
    assert resumed.params == straight.params


def test_load_state_dict_into_existing_selector() -> None:
    a = _make()
    for t in range(5):
        _step(a, t)
    b = _make(threads=1)
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.select(64), b.select(64))
    assert b.threads == 1


def test_pickle_and_deepcopy_round_trip() -> None:
    a = _make()
    for t in range(4):
        _step(a, t)
    for b in (pickle.loads(pickle.dumps(a, protocol=5)), copy.deepcopy(a)):
        np.testing.assert_array_equal(b.alpha, a.alpha)
        assert b.capability == a.capability and b.num_selections == a.num_selections
        np.testing.assert_array_equal(b.select(32), _make_twin(a).select(32))


def _make_twin(a: BOTS) -> BOTS:
    twin = _make()
    twin.load_state_dict(a.state_dict())
    return twin


def test_checkpoint_is_atomic_and_leaves_no_temporaries(tmp_path: Path) -> None:
    sel = _make()
    path = tmp_path / "ckpt" / "sel.bots"
    sel.save(path)
    sel.save(path)  # overwrite in place
    assert sorted(p.name for p in path.parent.iterdir()) == ["sel.bots"]


def test_truncated_corrupt_and_future_files_are_refused(tmp_path: Path) -> None:
    sel = _make()
    path = tmp_path / "sel.bots"
    sel.save(path)
    data = path.read_bytes()

    for cut in (0, 10, len(data) // 2, len(data) - 1):
        (tmp_path / "cut.bots").write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="truncated|corrupt"):
            BOTS.load(tmp_path / "cut.bots")

    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x40
    (tmp_path / "flip.bots").write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupt"):
        BOTS.load(tmp_path / "flip.bots")

    future = edit_info(data, lambda i: i.update(version=checkpoint.VERSION + 1))
    (tmp_path / "future.bots").write_bytes(future)
    with pytest.raises(CheckpointError, match="newer"):
        BOTS.load(tmp_path / "future.bots")
    # A file of the legacy format (BOTSRFT) from a newer version, too.
    legacy = bytearray((Path(__file__).parents[1] / "data" / "legacy_selector.bots").read_bytes())
    legacy[8:12] = (checkpoint.legacy.VERSION + 1).to_bytes(4, "little")
    (tmp_path / "future-legacy.bots").write_bytes(bytes(legacy))
    with pytest.raises(CheckpointError, match="newer"):
        BOTS.load(tmp_path / "future-legacy.bots")

    (tmp_path / "other.bin").write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(CheckpointError, match="not a bots-rft checkpoint"):
        BOTS.load(tmp_path / "other.bin")

    with pytest.raises(CheckpointError, match="no checkpoint"):
        BOTS.load(tmp_path / "missing.bots")


def test_bad_state_dicts_are_refused_without_change() -> None:
    sel = _make()
    _step(sel, 0)
    before = sel.state_dict()
    good = sel.state_dict()
    bad_states = [
        {**good, "format": "something-else"},
        {**good, "version": 99},
        {**good, "alpha": good["alpha"][:-1]},
        {**good, "beta": -good["beta"]},
        {**good, "params": {**good["params"], "lam": 2.0}},
        {k: v for k, v in good.items() if k != "alpha"},
        {**good, "num_tasks": 5},
    ]
    for bad in bad_states:
        with pytest.raises(BotsError):
            sel.load_state_dict(bad)
        after = sel.state_dict()
        np.testing.assert_array_equal(after["alpha"], before["alpha"])
        assert after["num_selections"] == before["num_selections"]


def test_concurrent_use_from_threads_is_safe() -> None:
    sel = BOTS(50_000, seed=1)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                ids = sel.select(64)
                sel.update(ids, rng.binomial(16, 0.5, 64), 16)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sel.num_selections == 80 and sel.num_updates == 80
    # Each update adds exactly 16 trials per rolled-out task to α+β on top of the decay.
    assert np.all(np.isfinite(sel.alpha)) and np.all(sel.alpha > 0)


# ------------------------------------------------------------------------ parameters


def test_parameters_are_read_only_attributes() -> None:
    sel = _make()
    _step(sel, 0)
    before = sel.state_dict()
    assert (sel.lam, sel.rho, sel.target, sel.n_rollouts, sel.thompson, sel.seed) == (0.1, 0.1, 0.5, 16, True, 77)
    for name, value in (
        ("lam", 5),
        ("rho", 0.3),
        ("target", 0.2),
        ("n_rollouts", 4),
        ("thompson", False),
        ("seed", 1),
        ("alpha", None),
        ("evidence", None),
        ("num_selections", 0),
    ):
        with pytest.raises(AttributeError, match=f"^{name}: BOTS attributes are read-only"):
            setattr(sel, name, value)
    with pytest.raises(AttributeError, match="read-only"):
        del sel.lam
    with pytest.raises(TypeError):
        sel.params["lam"] = 0.5  # type: ignore[index]
    assert sel.params == before["params"]
    np.testing.assert_array_equal(sel.alpha, before["alpha"])
    with pytest.raises(ValueError, match="read-only"):
        sel.prior_alpha[0] = 3.0  # type: ignore[index]


def test_set_params_takes_effect_and_is_checkpointed(tmp_path: Path) -> None:
    a = _make()
    for t in range(3):
        _step(a, t)
    a.set_params(lam=0.4, rho=0.0, target=0.3, n_rollouts=8, thompson=False)
    assert a.params == {
        "lam": 0.4,
        "rho": 0.0,
        "target": 0.3,
        "n_rollouts": 8.0,
        "thompson": False,
        "seed": 77,
        "adaptive_rho": False,
        "tau": 0.0,
        "adaptive_lam": False,
        "lag_discount": 1.0,
    }
    # A selector built with those parameters, on the same posterior, behaves identically.
    b = _make(lam=0.4, rho=0.0, target=0.3, n_rollouts=8, thompson=False)
    b.load_state_dict(a.state_dict())
    for t in range(3, 6):
        np.testing.assert_array_equal(_step(a, t), _step(b, t))
    np.testing.assert_array_equal(a.alpha, b.alpha)
    a.save(tmp_path / "sel.bots")
    assert BOTS.load(tmp_path / "sel.bots").params == a.params


def test_set_params_leaves_an_update_already_made_alone() -> None:
    a, b = _make(), _make()
    for sel in (a, b):
        _step(sel, 0)  # update pending
    a.set_params(lam=0.9)
    np.testing.assert_array_equal(a.alpha, b.alpha)  # the pending update used λ = 0.1


def test_bad_set_params_change_nothing() -> None:
    sel = _make()
    _step(sel, 0)
    before = sel.state_dict()
    bad = [
        ({"lam": 2.0}, "lam"),
        ({"lam": 0.2, "rho": -1}, "rho"),
        ({"target": 1.5}, "target"),
        ({"tau": -0.5}, "tau"),
        ({"n_rollouts": 0}, "n_rollouts"),
        ({"thompson": 1}, "thompson"),
        ({"seed": 3}, "seed"),
        ({"prior_alpha": 2.0}, "prior_alpha"),
        ({"lamda": 0.2}, "lamda"),
        ({"lam": "0.2"}, "lam"),
    ]
    for kwargs, name in bad:
        with pytest.raises(BotsError, match=f"^{name}: ") as info:
            sel.set_params(**kwargs)
        assert info.value.argument == name  # type: ignore[attr-defined]
        assert sel.params == before["params"]
    np.testing.assert_array_equal(sel.state_dict()["alpha"], before["alpha"])


def test_parameter_mismatch_on_load_is_an_explicit_choice() -> None:
    a = _make()
    for t in range(3):
        _step(a, t)
    state = a.state_dict()
    b = _make(lam=0.3, target=0.4)
    before = b.state_dict()
    with pytest.raises(CheckpointError, match=r"lam: 0.3 here, 0.1 in the state; target: 0.4 here, 0.5 in the state"):
        b.load_state_dict(state)
    assert b.params == before["params"] and b.num_selections == 0  # unchanged
    with pytest.raises(BotsError, match="params: must be one of"):
        b.load_state_dict(state, params="mine")  # type: ignore[arg-type]

    b.load_state_dict(state, params="current")
    assert b.params == before["params"] and b.num_selections == 3
    np.testing.assert_array_equal(b.alpha, a.alpha)
    assert b.capability == a.capability

    c = _make(lam=0.3, target=0.4)
    c.load_state_dict(state, params="checkpoint")
    assert c.params == a.params
    np.testing.assert_array_equal(_step(c, 3), _step(a, 3))

    d = BOTS(len(a), seed=77, evidence=a.evidence)  # the same λ, ρ, ..., but a scalar prior
    with pytest.raises(CheckpointError, match="prior_alpha: differs"):
        d.load_state_dict(a.state_dict())


def test_save_and_load_name_the_path_when_it_cannot_be_used(tmp_path: Path) -> None:
    sel = _make()
    for call in (lambda: sel.save(tmp_path), lambda: BOTS.load(tmp_path)):
        with pytest.raises(CheckpointError, match=r"^path: .* is a directory; a checkpoint is one file"):
            call()
    (tmp_path / "file").write_text("x")
    with pytest.raises(CheckpointError, match=r"^path: cannot write a checkpoint to .*file/sel.bots"):
        sel.save(tmp_path / "file" / "sel.bots")  # a parent that is a file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
