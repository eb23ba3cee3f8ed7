"""Every method of the method table (bots_rft.selector.registry.METHODS) passes the same battery: bad input
raises the same typed error naming the argument and changes nothing; a seed determines the
selections; a checkpoint round-trip continues with identical selections; exclusions are honoured.
And every entry point (trainer config, simulator config, CLI, the classes themselves) accepts
exactly the ranges the table states."""

from __future__ import annotations

import argparse
import importlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft import BotsError, CheckpointError, InvalidArgumentError, InvalidTypeError
from bots_rft.checkpoint import load_state, save_state
from bots_rft.parameters import PARAMETERS, Parameter
from bots_rft.selector.protocol import RollsOut, Selector
from bots_rft.selector.registry import METHODS, Method, method, method_names
from checkpoint_files import is_codec_bytes

N = 40
ROLLOUTS = 8
NAMES = list(METHODS)


def _references() -> tuple[np.ndarray, np.ndarray]:
    weak = np.linspace(0.0, 0.6, N)
    weak[3] = np.nan  # an unknown reference, as real pools have
    return weak, np.clip(weak + 0.3, 0.0, 1.0)


def _rollout(ids: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    """Success counts that depend on the task only: two runs that roll out the same tasks see the
    same outcomes. A third of the tasks are always solved, a third never, the rest in between.
    With ``counts`` (methods that choose rollouts per task), the same rate out of ``counts[i]``."""
    ids = np.asarray(ids, dtype=np.int64)
    succ = np.select([ids % 3 == 0, ids % 3 == 1], [0, ROLLOUTS], default=1 + ids % (ROLLOUTS - 1)).astype(np.float64)
    if counts is None:
        return succ
    k = np.asarray(counts, dtype=np.float64)
    inside = (succ > 0) & (succ < ROLLOUTS) & (k >= 2)
    return np.where(inside, np.clip(np.rint(succ / ROLLOUTS * k), 1, k - 1), np.rint(succ / ROLLOUTS * k))


def _signals(m: Method) -> dict[str, Any]:
    """The further per-task arrays a method reads: three reference columns, 5-D embeddings."""
    weak, strong = _references()
    made = {
        "references": np.column_stack([weak, strong, np.linspace(1.0, 0.0, N)]),
        "embeddings": np.random.default_rng(0).normal(size=(N, 5)),
    }
    return {name: made[name] for name in m.signals}


def _build(m: Method, **params: Any) -> Selector:
    weak, strong = _references()
    if "n_rollouts" in {p.name for p in m.params}:
        params.setdefault("n_rollouts", ROLLOUTS)
    return m.build(N, weak=weak, strong=strong, rollout=_rollout, threads=1, signals=_signals(m), **params)


def _feedback(sel: Selector, ids: np.ndarray) -> None:
    if isinstance(sel, RollsOut):  # it rolled out itself: feed back the batch it hands over
        batch = sel.take_batch()
        assert batch is not None and batch.task_ids.tolist() == ids.tolist()
        sel.update(batch.task_ids, batch.successes, batch.trials)
        return
    take = getattr(sel, "take_rollouts", None)
    succ = take() if take is not None else None
    sel.update(ids, _rollout(ids) if succ is None else succ, ROLLOUTS)


def _trajectory(sel: Selector, steps: int = 4, batch: int = 5) -> list[list[int]]:
    out = []
    for _ in range(steps):
        ids = sel.select(batch)
        out.append(ids.tolist())
        _feedback(sel, ids)
    return out


@pytest.fixture(params=NAMES)
def m(request: pytest.FixtureRequest) -> Method:
    return METHODS[request.param]


# ---------------------------------------------------------------------------------------------
# The table itself
# ---------------------------------------------------------------------------------------------


def test_names_aliases_and_labels_are_unique() -> None:
    names = method_names(aliases=True)
    assert len(names) == len(set(names))
    assert len({x.label for x in METHODS.values()}) == len(METHODS)
    assert method("dapo") is METHODS["dynamic"] and method(" BOTS ") is METHODS["bots"]
    with pytest.raises(InvalidArgumentError, match=r"method: expected one of \['bots'.*got 'greedy'"):
        method("greedy")
    with pytest.raises(InvalidTypeError, match="method"):
        method(3)


def test_implementation_names_the_class_built(m: Method) -> None:
    module, _, qualname = m.implementation.partition(":")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    sel = _build(m)
    assert isinstance(sel, Selector)
    assert type(sel).__name__ == qualname.split(".")[0]
    assert callable(target)


def test_defaults_pass_their_own_check(m: Method) -> None:
    for p in m.params:
        assert p.check(p.default) == p.default, p.name
    assert set(m.fixed).isdisjoint(p.name for p in m.params)


# ---------------------------------------------------------------------------------------------
# Bad input: one class per mistake, the argument named, nothing changed
# ---------------------------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, Callable[[Selector], object], type, str]] = [
    ("batch too large", lambda s: s.select(N + 1), InvalidArgumentError, "batch_size"),
    ("batch > selectable", lambda s: s.select(5, exclude=np.arange(N - 4)), InvalidArgumentError, "batch_size"),
    ("negative batch", lambda s: s.select(-1), InvalidArgumentError, "batch_size"),
    ("float batch", lambda s: s.select(2.5), InvalidTypeError, "batch_size"),  # type: ignore[arg-type]
    ("exclude range", lambda s: s.select(1, exclude=[N]), InvalidArgumentError, "exclude"),
    ("exclude mask shape", lambda s: s.select(1, exclude=np.zeros(N + 1, bool)), InvalidTypeError, "exclude"),
    ("exclude floats", lambda s: s.select(1, exclude=[0.5]), InvalidTypeError, "exclude"),
    ("exclude 0/1 ints", lambda s: s.select(1, exclude=np.eye(N, dtype=np.int64)[3]), InvalidTypeError, "exclude"),
    ("id too large", lambda s: s.update([3, N], [1, 1], ROLLOUTS), InvalidArgumentError, "task_ids"),
    ("negative id", lambda s: s.update([-1], [1], ROLLOUTS), InvalidArgumentError, "task_ids"),
    ("float ids", lambda s: s.update([1.5], [1], ROLLOUTS), InvalidTypeError, "task_ids"),
    ("lengths differ", lambda s: s.update([1, 2], [1], ROLLOUTS), InvalidTypeError, "successes"),
    ("NaN successes", lambda s: s.update([1], [np.nan], ROLLOUTS), InvalidArgumentError, "successes"),
    ("successes above trials", lambda s: s.update([1], [ROLLOUTS + 1], ROLLOUTS), InvalidArgumentError, "successes"),
    ("zero trials", lambda s: s.update([1], [0], 0), InvalidArgumentError, "trials"),
    ("string trials", lambda s: s.update([1], [0], "8"), InvalidTypeError, "trials"),
    ("foreign state", lambda s: s.load_state_dict({"kind": "elsewhere", "num_tasks": N}), CheckpointError, "state"),
    ("state not a dict", lambda s: s.load_state_dict([1, 2]), CheckpointError, "state"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("case,call,exc,argument", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_raise_one_class_and_change_nothing(
    m: Method, case: str, call: Callable[[Selector], object], exc: type, argument: str
) -> None:
    sel, twin = _build(m), _build(m)
    _trajectory(sel, steps=2)
    _trajectory(twin, steps=2)
    with pytest.raises(exc) as info:
        call(sel)
    assert isinstance(info.value, BotsError) and isinstance(info.value, (ValueError, TypeError))
    assert argument in str(info.value), str(info.value)
    assert _trajectory(sel) == _trajectory(twin)


def _bad_values(p: Parameter) -> list[tuple[Any, type]]:
    """Values of the wrong type and values just outside the range, with the error each raises."""
    if p.type == "bool":
        return [("yes", InvalidTypeError), (1, InvalidTypeError)]
    wrong = [("0.5", InvalidTypeError), (True, InvalidTypeError)] + (
        [(1.5, InvalidTypeError)] if p.type == "int" else []
    )
    out: list[tuple[Any, type]] = []
    step = 1 if p.type == "int" else 1e-9
    if not math.isinf(p.low):
        out.append((p.low if p.low_open else p.low - step, InvalidArgumentError))
    if not math.isinf(p.high):
        out.append((p.high if p.high_open else p.high + step, InvalidArgumentError))
    if p.type == "float":
        out += [(math.nan, InvalidArgumentError), (math.inf, InvalidArgumentError)]
    return wrong + [(int(v) if p.type == "int" else v, e) for v, e in out]


def test_bad_parameters_raise_one_class_naming_the_parameter(m: Method) -> None:
    for p in m.params:
        for value, exc in _bad_values(p):
            with pytest.raises(exc) as info:
                _build(m, **{p.name: value})
            assert p.name in str(info.value), (p.name, value, str(info.value))


def test_fixed_and_unknown_parameters_are_refused(m: Method) -> None:
    for name, value in m.fixed.items():
        with pytest.raises(InvalidArgumentError, match=f"{name}: the {m.name} method fixes"):
            _build(m, **{name: value})
    with pytest.raises(InvalidArgumentError, match="bogus: not a parameter"):
        _build(m, bogus=1)


def test_methods_that_need_references_refuse_to_build_without(m: Method) -> None:
    if m.references != "required":
        return
    with pytest.raises(InvalidArgumentError, match="weak"):
        m.build(N, rollout=_rollout)


def test_signals_are_checked_by_name(m: Method) -> None:
    weak, strong = _references()
    with pytest.raises(InvalidArgumentError, match=r"signals: .* got \['bogus'\]"):
        m.build(N, weak=weak, strong=strong, rollout=_rollout, signals={"bogus": np.zeros(N)})
    if "embeddings" in m.signals:
        with pytest.raises(InvalidArgumentError, match="signals"):
            m.build(N, weak=weak, strong=strong, rollout=_rollout)


# ---------------------------------------------------------------------------------------------
# Determinism, checkpoints, exclusion
# ---------------------------------------------------------------------------------------------


def test_a_seed_determines_the_selections(m: Method) -> None:
    seeded = {"seed": 7} if any(p.name == "seed" for p in m.params) else {}
    assert _trajectory(_build(m, **seeded), steps=6) == _trajectory(_build(m, **seeded), steps=6)


def test_checkpoint_round_trip_continues_identically(m: Method, tmp_path: Path) -> None:
    sel = _build(m)
    _trajectory(sel, steps=3)
    path = tmp_path / "selector.bots"
    save_state(path, sel.state_dict())  # the package's one format for every selector
    assert is_codec_bytes(path.read_bytes())
    restored = _build(m)
    _trajectory(restored, steps=1)  # a fresh selector somewhere else in its stream
    restored.load_state_dict(load_state(path))
    assert _trajectory(restored, steps=4) == _trajectory(sel, steps=4)


def test_exclusion_as_ids_or_mask(m: Method) -> None:
    excluded = np.arange(0, N, 2)
    mask = np.zeros(N, dtype=bool)
    mask[excluded] = True
    by_ids, by_mask = _build(m), _build(m)
    for _ in range(3):
        a, b = by_ids.select(6, exclude=excluded), by_mask.select(6, exclude=mask)
        assert a.tolist() == b.tolist()
        assert a.dtype == np.int64 and a.size == 6 and np.unique(a).size == 6
        assert not np.isin(a, excluded).any()
        _feedback(by_ids, a)
        _feedback(by_mask, b)


# ---------------------------------------------------------------------------------------------
# Every entry point accepts exactly the table's ranges
# ---------------------------------------------------------------------------------------------


def _edges(p: Parameter) -> list[Any]:
    """Values at and just beyond each end of a number parameter's range."""
    step = 1 if p.type == "int" else 1e-9
    vals: list[Any] = [p.default]
    for end, sign in ((p.low, -1), (p.high, 1)):
        if not math.isinf(end):
            vals += [end, end + sign * step, end - sign * step]
    return [int(v) if p.type == "int" else float(v) for v in vals]


def _accepts(make: Callable[..., object], **kwargs: Any) -> bool:
    try:
        make(**kwargs)
    except BotsError:
        return False
    return True


TRAIN_KEYS = ("lam", "rho", "target", "momentum", "min_gap", "oversample")


@pytest.mark.parametrize("name", TRAIN_KEYS)
def test_train_config_accepts_the_tables_range(name: str) -> None:
    from bots_rft.train.config import TrainConfig

    p = PARAMETERS[name]
    for v in _edges(p):
        assert _accepts(lambda **kw: TrainConfig(pool="p.parquet", **kw), **{name: v}) == p.contains(v), (
            name,
            v,
        )


@pytest.mark.parametrize(
    "name,key", [("lam", "lam"), ("rho", "rho"), ("min_gap", "min_gap"), ("oversample", "dapo_oversample")]
)
def test_simulator_config_accepts_the_tables_range(name: str, key: str) -> None:
    from bots_rft.simulate import LearnerConfig, SimConfig

    p = PARAMETERS[name]
    learner = LearnerConfig(num_tasks=64, eval_tasks=16)
    for v in _edges(p):
        assert _accepts(SimConfig, learner=learner, batch_size=8, **{key: v}) == p.contains(v), (name, v)


@pytest.mark.parametrize("name", ["lam", "rho", "min_gap", "oversample"])
def test_cli_accepts_the_tables_range(name: str) -> None:
    from bots_rft.commands._args import parameter

    p = PARAMETERS[name]
    parse = parameter(p)
    for v in _edges(p):
        try:
            parse(repr(v))
            ok = True
        except argparse.ArgumentTypeError:
            ok = False
        assert ok == p.contains(v), (name, v)


def test_the_classes_accept_the_tables_range() -> None:
    """BOTS and Interpolation check their own arguments; they agree with the table."""
    from bots_rft import BOTS, Interpolation

    weak, strong = _references()
    for name in ("lam", "rho", "target", "n_rollouts"):
        p = PARAMETERS[name]
        for v in _edges(p):
            assert _accepts(BOTS, num_tasks=N, **{name: v}) == p.contains(v), (name, v)
    for name in ("momentum", "min_gap"):
        p = PARAMETERS[name]
        for v in _edges(p):
            assert _accepts(Interpolation, weak=weak, strong=strong, **{name: v}) == p.contains(v), (name, v)


def test_the_registry_builds_exactly_the_methods_of_the_table() -> None:
    """The registry's table (``ENTRIES``) states each method; ``METHODS`` adds its class and builder.
    The two list the same methods in the same order, and each registered method is its table entry."""
    import dataclasses

    from bots_rft.selector.registry import ENTRIES, MethodEntry, entry

    assert list(METHODS) == list(ENTRIES)
    for name, m in METHODS.items():
        listed = ENTRIES[name]
        assert all(getattr(m, f.name) == getattr(listed, f.name) for f in dataclasses.fields(MethodEntry)), name
        for alias in (name, *m.aliases):
            assert method(alias) is m and entry(alias) is listed
