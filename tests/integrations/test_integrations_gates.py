"""Version windows and seam checks (bots_rft.integrations.gates), for every adapter.

Each adapter declares the framework releases it was tested with and the methods it overrides.
Faked here: the installed version (outside the window) and the framework's methods (another
signature, or the same signature with another body)."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bots_rft import BotsError, ConfigError, IntegrationError
from bots_rft.integrations import gates


@pytest.fixture
def warnings_seen() -> Iterator[list[str]]:
    """Messages logged on the integrations' logger (a handler of its own: other frameworks'
    logging set-ups imported by earlier tests cannot hide them)."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(logging.WARNING)
    gates.logger.addHandler(handler)
    try:
        yield seen
    finally:
        gates.logger.removeHandler(handler)


# ------------------------------------------------------------------------------ the checker itself
class Framework:
    def hook(self, inputs: Any) -> Any:
        return inputs


WINDOW = gates.Window("fakeframework", "1.2.0", "1.3.1", "tests.fake_adapter")
SEAM = gates.Seam(Framework, "hook", "(self, inputs)", gates.fingerprint_of(Framework.hook))


def test_window_bounds_are_both_tested_and_pre_releases_are_outside() -> None:
    assert [WINDOW.contains(v) for v in ("1.2.0", "1.2.9", "1.3.1", "1.3.1+local")] == [True] * 4
    assert [WINDOW.contains(v) for v in ("1.1.9", "1.3.2", "2.0", "1.3.0rc1", "unknown")] == [False] * 5
    assert str(WINDOW) == "1.2.0 to 1.3.1"


def test_inside_the_window_unchanged_seams_pass_silently(warnings_seen: list[str]) -> None:
    assert gates.check_framework(WINDOW, [SEAM], version="1.2.5") == []
    assert warnings_seen == []


def test_outside_the_window_unchanged_seams_pass_with_one_warning(warnings_seen: list[str]) -> None:
    assert gates.check_framework(WINDOW, [SEAM], version="1.4.0") == []
    assert len(warnings_seen) == 1
    assert "fakeframework 1.4.0 is outside the tested window" in warnings_seen[0]
    assert "Framework.hook" in warnings_seen[0]


def test_a_changed_signature_is_refused_naming_framework_version_and_method(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Framework, "hook", lambda self, inputs, extra: inputs)
    for version in ("1.2.5", "1.4.0"):  # inside the window too: the adapter would call it wrongly
        with pytest.raises(IntegrationError) as info:
            gates.check_framework(WINDOW, [SEAM], version=version)
        message = str(info.value)
        assert f"fakeframework {version}" in message
        assert "Framework.hook(self, inputs, extra)" in message and "(self, inputs)" in message
        assert "tested with fakeframework 1.2.0 to 1.3.1" in message and "BOTS_ALLOW_UNTESTED=1" in message
        assert info.value.framework == "fakeframework"
    assert issubclass(IntegrationError, ConfigError) and issubclass(IntegrationError, BotsError)


def test_a_changed_body_is_refused_outside_the_window_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def hook(self: Any, inputs: Any) -> Any:
        return [inputs]

    monkeypatch.setattr(Framework, "hook", hook)
    assert gates.check_framework(WINDOW, [SEAM], version="1.3.1") == []
    with pytest.raises(IntegrationError, match=r"fakeframework 1\.4\.0: Framework\.hook's source changed"):
        gates.check_framework(WINDOW, [SEAM], version="1.4.0")


def test_a_missing_method_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(Framework, "hook")
    with pytest.raises(IntegrationError, match=r"fakeframework 1\.2\.0: Framework\.hook is missing"):
        gates.check_framework(WINDOW, [SEAM], version="1.2.0")


def test_a_module_level_function_is_a_seam_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """An adapter that calls a framework's module-level function (verl's TransferQueue
    ``kv_batch_get``, AReaL's ``is_single_controller``) declares it with the module as owner:
    changed parameters are refused, a changed body outside the window too."""
    import types

    module = types.ModuleType("fakeframework.utils")

    def get(keys: Any, partition_id: Any, select_fields: Any = None) -> Any:
        return keys

    module.get = get  # type: ignore[attr-defined]
    seam = gates.Seam(module, "get", "(keys, partition_id, select_fields=)", gates.fingerprint_of(get))
    assert gates.check_framework(WINDOW, [seam], version="1.2.0") == []
    monkeypatch.setattr(module, "get", lambda keys, partition_id: keys, raising=False)
    with pytest.raises(IntegrationError, match=r"fakeframework\.utils\.get\(keys, partition_id\)"):
        gates.check_framework(WINDOW, [seam], version="1.2.0")


def test_the_escape_hatch_logs_what_it_bypassed(monkeypatch: pytest.MonkeyPatch, warnings_seen: list[str]) -> None:
    monkeypatch.setattr(Framework, "hook", lambda self, inputs, extra: inputs)
    monkeypatch.setenv("BOTS_ALLOW_UNTESTED", "1")
    problems = gates.check_framework(WINDOW, [SEAM], version="9.0")
    assert len(problems) == 1 and "Framework.hook" in problems[0]
    assert len(warnings_seen) == 1
    assert warnings_seen[0].startswith("BOTS_ALLOW_UNTESTED=1: running anyway; bypassed: fakeframework 9.0: ")
    monkeypatch.setenv("BOTS_ALLOW_UNTESTED", "yes")  # only 1 opens it
    with pytest.raises(IntegrationError):
        gates.check_framework(WINDOW, [SEAM], version="9.0")


