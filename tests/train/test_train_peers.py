"""``bots train`` with the methods that roll out inside their own selection (greso, speed,
knapsack, reinforce-ada, bots-screen) on CPU with the tiny model and the toy pool: the selector's
rollout callback generates and scores real completions, each trained group is taken from its
task's kept rows with the trials the selector reports, the record charges every rollout generated,
queued prompts' rows survive a checkpoint, and a resumed run is exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from bots_rft.errors import CheckpointError, ConfigError, InvalidArgumentError  # noqa: E402
from bots_rft.selector.protocol import RolledBatch  # noqa: E402
from bots_rft.train.distributed import Dist  # noqa: E402
from bots_rft.train.logger import read_metrics  # noqa: E402
from bots_rft.train.rollout import PlannedRollouts, Rollouts  # noqa: E402
from bots_rft.train.self_rolling import trained_rows  # noqa: E402
from bots_rft.train.toy import toy_config  # noqa: E402
from bots_rft.train.trainer import GRPOTrainer, train  # noqa: E402

pytestmark = pytest.mark.slow

PEERS = ("greso", "speed", "knapsack", "reinforce-ada", "bots-screen")


def cfg(pool: Path, out: Path, method: str, **kw: Any) -> Any:
    base: dict[str, Any] = dict(
        method=method,
        steps=3,
        batch_size=4,
        rollouts=4,
        mini_batch_size=2,
        micro_batch_size=8,
        max_new_tokens=6,
        lr=1e-3,
        warmup_steps=2,
        eval_every=0,
        # Smaller than the published sizes, so the tiny model's steps stay short.
        n_init=2,
        n_continue=4,
        rounds=3,
        round_repeat=4,
    )
    return toy_config(pool, out, **{**base, **kw})


@pytest.mark.parametrize(
    ("method", "engine"),
    [("greso", "fast"), ("speed", "hf"), ("knapsack", "fast"), ("reinforce-ada", "fast"), ("bots-screen", "fast")],
)
def test_each_peer_trains_on_the_groups_it_rolled_out_and_is_charged_every_rollout(
    method: str, engine: str, toy_pool: Path, tmp_path: Path
) -> None:
    trainer = GRPOTrainer(cfg(toy_pool, tmp_path, method, rollout_engine=engine))
    sel = trainer.selector
    before = json.dumps(sel.state_dict(), default=str)
    alpha0, beta0 = sel.bots.posterior(np.arange(12)) if method == "bots-screen" else (None, None)
    steps: list[dict[str, Any]] = []  # per step: rounds generated, batch handed over, groups trained
    callback, select, take_batch, optimise = sel.rollout, sel.select, sel.take_batch, trainer.optimise

    def spy_rollout(ids: Any, counts: Any) -> Any:
        out = callback(ids, counts)
        steps[-1]["rounds"].append((np.asarray(ids).tolist(), np.asarray(counts).tolist(), out.tolist()))
        return out

    def spy_select(*args: Any, **kw: Any) -> Any:
        steps.append({"rounds": []})
        return select(*args, **kw)

    def spy_take_batch() -> RolledBatch | None:
        steps[-1]["batch"] = batch = take_batch()
        return batch

    def spy_optimise(ro: Any) -> dict[str, float]:
        assert isinstance(ro, PlannedRollouts)
        steps[-1]["trained"] = (ro.task_ids, ro.counts, ro.task_rewards())
        stats = optimise(ro)
        steps[-1]["kept_after"] = sorted(trainer.kept.rows)
        steps[-1]["queued_after"] = sorted(trainer.queued_ids())
        return stats

    sel.rollout, sel.select, sel.take_batch, trainer.optimise = spy_rollout, spy_select, spy_take_batch, spy_optimise  # type: ignore[method-assign]
    res = trainer.run()
    trainer.close()
    recs = [r for r in read_metrics(res.metrics_path) if r["kind"] == "train"]
    assert res.steps_done == 3 and len(recs) == len(steps) == 3
    cum = 0
    for rec, step in zip(recs, steps):
        batch: RolledBatch = step["batch"]
        generated = sum(sum(counts) for _, counts, _ in step["rounds"])
        # Charged: every rollout generated, screening and discarded groups included.
        assert rec["rollouts"] == generated == batch.rollouts
        assert rec["generation_rounds"] == len(step["rounds"])
        cum += generated
        assert rec["cum_rollouts"] == cum
        # Trained: the selector's groups, each with the trials it reported, in its order.
        ids, counts, rewards = step["trained"]
        assert ids == rec["task_ids"] == batch.task_ids.tolist()
        assert counts == [int(t) for t in batch.trials] == rec["rollout_counts"] == [len(r) for r in rewards]
        assert rec["trained_rollouts"] == sum(counts)
        assert rec["successes"] == [sum(r) for r in rewards]
        assert rec["successes"] == batch.successes.tolist()  # binary rewards: the subset has its successes
        assert all(set(r) <= {0.0, 1.0} for r in rewards) and np.isfinite(rec["loss"])
        # Rows are kept only for the prompts the selector still queues.
        assert step["kept_after"] == step["queued_after"]
    assert sel.total_rollouts == cum  # the selector counted what the trainer generated
    assert json.dumps(sel.state_dict(), default=str) != before  # its state advanced
    if method in ("speed", "bots-screen"):
        assert sel.screened > 0 and sel.passed > 0
        assert any(len(counts) and set(counts) == {2} for s in steps for _, counts, _ in s["rounds"])  # screening
        assert all(c in (2, 6) for s in steps for c in s["trained"][1])  # n_init + n_continue, or a failed screen
    if method == "knapsack":
        assert (sel.rewards_seen > 0).sum() == 12  # every prompt of the epoch rolled out and buffered
        # an estimate counts once a prompt has had 8 rewards (the authors' reward buffer)
        assert np.array_equal(np.isfinite(sel.estimate), sel.rewards_seen >= 8)
    if method == "reinforce-ada":
        assert all(c == 4 for s in steps for c in s["trained"][1])  # keep rows of up to rounds x round_repeat
        assert any(len(s["rounds"]) > 1 for s in steps)  # a prompt without both outcomes went on sampling
        assert any(r["rollouts"] > r["trained_rollouts"] for r in recs)  # and trained on a subset of its rows
    if method == "greso":
        assert sel.walked >= 12 and all(c == 4 for s in steps for c in s["trained"][1])
    if method == "bots-screen":  # every rollout is BOTS's evidence
        alpha, beta = sel.bots.posterior(np.arange(12))
        assert not (np.array_equal(alpha, alpha0) and np.array_equal(beta, beta0))


# --------------------------------------------------------------------------- the subset rule
def test_trained_rows_takes_every_row_when_the_counts_match_else_the_highest_then_the_lowest() -> None:
    assert trained_rows([1.0, 0.0, 1.0], 2.0, 3) == [0, 1, 2]
    # Reinforce-Ada's balanced subset of 4 out of 8 binary rewards: 2 correct, 2 incorrect, the
    # earliest of each, in generation order.
    assert trained_rows([0, 1, 1, 0, 1, 0, 0, 1], 2.0, 4) == [0, 1, 2, 3]
    # Fewer correct rows than half: all correct ones, the rest incorrect.
    assert trained_rows([0, 0, 0, 1, 0, 0], 1.0, 4) == [0, 1, 2, 3]
    # Graded rewards: round(successes) highest, then the lowest for the rest.
    assert trained_rows([0.2, 0.9, 0.5, 0.0, 0.7], 1.6, 3) == [1, 3, 4]
    assert trained_rows([0.2, 0.9, 0.5, 0.0, 0.7], 0.0, 2) == [0, 3]
    with pytest.raises(InvalidArgumentError, match="trials: the selector trains on 5 rollouts of a task that has 3"):
        trained_rows([1.0, 0.0, 1.0], 1.0, 5)


def test_kept_rows_merge_calls_and_round_trip_through_a_checkpoint(tmp_path: Path) -> None:
    from bots_rft.train.run_checkpoint import load_tree, save_tree
    from bots_rft.train.self_rolling import KeptRows

    def part(tid: int, n: int, width: int, plen: int, reward: float) -> Rollouts:
        ids = torch.arange(n * width).reshape(n, width)
        return Rollouts(
            task_ids=torch.tensor([tid]),
            n=n,
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            prompt_len=plen,
            completion_mask=torch.ones(n, width - plen, dtype=torch.long),
            texts=[f"{tid}:{i}" for i in range(n)],
            rewards=torch.full((1, n), reward),
        )

    kept = KeptRows(pad=0)
    kept.add(PlannedRollouts([part(3, 2, 5, 2, 1.0)], [(0, 0)]))
    kept.add(PlannedRollouts([part(3, 4, 7, 3, 0.0)], [(0, 0)]))  # a later call, padded differently
    ro = kept.rows[3]
    assert ro.n == 6 and ro.prompt_len == 3 and ro.input_ids.shape == (6, 3 + 4)
    assert ro.rewards.tolist() == [[1.0, 1.0, 0.0, 0.0, 0.0, 0.0]] and ro.texts[2] == "3:0"  # type: ignore[union-attr]
    assert ro.attention_mask[:2, 0].tolist() == [0, 0]  # the earlier call's prompt re-padded on the left
    group = kept.group(3, 1.0, 2)  # one correct row (the first), one incorrect (the first of those)
    assert (
        group.n == 2 and torch.equal(group.input_ids, ro.input_ids[[0, 2]]) and group.rewards.tolist() == [[1.0, 0.0]]
    )  # type: ignore[union-attr]
    save_tree(tmp_path, "rows", kept.state())
    back = KeptRows(pad=0)
    back.load_state(load_tree(tmp_path, "rows"), str(tmp_path))
    got = back.rows[3]
    assert got.texts == ro.texts and got.prompt_len == ro.prompt_len
    assert all(torch.equal(getattr(got, f), getattr(ro, f)) for f in ("input_ids", "attention_mask", "rewards"))
    with pytest.raises(CheckpointError, match="malformed queued completions"):
        back.load_state({"tasks": [{"task_id": 1}]}, "x")
    with pytest.raises(InvalidArgumentError, match="task 5 has no kept completions"):
        kept.group(5, 0.0, 2)


# --------------------------------------------------------------------------- resume
@pytest.mark.parametrize(("method", "extra"), [("speed", {"gen_ratio": 2.0}), ("reinforce-ada", {})])
def test_a_resumed_peer_run_is_exact(method: str, extra: dict[str, Any], toy_pool: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    from bots_rft.checkpoint import load_state
    from bots_rft.train.run_checkpoint import load_tree

    def latest(out: Path) -> Path:
        return out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()

    straight = train(cfg(toy_pool, tmp_path / "a", method, steps=4, **extra))
    assert train(cfg(toy_pool, tmp_path / "b", method, steps=2, **extra)).steps_done == 2
    if method == "speed":  # the checkpoint holds a queue, and the rows of every queued prompt
        state = load_state(latest(tmp_path / "b") / "selector_state.bots")
        queued = set(np.asarray(state["qualified_ids"]).tolist()) | set(np.asarray(state["ready_ids"]).tolist())
        rows = load_tree(latest(tmp_path / "b"), "queued_rows")
        assert queued and {int(t["task_id"]) for t in rows["tasks"]} == queued
    resumed = train(cfg(toy_pool, tmp_path / "b", method, steps=4, resume=True, **extra))
    a = [r for r in read_metrics(straight.metrics_path) if r["kind"] == "train"]
    b = [r for r in read_metrics(resumed.metrics_path) if r["kind"] == "train"]
    assert [r["step"] for r in b] == [1, 2, 3, 4]
    for ra, rb in zip(a, b):
        for key in ("task_ids", "rollout_counts", "successes", "rollouts", "generation_rounds", "cum_rollouts", "loss"):
            assert ra[key] == rb[key], key
    wa, wb = (
        load_file(latest(tmp_path / "a") / "model.safetensors"),
        load_file(latest(tmp_path / "b") / "model.safetensors"),
    )
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # The method's rollout parameters are part of what a checkpoint was trained with.
    key, value = ("n_init", 4) if method == "speed" else ("keep", 2)
    with pytest.raises(ConfigError, match=rf"{key}: the checkpoint .* trained with"):
        GRPOTrainer(cfg(toy_pool, tmp_path / "b", method, steps=5, resume=True, **{**extra, key: value}))


def test_a_checkpoint_missing_queued_rows_is_refused(toy_pool: Path, tmp_path: Path) -> None:
    run = cfg(toy_pool, tmp_path, "speed", steps=2, gen_ratio=2.0)
    train(run)
    ckpt = tmp_path / "checkpoints" / (tmp_path / "checkpoints" / "latest").read_text().strip()
    for f in ckpt.glob("queued_rows.*"):
        f.unlink()
    with pytest.raises(CheckpointError, match=r"queues task \d+ for training but holds no completions"):
        GRPOTrainer(cfg(toy_pool, tmp_path, "speed", steps=3, gen_ratio=2.0, resume=True))


@pytest.mark.parametrize("method", PEERS)
def test_peers_refuse_data_parallel_runs_naming_the_key(
    method: str, toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bots_rft.train.trainer as trainer_module

    monkeypatch.setattr(trainer_module.Dist, "from_env", classmethod(lambda cls, device: Dist(0, 2, 0, False)))
    with pytest.raises(ConfigError, match=rf"method: '{method}' trains on one process .* got 2 processes"):
        GRPOTrainer(cfg(toy_pool, tmp_path, method))
