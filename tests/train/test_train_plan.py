"""``bots train --method bots-plan`` on CPU with the tiny model and the toy pool: each step's plan
(tasks and a rollout count per task) is rolled out count by count with either engine, the selector
learns each task's successes out of its own count, the record charges the rollouts spent, the GRPO
update over groups of different sizes reduces to the fixed-size one, and a resumed run is exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft import BOTS  # noqa: E402
from bots_rft.errors import ConfigError  # noqa: E402
from bots_rft.train import load_config  # noqa: E402
from bots_rft.train.distributed import Dist  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.optimise import grpo_update  # noqa: E402
from bots_rft.train.policy import load_policy  # noqa: E402
from bots_rft.train.rollout import PlannedRollouts, generate_planned_rollouts, generate_rollouts  # noqa: E402
from bots_rft.train.toy import toy_config  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402

pytestmark = pytest.mark.slow

BUDGET = 16  # batch_size 4 x rollouts 4


def cfg(pool: Path, out: Path, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        method="bots-plan",
        n_min=2,
        n_max=8,
        steps=3,
        batch_size=4,
        rollouts=4,
        mini_batch_size=2,
        micro_batch_size=4,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=2,
        weak_column="weak_pass_rate",
        strong_column="strong_pass_rate",
        eval_every=0,
    )
    return toy_config(pool, out, **{**base, **kw})


@pytest.mark.parametrize("engine", ["hf", "fast"])
def test_each_task_is_rolled_out_its_planned_count_and_the_selector_learns_it(
    engine: str, toy_pool: Path, tmp_path: Path
) -> None:
    trainer = GRPOTrainer(cfg(toy_pool, tmp_path, rollout_engine=engine))
    sel = trainer.selector
    assert isinstance(sel, BOTS)
    plans: list[tuple[list[int], list[int]]] = []
    rolled: list[tuple[list[int], list[int]]] = []  # ids and rows generated per task
    updates: list[tuple[list[int], list[float], list[float]]] = []
    plan, roll_out_plan, update = sel.plan, trainer.roll_out_plan, sel.update

    def spy_plan(*args: Any, **kw: Any) -> Any:
        p = plan(*args, **kw)
        plans.append((p.ids.tolist(), p.counts.tolist()))
        return p

    def spy_roll_out(ids: list[int], counts: list[int]) -> PlannedRollouts:
        ro = roll_out_plan(ids, counts)
        rolled.append((ro.task_ids, [len(x) for x in ro.task_lengths()]))
        return ro

    def spy_update(ids: Any, successes: Any, trials: Any, *args: Any, **kw: Any) -> None:
        updates.append((np.asarray(ids).tolist(), np.asarray(successes).tolist(), np.asarray(trials).tolist()))
        update(ids, successes, trials, *args, **kw)

    sel.plan, trainer.roll_out_plan, sel.update = spy_plan, spy_roll_out, spy_update  # type: ignore[method-assign,assignment]
    res = trainer.run()
    trainer.close()
    steps = [r for r in read_metrics(res.metrics_path) if r["kind"] == "train"]
    assert res.steps_done == 3 and len(steps) == len(plans) == len(rolled) == len(updates) == 3
    cum = 0
    for rec, (ids, counts), (rolled_ids, rows), (fed_ids, fed_successes, fed_trials) in zip(
        steps, plans, rolled, updates
    ):
        assert rec["task_ids"] == ids == rolled_ids == fed_ids
        assert rows == counts == rec["rollout_counts"] == [int(t) for t in fed_trials]  # per-task trials
        assert all(2 <= c <= 8 for c in counts) and sum(counts) <= BUDGET
        assert fed_successes == rec["successes"] and all(0 <= s <= c for s, c in zip(rec["successes"], counts))
        cum += sum(counts)
        assert rec["rollouts"] == sum(counts) and rec["extra_rollouts"] == 0 and rec["cum_rollouts"] == cum
        assert rec["rollouts_per_task"] == pytest.approx(np.mean(counts))
        assert sum(rec["rollout_count_hist"].values()) == len(ids)
        assert np.isfinite(rec["loss"]) and rec["optimizer_updates"] == 2  # batch 4 / mini-batch 2, as bots
        assert 0.0 <= rec["etr"] <= 1.0 and rec["pick_theta_p50"] is not None


def test_a_resumed_bots_plan_run_is_exact(toy_pool: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    def weights(out: Path) -> dict[str, Any]:
        ckpt = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
        return load_file(ckpt / "model.safetensors")

    straight = train(cfg(toy_pool, tmp_path / "a", steps=4))
    assert train(cfg(toy_pool, tmp_path / "b", steps=2)).steps_done == 2
    resumed = train(cfg(toy_pool, tmp_path / "b", steps=4, resume=True))
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("task_ids", "rollout_counts", "successes", "cum_rollouts", "loss"):
            assert ra[key] == rb[key], key
    wa, wb = weights(tmp_path / "a"), weights(tmp_path / "b")
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # The plan's bounds are part of what a checkpoint was trained with.
    with pytest.raises(ConfigError, match=r"n_max: .*8.*16"):
        GRPOTrainer(cfg(toy_pool, tmp_path / "b", steps=5, resume=True, n_max=16))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"n_min": 1}, r"n_min: GRPO needs at least 2 rollouts per planned task, got 1"),
        ({"n_min": 4, "n_max": 3}, r"n_max: must be >= n_min=4, got 3"),
        ({"n_min": 32, "n_max": 32}, r"n_min: the plan's budget batch_size \* rollouts = 16 .*got 32"),
        ({"dynamic_sampling": True}, r"dynamic_sampling: .*bots-plan"),
        ({"n_max": 0}, r"n_max"),
        ({"n_min": "many"}, r"n_min: expected int, got 'many'"),
    ],
)
def test_plan_bounds_are_checked_naming_the_key(toy_pool: Path, tmp_path: Path, overrides: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cfg(toy_pool, tmp_path, **overrides)


def test_plan_bounds_do_not_concern_other_methods(toy_pool: Path, tmp_path: Path) -> None:
    assert cfg(toy_pool, tmp_path, method="bots", n_min=32, n_max=32).n_min == 32


# ------------------------------------------------------------------- planned rollouts, GRPO
@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    return load_policy("tiny", "cpu", "auto", 0)


def _chats(k: int) -> list[Any]:
    return [[{"role": "user", "content": f"Task {i}: say something."}] for i in range(k)]


@pytest.mark.parametrize("engine", ["hf", "fast"])
def test_planned_rollouts_group_tasks_by_count(tiny: tuple[Any, Any], engine: str) -> None:
    model, tok = tiny
    torch.manual_seed(0)
    ro = generate_planned_rollouts(
        model, tok, _chats(4), [10, 11, 12, 13], [3, 2, 3, 5], max_new_tokens=4, engine=engine
    )
    assert [p.n for p in ro.parts] == [2, 3, 5]  # one generation batch per distinct count
    assert [p.task_ids.tolist() for p in ro.parts] == [[11], [10, 12], [13]]
    assert ro.task_ids == [10, 11, 12, 13] and ro.counts == [3, 2, 3, 5]
    assert [len(x) for x in ro.task_lengths()] == [3, 2, 3, 5]
    assert [p.input_ids.shape[0] for p in ro.parts] == [2, 6, 5]
    with pytest.raises(ValueError, match="not scored"):
        ro.task_rewards()
    with pytest.raises(ValueError, match="counts: expected one count"):
        generate_planned_rollouts(model, tok, _chats(2), [0, 1], [2], max_new_tokens=4)


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean"])
def test_update_over_planned_groups_equals_the_fixed_size_update(tiny: tuple[Any, Any], loss_agg: str) -> None:
    """Four tasks of 4 rollouts as one batch, or as two parts of a plan (the same groups, in the
    same mini-batches): the same advantages, normaliser and accumulated gradient, so the same
    weights and statistics."""
    import copy

    model, tok = tiny
    torch.manual_seed(1)
    ro = generate_rollouts(model, tok, _chats(4), [0, 1, 2, 3], 4, max_new_tokens=5)
    ro.rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    planned = PlannedRollouts([ro.take([0, 1]), ro.take([2, 3])], [(0, 0), (0, 1), (1, 0), (1, 1)])
    config = load_config(
        None,
        dict(
            pool="unused", batch_size=4, rollouts=4, mini_batch_size=2, micro_batch_size=4, lr=1e-3, loss_agg=loss_agg
        ),
    )
    results = []
    for batch in (ro, planned):
        net = copy.deepcopy(model)
        opt = torch.optim.AdamW(net.parameters(), lr=config.lr)
        stats = grpo_update(net, opt, batch, config.grpo, Dist(0, 1, 0, False), torch.device("cpu"))
        results.append((stats, [p.detach().clone() for p in net.parameters()]))
    (s_fixed, w_fixed), (s_plan, w_plan) = results
    assert s_plan == s_fixed and s_fixed["optimizer_updates"] == 2
    assert all(torch.equal(a, b) for a, b in zip(w_fixed, w_plan))
    assert not all(torch.equal(a, b) for a, b in zip(w_fixed, model.parameters()))  # it did train


def test_evidence_quality_of_a_plan_run_uses_each_task_count() -> None:
    """``bots compare``'s evidence table reads a bots-plan record's rates as successes over each
    task's ``rollout_counts``, not over the config's ``rollouts``."""
    from bots_rft.metrics import effective_probability, roc_auc
    from bots_rft.report.training import RunCurves, evidence_quality

    weak = np.array([0.0, 0.0, 0.0, 0.0, np.nan, 0.2])
    strong = np.array([1.0, 0.5, 0.25, 1.0, 0.5, 0.2])
    recs: list[dict[str, object]] = [{"kind": "config", "config": {"rollouts": 4, "batch_size": 4}}]
    recs.append(
        {"kind": "train", "step": 1, "task_ids": [3], "successes": [0], "rollout_counts": [4], "capability": 0.5}
    )
    # Under μ̃ = 0.5: p̃ = 0.5, 0.25, 0.125, 0.2 for tasks 0, 1, 2, 5; their rates 4/8, 1/2, 0/2, 1/6.
    recs.append(
        {
            "kind": "train",
            "step": 2,
            "task_ids": [0, 1, 2, 5],
            "successes": [4, 1, 0, 1],
            "rollout_counts": [8, 2, 2, 6],
            "capability": 0.7,
        }
    )
    q = evidence_quality(RunCurves("bots-plan", recs), weak, strong)
    p = np.array([0.5, 0.25, 0.125, 0.2])
    assert q is not None and q["steps"] == 1
    assert q["pearson"] == pytest.approx(np.corrcoef(p, [0.5, 0.5, 0.0, 1 / 6])[0, 1])
    effective = np.array([True, True, False, True])
    assert q["auc"] == pytest.approx(roc_auc(effective_probability(p, np.array([8, 2, 2, 6])), effective))  # type: ignore[arg-type]