def test_signature_text() -> None:
    def f(a: int, b: int = 1, *args: Any, c: int, d: int = 2, **kw: Any) -> None: ...

    def g(a: int, *, b: int) -> None: ...

    assert gates.signature_of(f) == "(a, b=, *args, c, d=, **kw)"
    assert gates.signature_of(g) == "(a, *, b)"


# ------------------------------------------------------------------------------ every adapter
def _trl() -> tuple[Callable[[], Any], type, str, str]:
    pytest.importorskip("trl")
    from trl import GRPOTrainer

    from bots_rft.integrations.trl import check_trl

    return check_trl, GRPOTrainer, "_generate_and_score_completions", "trl"


def _trl_async() -> tuple[Callable[[], Any], type, str, str]:
    pytest.importorskip("trl")
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    from bots_rft.integrations.trl_async import check_trl_async

    return check_trl_async, AsyncGRPOTrainer, "log", "trl"


def _verl() -> tuple[Callable[[], Any], type, str, str]:
    pytest.importorskip("verl.trainer.ppo.v1.replay_buffer")
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from bots_rft.integrations import verl as bv

    return bv.check_verl, ReplayBuffer, "_clear_groups", "verl"


def _trinity() -> tuple[Callable[[], Any], type, str, str]:
    pytest.importorskip("trinity")
    from trinity.buffer.selector.selector import BaseSelector

    from bots_rft.integrations.trinity import check_trinity

    return check_trinity, BaseSelector, "feedback", "trinity-rft"


def _skyrl() -> tuple[Callable[[], Any], type, str, str]:
    pytest.importorskip("ray")
    import ray.util.placement_group  # noqa: F401
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    # ray >= 2.52 dropped this re-export, which skyrl-train 0.3.1 imports.
    sys.modules["ray.util.placement_group"].PlacementGroupSchedulingStrategy = PlacementGroupSchedulingStrategy  # type: ignore[attr-defined]
    trainer = pytest.importorskip("skyrl_train.trainer")
    from bots_rft.integrations.skyrl import check_skyrl

    return check_skyrl, trainer.RayPPOTrainer, "handle_dynamic_sampling", "skyrl-train"


def _areal() -> tuple[Callable[[], Any], type, str, str]:
    rl_trainer = pytest.importorskip("areal.trainer.rl_trainer")
    from bots_rft.integrations.areal import check_areal

    return check_areal, rl_trainer.PPOTrainer, "_save_recover_checkpoint", "areal"


ADAPTERS = {"trl": _trl, "trl_async": _trl_async, "verl": _verl, "trinity": _trinity, "skyrl": _skyrl, "areal": _areal}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_each_adapter_passes_on_its_tested_release_and_checks_its_seams_outside_it(
    name: str, monkeypatch: pytest.MonkeyPatch, warnings_seen: list[str]
) -> None:
    check, owner, method, framework = ADAPTERS[name]()
    assert check() == [] and warnings_seen == []  # the installed release is the tested one
    monkeypatch.setattr(gates, "installed_version", lambda dist: "99.0.0")
    assert check() == []  # unchanged seams: runs, with one warning naming the version
    assert len(warnings_seen) == 1 and f"{framework} 99.0.0 is outside the tested window" in warnings_seen[0]
    assert f"{owner.__name__}.{method}" in warnings_seen[0]

    original = getattr(owner, method)

    def same_signature_other_body(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    same_signature_other_body.__signature__ = importlib.import_module("inspect").signature(original)  # type: ignore[attr-defined]
    monkeypatch.setattr(owner, method, same_signature_other_body)
    with pytest.raises(IntegrationError, match=rf"{framework} 99\.0\.0: {owner.__name__}\.{method}'s source changed"):
        check()
    monkeypatch.setattr(owner, method, lambda self, *changed: None)
    with pytest.raises(IntegrationError) as info:
        check()
    assert f"{framework} 99.0.0: {owner.__name__}.{method}(self, *changed) does not have the parameters" in str(
        info.value
    )
    monkeypatch.setenv("BOTS_ALLOW_UNTESTED", "1")
    assert check() != []
    assert f"bypassed: {framework} 99.0.0: {owner.__name__}.{method}" in warnings_seen[-1]


def _enter(name: str) -> None:
    """The adapter's entry point, as a user calls it (stopped by the check before it needs more)."""
    from bots_rft import BOTS

    if name == "trl":
        from bots_rft.integrations.trl import attach_bots

        attach_bots(object(), BOTS(4))
    elif name == "verl":
        from bots_rft.integrations import verl as bv

        bv.BOTSPPOTrainerSync(None)
    elif name == "trinity":
        from bots_rft.integrations.trinity import BOTSSelector

        BOTSSelector(None, None)
    elif name == "skyrl":
        from skyrl_train.trainer import RayPPOTrainer

        from bots_rft.integrations.skyrl import with_bots

        with_bots(RayPPOTrainer)
    elif name == "areal":
        from areal.trainer.rl_trainer import PPOTrainer

        from bots_rft.integrations.areal import with_bots as areal_with_bots

        areal_with_bots(PPOTrainer)


@pytest.mark.parametrize("name", ["trl", "verl", "trinity", "skyrl", "areal"])
def test_each_adapters_entry_point_runs_the_check(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, owner, method, framework = ADAPTERS[name]()
    monkeypatch.setattr(gates, "installed_version", lambda dist: "0.0.1")
    monkeypatch.setattr(owner, method, lambda self, *changed: None)
    with pytest.raises(IntegrationError, match=rf"{framework} 0\.0\.1: {owner.__name__}\.{method}"):
        _enter(name)
