"""Every parameter of every method ``bots train`` runs is a config key with the catalogue's range
and default (``bots_rft.parameters``), reaches the selector the run builds, and a value
out of range is refused by ``bots train`` and ``bots compare`` with exit 2 and one line naming the
key and the value. A method's ``n_rollouts`` is the trainer's ``rollouts`` and its ``seed`` the
run's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from bots_rft.cli import main as cli_main
from bots_rft.errors import BotsError, ConfigError
from bots_rft.selector.registry import METHODS, RolloutMode
from bots_rft.train.config import SELECTION_KEYS, TRAINER_SUPPLIED, TrainConfig, load_config
from bots_rft.train.run_selector import make_selector

POOL = "p.parquet"


def test_every_parameter_of_every_trainer_method_is_a_key() -> None:
    for m in METHODS.values():
        if not m.trainer:
            continue
        for p in m.params:
            assert p.name in TRAINER_SUPPLIED or p.name in TrainConfig.model_fields, (m.name, p.name)
    for name, p in SELECTION_KEYS.items():
        default = TrainConfig.defaults()[name]
        # The trainer's one change: fewer dynamic-sampling rounds (each is a generation pass).
        assert default == (4 if name == "max_rounds" else p.default), name


def _edges(p: Any) -> list[Any]:
    if p.type == "bool":
        return [True, False]
    step = 1 if p.type == "int" else 1e-9
    vals: list[Any] = [p.default]
    for end, sign in ((p.low, -1), (p.high, 1)):
        if not math.isinf(end) and abs(end) < 2**60:
            vals += [end, end + sign * step, end - sign * step]
    return [int(v) if p.type == "int" else float(v) for v in vals]


@pytest.mark.parametrize("name", sorted(SELECTION_KEYS))
def test_each_key_accepts_exactly_the_catalogues_range(name: str) -> None:
    p = SELECTION_KEYS[name]
    for v in _edges(p):
        try:
            TrainConfig(pool=POOL, **{name: v})
            ok = True
        except BotsError:
            ok = False
        assert ok == (p.type == "bool" or p.contains(v)), (name, v)


@pytest.mark.parametrize(
    "key,value,shown",
    [
        ("lag_discount", "0", "must lie in (0, 1], got 0.0"),
        ("step_size", "-1", "must lie in [0, inf), got -1.0"),
        ("target_reward", "1.5", "must lie in [0, 1], got 1.5"),
        ("initial_difficulty", "101", "must lie in [0, 100], got 101.0"),
        ("candidate_ratio", "0.5", "must lie in [1, inf), got 0.5"),
        ("prior_alpha", "0", "must lie in (0, inf), got 0.0"),
        ("transition_decay", "2", "must lie in [0, 1], got 2.0"),
    ],
)
def test_bots_train_and_compare_refuse_a_value_out_of_range(
    key: str, value: str, shown: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["train", "--print-config", f"pool={POOL}", f"{key}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and f"{key}: {shown}" in err, err
    out = tmp_path / "cmp"
    assert cli_main(["compare", "--methods", "random,adarft", "--out", str(out), f"pool={POOL}", f"{key}={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and f"{key}: {shown}" in err, err
    assert not out.exists()


def test_bots_train_accepts_every_methods_own_parameters(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    keys = [
        "lag_discount=0.5",
        "step_size=10",
        "sensitivity=1",
        "target_reward=0.3",
        "initial_difficulty=20",
        "candidate_ratio=4",
        "prior_alpha=2",
        "transition_decay=0.5",
    ]
    assert cli_main(["train", "--print-config", f"pool={POOL}", *keys]) == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    cfg = load_config(printed)
    assert cfg == load_config(None, [f"pool={POOL}", *keys])
    assert (cfg.param("lag_discount"), cfg.param("step_size"), cfg.param("prior_alpha")) == (0.5, 10.0, 2.0)


def _refs(n: int) -> tuple[np.ndarray, np.ndarray]:
    weak = np.linspace(0.0, 0.6, n)
    return weak, np.clip(weak + 0.3, 0.0, 1.0)


def test_the_values_reach_the_selectors() -> None:
    weak, strong = _refs(20)
    refs = {"weak_column": "w", "strong_column": "s"}
    ada = make_selector(
        TrainConfig(pool=POOL, method="adarft", step_size=10, sensitivity=1, target_reward=0.3, **refs),
        20,
        weak,
        strong,
    )
    assert (ada.step_size, ada.sensitivity, ada.target_reward) == (10.0, 1.0, 0.3)  # type: ignore[attr-defined]
    dps = make_selector(TrainConfig(pool=POOL, method="dps", candidate_ratio=4, prior_alpha=2), 20, None, None)
    assert (dps.candidate_ratio, dps.prior_alpha) == (4.0, 2.0)  # type: ignore[attr-defined]
    for name in ("bots", "bots-plan", "bots-multiref"):
        sel = make_selector(TrainConfig(pool=POOL, method=name, lag_discount=0.5, **refs), 20, weak, strong)
        assert sel._lag_discount == 0.5, name  # type: ignore[attr-defined]


def test_the_rollout_mode_decides_what_the_config_allows() -> None:
    """What used to be name checks: a method that rolls out itself takes no dynamic sampling or
    guard, a planned one checks its plan's bounds (named by the method)."""
    for m in METHODS.values():
        if not m.trainer:
            continue
        refs = {"weak_column": "w", "strong_column": "s"} if m.references == "required" else {}
        embeddings = {"embeddings": "policy"} if "embeddings" in m.signals else {}  # bots-embed, bots-sim read them
        base = TrainConfig(pool=POOL, method=m.name, **refs, **embeddings)
        if m.rollout_mode is RolloutMode.CALLBACK:
            with pytest.raises(ConfigError, match="^dynamic_sampling: method"):
                base.replace(dynamic_sampling=True)
        if m.rollout_mode is not RolloutMode.PLAIN:
            with pytest.raises(ConfigError, match="^guard: works with methods that select"):
                base.replace(guard=True)
        else:
            assert base.replace(guard=True).guard
        if m.rollout_mode is RolloutMode.PLANNED:
            with pytest.raises(ConfigError, match="^n_max: must be >= n_min=8, got 4"):
                base.replace(n_max=4)
