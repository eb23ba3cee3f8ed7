"""The trainer's DAPO mode on top of BOTS: every rolled-out group reaches BOTS, filtered or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from bots_rft import BOTS, Interpolation  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402
from test_train import cfg  # noqa: E402  (the trainer tests' config; their toy_pool fixture is in conftest)

pytestmark = pytest.mark.slow


def _cfg(pool: Path, out: Path, **kw: Any) -> Any:
    """The trainer tests' toy run, with BOTS proposing and DAPO's filter on."""
    base: dict[str, Any] = dict(
        batch_size=3,
        mini_batch_size=3,
        micro_batch_size=12,
        max_new_tokens=4,
        warmup_steps=1,
        eval_every=0,
        method="bots",
        dynamic_sampling=True,
        oversample=2.0,
        max_rounds=2,
    )
    base.update(kw)
    return cfg(pool, out, **base)


def test_bots_learns_from_every_group_dynamic_sampling_rolled_out(toy_pool: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(_cfg(toy_pool, tmp_path))
    try:
        sel = trainer.selector  # BOTS proposes every generation batch of the trainer's fill loop
        assert isinstance(sel, BOTS)
        rolled: list[np.ndarray] = []
        inner = trainer.score

        def recording(ro: Any) -> Any:  # every group the trainer rolls out and scores
            ro = inner(ro)
            rolled.append(np.stack([ro.task_ids.numpy(), ro.rewards.sum(1).numpy()]))
            return ro

        trainer.score = recording  # type: ignore[method-assign]
        # Replay by hand: a BOTS built like the trainer's, fed every rolled-out group once per
        # step, must hold exactly the trainer's posterior; one fed only the trained batch must not.
        cfg = trainer.cfg
        evidence = Interpolation(trainer.weak, trainer.strong, momentum=cfg.momentum, min_gap=cfg.min_gap)
        everything = BOTS(12, lam=cfg.lam, rho=cfg.rho, n_rollouts=4, evidence=evidence)
        kept_only = BOTS(
            12,
            lam=cfg.lam,
            rho=cfg.rho,
            n_rollouts=4,
            evidence=Interpolation(trainer.weak, trainer.strong, momentum=cfg.momentum, min_gap=cfg.min_gap),
        )
        dropped = 0
        for step in range(1, 4):
            rolled.clear()
            rec = trainer.train_step()
            groups = np.concatenate(rolled, axis=1)
            ids, succ = groups[0].astype(np.int64), groups[1]
            assert ids.size == 6 * len(rolled) and np.unique(ids).size == ids.size  # no task twice a step
            assert rec["rollouts"] == 3 * 4 + rec["extra_rollouts"]
            assert set(rec["task_ids"]) <= set(ids.tolist())  # the trained batch is a subset
            dropped += ids.size - len(rec["task_ids"])
            assert sel.num_updates == step  # one update per step, however many rounds
            everything.update(ids, succ, 4.0)
            kept_only.update(np.asarray(rec["task_ids"]), np.asarray(rec["successes"]), 4.0)
            assert np.array_equal(sel.alpha, everything.alpha)
            assert np.array_equal(sel.beta, everything.beta)
        assert dropped > 0
        assert not np.array_equal(sel.alpha + sel.beta, kept_only.alpha + kept_only.beta)
    finally:
        trainer.close()


def test_dynamic_sampling_resume_is_exact(toy_pool: Path, tmp_path: Path) -> None:
    straight = train(_cfg(toy_pool, tmp_path / "a", steps=4))
    train(_cfg(toy_pool, tmp_path / "b", steps=2))
    resumed = train(_cfg(toy_pool, tmp_path / "b", steps=4, resume=True))
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"]
        assert ra["extra_rollouts"] == rb["extra_rollouts"]


def test_dynamic_sampling_is_refused_without_rollouts(toy_pool: Path) -> None:
    from bots_rft.errors import ConfigError
    from bots_rft.train.run_selector import make_selector

    with pytest.raises(ConfigError, match="dynamic_sampling"):
        make_selector(_cfg(toy_pool, Path("unused")), 12, None, None, rollout=None)


@pytest.mark.parametrize("method", ["bots", "dynamic"])
def test_resumes_a_checkpoint_whose_selector_wrapped_the_method(method: str, toy_pool: Path, tmp_path: Path) -> None:
    """Dynamic sampling used to be a selector wrapping the method (or, for method=dynamic, its own
    epoch walk), checkpointed as one ``dynamic_sampling`` state in selector_state.bots. Such a
    checkpoint resumes as if the run had never stopped."""
    from bots_rft.checkpoint import load_state, save_state

    kw = {"method": method, "dynamic_sampling": method != "dynamic"}
    straight = train(_cfg(toy_pool, tmp_path / "a", steps=4, **kw))
    train(_cfg(toy_pool, tmp_path / "b", steps=2, **kw))
    ckpt = tmp_path / "b" / "checkpoints" / "step_000002"
    if method == "dynamic":  # the epoch walk: the same fields, under the wrapper's kind
        walk = load_state(ckpt / "selector_state.bots")
        wrapped = {**walk, "kind": "dynamic_sampling", "proposer": None}
    else:  # the method's state inside the wrapper's, beside the wrapper's own epoch walk
        wrapped = {
            "kind": "dynamic_sampling",
            "proposer": BOTS.load(ckpt / "selector.bots").state_dict(),
            "num_tasks": 12,
            "seed": 0,
            "rng": np.random.default_rng(0).bit_generator.state,
            "perm": np.arange(12, dtype=np.int64),
            "cursor": 0,
            "extra_rollouts": 6,
            "total_rollouts": 30,
        }
        (ckpt / "selector.bots").unlink()
    save_state(ckpt / "selector_state.bots", wrapped)
    resumed = train(_cfg(toy_pool, tmp_path / "b", steps=4, resume=True, **kw))
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        assert ra["task_ids"] == rb["task_ids"] and ra["successes"] == rb["successes"] and ra["loss"] == rb["loss"]
