"""The starvation / verifier-failure guard in ``bots train`` (``guard=true``): config errors naming
the key, a group whose verifier never matches flagged in the records and kept at its minimum share
in every batch, and an exact resume of the guard's counters."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.data import TaskPool  # noqa: E402
from bots_rft.errors import ConfigError  # noqa: E402
from bots_rft.selector.guard import AllZeroGroupWarning  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.toy import toy_config, toy_rows  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402
from bots_rft.train.trainer import log as trainer_log  # noqa: E402

pytestmark = pytest.mark.slow

BROKEN = "toy/broken"


@pytest.fixture(scope="module")
def two_source_pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 toy tasks; the last 4 are a source whose answers no response can match (r = 1 mod 1)."""
    rows = toy_rows(12)
    for row in rows[8:]:
        row["data_source"] = BROKEN
        row["reward_model"] = {**row["reward_model"], "ground_truth": "1/1"}
    path = tmp_path_factory.mktemp("guard") / "train.parquet"
    TaskPool.from_records(rows).to_parquet(path)
    return path


def cfg(pool: Path, out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        steps=3,
        batch_size=4,
        rollouts=2,
        mini_batch_size=2,
        micro_batch_size=8,
        max_new_tokens=4,
        lr=1e-3,
        warmup_steps=2,
        weak_column="weak_pass_rate",
        strong_column="strong_pass_rate",
        eval_every=0,
        guard=True,
        guard_min_share=0.25,
        guard_zero_streak=2,
    )
    return toy_config(pool, out, **{**base, **kw})


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"guard_min_share": -0.1}, "guard_min_share"),
        ({"guard_min_share": 1.5}, "guard_min_share"),
        ({"guard_zero_streak": 0}, "guard_zero_streak"),
        ({"guard_groups": "prompt"}, "guard_groups"),
        ({"method": "dynamic"}, "guard"),
        ({"dynamic_sampling": True}, "guard"),
        ({"method": "bots-plan"}, "guard"),
    ],
)
def test_config_errors_name_the_key(change: dict[str, Any], key: str, two_source_pool: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}:"):
        cfg(two_source_pool, tmp_path, **change)


def test_share_above_one_per_group_is_the_configs_error(two_source_pool: Path, tmp_path: Path) -> None:
    # Two groups hold at most 1/2 each: the bound needs the pool, so the trainer checks it.
    with pytest.raises(ConfigError, match=r"^guard_min_share:.*1/2"):
        GRPOTrainer(cfg(two_source_pool, tmp_path, guard_min_share=0.6))


class _Lines(logging.Handler):
    """The messages logged to one logger, caught on that logger itself: caplog listens on the
    root logger, which a library another test imported may have replaced."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("method", ["bots", "random"])
def test_broken_group_is_flagged_and_keeps_its_share(
    method: str, two_source_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The trainer's own logger object: AReaL's getLogger (imported by another test) replaces the
    # logging manager, after which logging.getLogger returns a new logger of the same name.
    logger = trainer_log
    monkeypatch.setattr(logger, "disabled", False)
    monkeypatch.setattr(logger, "level", logging.WARNING)
    caught = _Lines()
    logger.addHandler(caught)
    try:
        with pytest.warns(AllZeroGroupWarning, match=BROKEN):
            res = train(cfg(two_source_pool, tmp_path, method=method, steps=4))
    finally:
        logger.removeHandler(caught)
    steps = [r for r in read_metrics(res.metrics_path) if r["kind"] == "train"]
    assert len(steps) == 4
    quota = math.ceil(0.25 * 4)
    for r in steps:
        broken = [t for t in r["task_ids"] if t >= 8]
        assert len(broken) >= quota and len(set(r["task_ids"])) == 4
        assert all(s == 0 for t, s in zip(r["task_ids"], r["successes"]) if t >= 8)
    # Flagged from the update that made its second all-zero streak, and from then on.
    first = next(i for i, r in enumerate(steps) if r["guard_flagged"])
    assert first == 1
    for r in steps[first:]:
        assert r["guard_flagged"] == [BROKEN] and r["bots/all_zero_groups"] == 1.0
    assert steps[0]["guard_flagged"] == [] and steps[0]["bots/all_zero_groups"] == 0.0
    lines = [m for m in caught.messages if m.startswith("guard: group")]
    assert len(lines) == 1 and BROKEN in lines[0]


def test_resume_is_exact_with_the_guard(two_source_pool: Path, tmp_path: Path) -> None:
    # 2 steps, resume, 2 more == 4 straight: selections, successes, loss and the guard's flags
    # (the flag comes at step 2, so the resumed half starts from saved counters).
    with pytest.warns(AllZeroGroupWarning):
        straight = train(cfg(two_source_pool, tmp_path / "a", steps=4, guard_zero_streak=3))
        train(cfg(two_source_pool, tmp_path / "b", steps=2, guard_zero_streak=3))
        resumed = train(cfg(two_source_pool, tmp_path / "b", steps=4, guard_zero_streak=3, resume=True))
    assert (tmp_path / "b" / "checkpoints" / "step_000002" / "guard_state.bots").exists()
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"]
        assert ra["loss"] == rb["loss"]
        assert ra["guard_flagged"] == rb["guard_flagged"]
    assert a[1]["guard_flagged"] == [] and a[2]["guard_flagged"] == [BROKEN]
