"""BOTS inside TRL's GRPOTrainer: a few real GRPO steps with a tiny random-weight model on CPU.

Nothing is downloaded: the tokenizer is built locally (bots_rft.llm.models.byte_tokenizer) and the
model is a tiny random Qwen2. Skipped when trl / datasets are not installed.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, DataError
from bots_rft.integrations.tasks import rows_of_tasks, successes_from_rewards

pytest.importorskip("torch")
from bots_rft.integrations.trl import BOTSRepeatSampler, RewardRecorder  # noqa: E402

pytestmark = pytest.mark.slow

N = 12


class RecordingBOTS(BOTS):
    """BOTS that logs each selection together with the number of updates it had seen (n_rollouts:
    the trainers' num_generations=4 unless given, which attach_bots checks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("n_rollouts", 4)
        super().__init__(*args, **kwargs)
        self.log: list[tuple[int, np.ndarray]] = []

    def select(self, batch_size: int, exclude: Any = None) -> np.ndarray:
        ids = super().select(batch_size, exclude=exclude)
        self.log.append((self.num_updates, ids.copy()))
        return ids


# ------------------------------------------------------------------------ no trainer needed


def test_sampler_keeps_repeat_sampler_layout() -> None:
    sel = BOTS(10, seed=3, threads=1)
    rows = rows_of_tasks([9, 8, 7, 6, 5, 4, 3, 2, 1, 0], 10)  # row r holds task 9 - r
    sampler = BOTSRepeatSampler(sel, rows, mini_repeat_count=2, batch_size=3, repeat_count=2)
    out = list(sampler)
    assert len(out) == len(sampler) == 3 * 3 * 2 * 2
    chunk = out[: 3 * 2]
    assert out[6:12] == chunk  # the chunk repeated repeat_count times
    assert chunk[0::2] == chunk[1::2]  # each index mini_repeat_count times in a row
    assert len(set(chunk)) == 3
    # The same seed and state give the same order: what makes every rank agree.
    twin = BOTSRepeatSampler(BOTS(10, seed=3, threads=1), rows, mini_repeat_count=2, batch_size=3, repeat_count=2)
    assert list(twin) == out


def test_sampler_is_lazy_and_skips_tasks_without_rows() -> None:
    sel = RecordingBOTS(8, seed=0, threads=1)
    rows = rows_of_tasks([0, 2, 4, 6], 8)  # odd tasks are not in the dataset
    sampler = BOTSRepeatSampler(sel, rows, mini_repeat_count=1, batch_size=2)
    it = iter(sampler)
    assert sel.log == []  # nothing chosen before the loader asks
    first = [next(it), next(it)]
    assert len(sel.log) == 1 and set(sel.log[0][1].tolist()) <= {0, 2, 4, 6}
    assert first == rows[sel.log[0][1]].tolist()
    sel.update(sel.log[0][1], [1.0, 0.0], 1.0)
    next(it)
    assert sel.log[1][0] == 1  # the second chunk saw the update


def test_rows_of_tasks_refuses_duplicates_and_out_of_range() -> None:
    with pytest.raises(DataError, match="occurs on 2 rows"):
        rows_of_tasks([0, 1, 1], 3)
    with pytest.raises(DataError, match="outside"):
        rows_of_tasks([0, 5], 3)


def test_recorder_reads_nested_ids_and_none_rewards() -> None:
    rec = RewardRecorder("extra_info.index")

    def reward(prompts: Any, completions: Any, **kw: Any) -> list[float | None]:
        return [1.0, None, 0.5]

    wrapped = rec.wrap(reward)
    assert wrapped.__name__ == "reward"
    wrapped(prompts=["a"] * 3, completions=["x"] * 3, extra_info=[{"index": 4}, {"index": 4}, {"index": 2}])
    ids, rewards = rec.take()
    assert ids.tolist() == [4, 4, 2]
    assert np.isnan(rewards[1]) and rewards[2] == 0.5
    assert rec.take()[0].size == 0
    assert successes_from_rewards([2.0, -1.0, np.nan], None)[:2].tolist() == [1.0, 0.0]
    assert successes_from_rewards([0.3, 0.7], 0.5).tolist() == [0.0, 1.0]


# ------------------------------------------------------------------------ real GRPOTrainer


def _trainer(tmp_path: Any, *, deterministic: bool = False, **overrides: Any) -> tuple[Any, list[list[int]]]:
    pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from bots_rft.llm.models import byte_tokenizer, tiny_model

    torch.manual_seed(0)
    tok = byte_tokenizer()
    model = tiny_model(tok)
    # Row r holds task N-1-r, so row index and task id differ.
    ds = datasets.Dataset.from_dict(
        {"prompt": [f"task {N - 1 - r}:" for r in range(N)], "task_id": [N - 1 - r for r in range(N)]}
    )
    scored: list[list[int]] = []

    def accuracy(prompts: list[str], completions: list[str], task_id: list[int], **kw: Any) -> list[float]:
        scored.append(list(task_id))

        # Tasks 0 mod 3 always pass, 1 mod 3 always fail, the rest pass on half their rollouts:
        # by rollout position (deterministic) or by the completion (depends on the model).
        def mixed(i: int, c: str) -> float:
            return float(i % 2) if deterministic else float(len(c) % 2)

        return [
            1.0 if t % 3 == 0 else 0.0 if t % 3 == 1 else mixed(i, c)
            for i, (t, c) in enumerate(zip(task_id, completions))
        ]

    cfg: dict[str, Any] = dict(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=3,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        seed=0,
        beta=0.0,
        disable_tqdm=True,
    )
    cfg.update(overrides)
    trainer = GRPOTrainer(
        model=model, reward_funcs=[accuracy], args=GRPOConfig(**cfg), train_dataset=ds, processing_class=tok
    )
    return trainer, scored


def test_grpo_trains_on_bots_choices(tmp_path: Any) -> None:
    from bots_rft.integrations.trl import SELECTOR_FILE, attach_bots, load_selector

    trainer, scored = _trainer(tmp_path, save_strategy="steps", save_steps=3)
    sel = RecordingBOTS(N, seed=1, threads=1)
    hook = attach_bots(trainer, sel, task_id_column="task_id")
    trainer.train()

    assert hook.num_feeds == 3 and sel.num_updates == 3
    assert len(scored) == 3 and len(sel.log) == 3
    for step, (updates_seen, chosen) in enumerate(sel.log):
        assert updates_seen == step  # chosen after every earlier generation was fed back: no lag
        assert scored[step] == np.repeat(chosen, 4).tolist()  # the generation used exactly that chunk
    # The posterior moved on the rolled-out tasks, by their rewards.
    alpha, beta = sel.alpha.copy(), sel.beta.copy()
    chosen_all = np.unique(np.concatenate([c for _, c in sel.log]))
    assert np.any(alpha[chosen_all] + beta[chosen_all] > 2.5)
    for t in chosen_all:
        if t % 3 == 0:
            assert alpha[t] > beta[t]
        elif t % 3 == 1:
            assert beta[t] > alpha[t]
    # The checkpoint folder carries the selector, and it resumes exactly.
    restored = load_selector(tmp_path / "checkpoint-3", threads=1)
    assert (tmp_path / "checkpoint-3" / SELECTOR_FILE).exists()
    np.testing.assert_array_equal(restored.alpha, alpha)
    np.testing.assert_array_equal(restored.select(2), BOTS.select(sel, 2))


def test_grpo_generation_reuse_and_fetch_mode(tmp_path: Any) -> None:
    from bots_rft.integrations.trl import attach_bots

    # Two gradient-accumulation slices per generation, each generation used for two iterations:
    # one generation (and one selection) every 4 optimiser steps: steps 0 and 4 of 5.
    trainer, scored = _trainer(
        tmp_path, per_device_train_batch_size=4, steps_per_generation=2, num_iterations=2, max_steps=5
    )
    sel = RecordingBOTS(N, seed=2, threads=1)
    attach_bots(trainer, sel)
    trainer.train()
    assert len(sel.log) == len(scored) == sel.num_updates == 2
    for (_, chosen), ids in zip(sel.log, scored):
        assert ids == np.repeat(chosen, 4).tolist()

    # select_at="fetch": the plain sampler. Batches still come from the selector.
    trainer, scored = _trainer(tmp_path / "fetch", max_steps=2)
    sel = RecordingBOTS(N, seed=2, threads=1)
    hook = attach_bots(trainer, sel, select_at="fetch", save_with_checkpoints=False)
    trainer.train()
    chunks = [np.repeat(c, 4).tolist() for _, c in sel.log]
    assert scored == chunks[: len(scored)] and sel.num_updates == 2 and hook.num_feeds == 2


def _always_pass_or_fail(task_id: int) -> bool:
    return task_id % 3 != 2


def test_fetch_mode_selects_one_generation_late(tmp_path: Any) -> None:
    """Why select_at='generation' wraps TRL's private generation step: with the plain sampler,
    the data loader's look-ahead (transformers' gradient-accumulation prefetch plus accelerate's
    one-batch look-ahead) draws each chunk before the previous generation was scored."""
    from bots_rft.integrations.trl import attach_bots

    trainer, scored = _trainer(tmp_path, max_steps=3, deterministic=True)
    sel = RecordingBOTS(N, seed=2, threads=1)
    attach_bots(trainer, sel, select_at="fetch", save_with_checkpoints=False)
    trainer.train()
    updates_seen = [seen for seen, _ in sel.log]
    # Generation k (k >= 1) was chosen having seen k - 1 updates, not k.
    assert updates_seen[:3] == [0, 0, 1]
    assert len(sel.log) > len(scored)  # and one more chunk was drawn than was ever generated
    for (_, chosen), ids in zip(sel.log, scored):
        assert ids == np.repeat(chosen, 4).tolist()


def test_bots_metrics_land_in_trl_logs(tmp_path: Any) -> None:
    from bots_rft import Interpolation
    from bots_rft.integrations.trl import attach_bots

    trainer, scored = _trainer(tmp_path, max_steps=3, deterministic=True)
    weak = np.linspace(0.1, 0.6, N)
    sel = RecordingBOTS(N, seed=1, threads=1, evidence=Interpolation(weak, np.clip(weak + 0.3, 0, 1)))
    hook = attach_bots(trainer, sel, save_with_checkpoints=False)
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "bots/etr" in entry]
    assert len(logged) == 3  # one per logging step (logging_steps=1, one generation per step)
    for entry, ids, (_, chosen) in zip(logged, scored, sel.log):
        rewards = np.array([1.0 if t % 3 == 0 else 0.0 if t % 3 == 1 else float(i % 2) for i, t in enumerate(ids)])
        assert entry["bots/mean_reward_of_picks"] == pytest.approx(rewards.mean())
        # ETR: share of the chunk's tasks with some but not all rollouts right (the mixed ones).
        assert entry["bots/etr"] == pytest.approx(np.mean([t % 3 == 2 for t in chosen]))
        assert entry["bots/select_ms"] >= 0 and entry["bots/update_ms"] >= 0
        assert 0 < entry["bots/pick_mean_p10"] <= entry["bots/pick_mean_p50"] <= entry["bots/pick_mean_p90"] < 1
    assert logged[-1]["bots/capability"] == pytest.approx(sel.capability)
    assert hook.last_metrics["bots/capability"] == pytest.approx(sel.capability)
    # The first generation's picks were chosen from the prior: every posterior mean 0.5.
    assert logged[0]["bots/pick_mean_p50"] == pytest.approx(0.5)


def test_resume_from_trl_checkpoint_restores_the_selector_exactly(tmp_path: Any) -> None:
    import shutil

    from bots_rft import CheckpointError
    from bots_rft.integrations.trl import SELECTOR_FILE, attach_bots

    # Uninterrupted: 4 generations, checkpoints at steps 2 and 4.
    trainer, _ = _trainer(tmp_path / "a", max_steps=4, save_strategy="steps", save_steps=2, deterministic=True)
    full = RecordingBOTS(N, seed=5, threads=1)
    attach_bots(trainer, full)
    trainer.train()
    assert (tmp_path / "a" / "checkpoint-2" / SELECTOR_FILE).exists()

    # Interrupted after step 2: a new process builds the same selector from scratch and resumes.
    shutil.copytree(tmp_path / "a" / "checkpoint-2", tmp_path / "b" / "checkpoint-2")
    trainer, _ = _trainer(tmp_path / "b", max_steps=4, save_strategy="steps", save_steps=2, deterministic=True)
    resumed = RecordingBOTS(N, seed=5, threads=1)
    attach_bots(trainer, resumed)
    trainer.train(resume_from_checkpoint=True)  # the newest checkpoint in output_dir, selector included

    assert [seen for seen, _ in resumed.log] == [2, 3]
    for (_, a), (_, b) in zip(full.log[2:], resumed.log):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(resumed.alpha, full.alpha)
    np.testing.assert_array_equal(resumed.beta, full.beta)
    assert resumed.num_selections == full.num_selections and resumed.num_updates == full.num_updates

    # A checkpoint written without BOTS is refused rather than silently resumed from the prior.
    (tmp_path / "c" / "checkpoint-1").mkdir(parents=True)
    trainer, _ = _trainer(tmp_path / "c", max_steps=1)
    fresh = BOTS(N, seed=5, threads=1, n_rollouts=4)
    attach_bots(trainer, fresh)
    with pytest.raises(CheckpointError, match="bots_selector.bots"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "c" / "checkpoint-1"))
    assert fresh.num_updates == 0


def test_every_group_reaches_bots_with_trl_masking_options_on(tmp_path: Any) -> None:
    """Evidence-loss regression: tasks that always pass or always fail carry no GRPO signal, so
    filters drop them, and a selector that never hears of them keeps them at the prior mean 0.5,
    the target, and keeps picking them. GRPOTrainer filters no group; its options that mask
    completions out of the loss act after the rewards. With all of them on, BOTS still gets every
    group: those tasks move to ~1 / ~0 and are not picked again."""
    from bots_rft.integrations.trl import attach_bots

    trainer, scored = _trainer(
        tmp_path,
        max_steps=6,
        deterministic=True,
        mask_truncated_completions=True,  # every completion here is truncated: all masked out
        top_entropy_quantile=0.2,
        off_policy_mask_threshold=0.5,
    )
    # Posterior-mean selection (no Thompson draws) makes "never picked again" exact.
    sel = RecordingBOTS(N, seed=0, threads=1, thompson=False)
    attach_bots(trainer, sel, save_with_checkpoints=False)
    trainer.train()

    assert len(scored) == 6 and sel.num_updates == 6
    fed = sel.alpha + sel.beta - 2.0  # prior (1, 1), decayed toward it by lam each update
    picked = np.concatenate([c for _, c in sel.log])
    extremes = [t for t in np.unique(picked) if _always_pass_or_fail(int(t))]
    assert extremes, "the prior's ties should pick some always-pass/always-fail tasks first"
    mean = sel.mean()
    for t in extremes:
        assert fed[t] > 2.0  # its whole group of 4 arrived, then decayed
        assert mean[t] > 0.75 if t % 3 == 0 else mean[t] < 0.25
        assert np.count_nonzero(picked == t) == 1  # never picked again


# ------------------------------------------------------------------------ AsyncGRPOTrainer
#
# AsyncGRPOTrainer cannot train on CPU (its loss runs a FlashAttention-3 kernel; rollouts need a
# vLLM server). These tests run its real rollout loop (`_AsyncRolloutLoop`: the generate loop's
# slot scheduling, `_repeat_iterator`, chat templating, `_score_group`), with only the vLLM
# request (`_generate_one_turn`) replaced, in this process and in a spawned child as TRL runs it;
# and construct the real trainer (its GPU peak-FLOPs query replaced) to check what `attach` adds.


def _pool(n: int) -> Any:
    datasets = pytest.importorskip("datasets")
    # Row r holds task n-1-r; chat prompts, as the async trainer requires.
    return datasets.Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": f"task {n - 1 - r}"}] for r in range(n)],
            "task_id": [n - 1 - r for r in range(n)],
        }
    )


def pass_fail_or_half(completions: list[Any], task_id: list[int], **kw: Any) -> list[float]:
    """Module level, so that it pickles into the rollout process like any AsyncGRPOTrainer reward."""
    return [1.0 if t % 3 == 0 else 0.0 if t % 3 == 1 else float(i % 2) for i, t in enumerate(task_id)]


class EventBOTS(BOTS):
    """BOTS that logs ('pick', ids) (from select or take) and ('feed', ids) events in order
    (n_rollouts: num_generations=4 unless given)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("n_rollouts", 4)
        super().__init__(*args, **kwargs)
        self.events: list[tuple[str, list[int]]] = []

    def select(self, batch_size: int, exclude: Any = None) -> np.ndarray:
        ids = super().select(batch_size, exclude=exclude)
        self.events.append(("pick", ids.tolist()))
        return ids

    def take(self, k: int, **kwargs: Any) -> np.ndarray:
        ids = super().take(k, **kwargs)
        self.events.append(("pick", ids.tolist()))
        return ids

    def update(self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None) -> None:
        super().update(task_ids, successes, trials, predicted)
        self.events.append(("feed", sorted(set(np.asarray(task_ids).tolist()))))


def _never_picked_while_in_flight(events: list[tuple[str, list[int]]]) -> set[int]:
    in_flight: set[int] = set()
    for kind, ids in events:
        if kind == "pick":
            assert not in_flight & set(ids), f"picked {ids} while in flight: {sorted(in_flight)}"
            in_flight |= set(ids)
        else:
            in_flight -= set(ids)
    return in_flight


def test_async_prompts_exclude_tasks_in_flight_until_scored() -> None:
    from bots_rft import InvalidArgumentError
    from bots_rft.integrations.trl_async import AsyncBOTS

    pytest.importorskip("trl")
    sel = EventBOTS(6, seed=0, threads=1)
    stream = AsyncBOTS(sel, _pool(6))
    it = iter(stream.prompts)
    rows = [next(it) for _ in range(6)]
    assert sorted(r["task_id"] for r in rows) == list(range(6))  # six picks, six different tasks
    assert stream.in_flight().tolist() == list(range(6))
    first = rows[0]["task_id"]
    stream.recording(pass_fail_or_half)(completions=["x"] * 4, task_id=[first] * 4)
    assert first not in stream.in_flight().tolist() and sel.num_updates == 1
    assert next(it)["task_id"] == first  # the only task not in flight
    # Every task in flight (a pool smaller than the rollout capacity): picks repeat, and say so.
    next(it)
    metrics = stream.selection.take_metrics()
    assert metrics["bots/in_flight_repick_frac"] == (1.0, 8.0)
    assert metrics["bots/select_ms"][1] == 8.0 and metrics["bots/etr"] == (float(first % 3 == 2), 1.0)
    # Calibration as window sums: the group's rollouts all agree or not; four rollouts predicted at 1/2.
    assert metrics["bots/zero_variance_share"] == (float(first % 3 != 2), 1.0)
    assert metrics["bots/calibration_brier"] == (1.0, 4.0)
    # Bad feedback changes nothing.
    state = sel.state_dict()
    with pytest.raises(InvalidArgumentError, match="task_ids"):
        stream.selection.feed([99] * 2, [1.0, 0.0])
    with pytest.raises(InvalidArgumentError, match="rewards"):
        stream.selection.feed([1, 1], [1.0])
    np.testing.assert_array_equal(sel.state_dict()["alpha"], state["alpha"])
    assert sel.num_updates == 1


try:  # module level, so that the spawned rollout process can unpickle it
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop
except ImportError:  # pragma: no cover - the async tests skip without trl
    _AsyncRolloutLoop = object


class FakeVLLMLoop(_AsyncRolloutLoop):  # type: ignore[misc, valid-type]
    """TRL's rollout loop with the vLLM request replaced: every turn answers 'ghi' + EOS."""

    async def _generate_one_turn(self, prompt_ids: list[int]) -> tuple[list[int], list[float]]:
        import asyncio

        await asyncio.sleep(0.001 * (len(prompt_ids) % 5))  # groups finish out of order
        return [70, 71, 72, self.eos_token_ids[0]], [-0.5] * 4


def _loop_kwargs(stream: Any, reward: Any) -> dict[str, Any]:
    """What AsyncRolloutWorker forwards to the loop (the trainer's settings, minus vLLM's)."""
    from bots_rft.llm.models import byte_tokenizer

    tok = byte_tokenizer()
    # TRL parses completions with the tokenizer's response template; the local byte tokenizer's
    # chat template is not one TRL knows, so give it one: the whole completion is the content.
    tok.response_template = {
        "type": "object",
        "properties": {"role": {"const": "assistant"}, "content": {"type": "string"}},
        "x-regex": r"^(?P<content>.*?)$",
    }
    return dict(
        model_name="tiny",
        dataset=stream.prompts,
        reward_funcs=[reward],
        processing_class=tok,
        eos_token_ids=[tok.eos_token_id],
        num_generations=4,
        max_inflight_tasks=8,  # two groups generating at once, more waiting to be scored
    )


def _rollout_loop(stream: Any, reward: Any) -> Any:
    """TRL's real rollout loop in this process, constructed as TRL's rollout child does."""
    import multiprocessing as mp
    import queue
    import threading

    from accelerate.state import PartialState

    PartialState()  # as TRL's rollout child does first (its logger needs it)
    return FakeVLLMLoop(
        **_loop_kwargs(stream, reward),
        rollout_buffer=queue.Queue(),
        model_version_value=mp.Value("i", 0),
        heartbeat_value=mp.Value("d", 0.0),
        failed_event=threading.Event(),
        exception_info_queue=queue.Queue(),
        metrics_queue=queue.Queue(),
    )


def test_async_rollout_loop_streams_bots_picks_and_feeds_every_group() -> None:
    """The async evidence-loss regression test, on TRL's real rollout loop: every scored group
    reaches BOTS (always-pass / always-fail ones included), no task is picked while its group is
    in flight, and the extreme tasks end near 1 / 0 and are not picked again."""
    import asyncio

    pytest.importorskip("trl")
    pytest.importorskip("aiohttp")
    from bots_rft.integrations.trl_async import AsyncBOTS

    # More informative (mixed) tasks than can be in flight at once (2 groups generating, up to 16
    # waiting to be scored, 3 waiting for their update), so one is always free; posterior means
    # with no discount make "never picked again" and the ~1 / ~0 means exact.
    n = 90
    sel = EventBOTS(n, seed=0, threads=1, thompson=False, lam=0.0)
    stream = AsyncBOTS(sel, _pool(n), groups_per_update=4)
    loop = _rollout_loop(stream, stream.recording(pass_fail_or_half))

    async def run(groups: int) -> None:
        stop = loop._stop_event
        tasks = [asyncio.ensure_future(loop._generate_loop(stop)), asyncio.ensure_future(loop._score_loop(stop))]
        while loop._total_groups_scored < groups and not any(t.done() for t in tasks):  # done early: failed
            await asyncio.sleep(0.005)
        stop.set()
        await asyncio.gather(*tasks)

    try:
        loop._loop.run_until_complete(run(120))
    finally:
        loop._tool_pool.shutdown(wait=True)
        loop._loop.close()

    scored = loop._total_groups_scored
    stream.selection.flush()
    fed = [ids for kind, ids in sel.events if kind == "feed"]
    assert scored >= 120 and sum(len(ids) for ids in fed) == scored  # every scored group, none missing
    assert sel.num_updates == -(-scored // 4)  # four groups per update
    assert loop.rollout_buffer.qsize() == 4 * scored  # and TRL queued every sample as usual
    still_in_flight = _never_picked_while_in_flight(sel.events)
    assert sorted(still_in_flight) == stream.in_flight().tolist()
    picks = [ids[0] for kind, ids in sel.events if kind == "pick"]
    mean = sel.mean()
    extremes = {t for t in picks if t % 3 != 2 and t not in still_in_flight}
    assert extremes
    for t in extremes:
        assert mean[t] > 0.75 if t % 3 == 0 else mean[t] < 0.25
        assert picks.count(t) == 1
    metrics = stream.selection.take_metrics()
    etr_num, etr_den = metrics["bots/etr"]  # type: ignore[misc]
    assert etr_den == scored and etr_num == sum(1 for ids in fed for t in ids if t % 3 == 2)


class _StubRolloutWorker:
    """RolloutWorkerProtocol without vLLM: an empty rollout buffer, a real metrics queue."""

    def __init__(self) -> None:
        import queue

        self.rollout_buffer: Any = queue.Queue()
        self.metrics_queue: Any = queue.Queue()

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def update_model_version(self, model_version: int) -> None: ...
    def check_health(self, stale_after_s: float) -> None: ...


class _NoWeightTransfer:
    def init_weight_transfer(self) -> None: ...
    def pause(self) -> None: ...
    def send_weights(self, iterator: Any) -> None: ...
    def resume(self) -> None: ...
    def destroy(self) -> None: ...


def test_async_grpo_trainer_attach_logs_saves_and_restores(tmp_path: Any, monkeypatch: Any) -> None:
    pytest.importorskip("trl")
    import trl.experimental.async_grpo.async_grpo_trainer as async_trainer_module
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    from bots_rft.integrations.trl import SELECTOR_FILE
    from bots_rft.integrations.trl_async import AsyncBOTS
    from bots_rft.llm.models import byte_tokenizer, tiny_model

    # The trainer asks CUDA for the GPU's peak FLOPs at construction: the one GPU-only call here.
    monkeypatch.setattr(async_trainer_module, "get_peak_flops_per_device", lambda *a, **k: None)
    tok = byte_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    sel = BOTS(9, seed=3, threads=1, n_rollouts=4)
    stream = AsyncBOTS(sel, _pool(9))
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        bf16=False,
        report_to=[],
        max_steps=4,
        num_generations=4,
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        logging_steps=1,
        token_budget=0,
    )
    trainer = AsyncGRPOTrainer(
        model=str(tmp_path / "model"),
        reward_funcs=[stream.recording(pass_fail_or_half)],
        args=args,
        train_dataset=stream.prompts,
        processing_class=tok,
        rollout_worker=_StubRolloutWorker(),
        weight_transfer=_NoWeightTransfer(),
    )
    stream.attach(trainer)
    assert stream.selection.groups_per_update == 4  # 8 samples x 2 accumulation steps / 4 generations

    # What the rollout process does (see the rollout-loop test): pick, score, feed.
    it = iter(stream.prompts)
    for _ in range(4):
        row = next(it)
        stream.recording(pass_fail_or_half)(completions=["x"] * 4, task_id=[row["task_id"]] * 4)
    assert sel.num_updates == 1

    # An optimiser step ends, the trainer logs: bots/* reach trainer.state.log_history.
    # (Only our callback: the trainer's own step-end metrics read its rollout dataloader.)
    trainer.model.train()
    for cb in trainer.callback_handler.callbacks:
        if type(cb).__name__ == "BOTSAsyncMetricsCallback":
            cb.on_step_end(args, trainer.state, trainer.control)
    trainer.log({})
    logged = trainer.state.log_history[-1]
    assert logged["bots/select_ms"] >= 0 and logged["bots/update_ms"] >= 0
    assert 0 <= logged["bots/etr"] <= 1 and logged["bots/pick_mean_p50"] == pytest.approx(0.5)

    # A checkpoint: pending groups are applied first, then the selector is written beside it.
    next_row = next(it)
    stream.recording(pass_fail_or_half)(completions=["x"] * 4, task_id=[next_row["task_id"]] * 4)
    trainer.state.global_step = 7
    trainer.callback_handler.on_save(args, trainer.state, trainer.control)
    folder = tmp_path / "out" / "checkpoint-7"
    assert (folder / SELECTOR_FILE).exists() and sel.num_updates == 2
    saved = sel.state_dict()

    # Resume: train(resume_from_checkpoint=...) restores it before TRL's own train runs (which
    # needs vLLM and a GPU, so it is replaced here by a recorder of its arguments).
    ran: list[Any] = []
    other = BOTS(9, seed=3, threads=1, n_rollouts=4)
    stream2 = AsyncBOTS(other, _pool(9))
    trainer.train_dataset = stream2.prompts
    trainer.train = lambda resume_from_checkpoint=None, *a, **k: ran.append(resume_from_checkpoint)
    stream2.attach(trainer)
    trainer.train(resume_from_checkpoint=str(folder))
    assert ran == [str(folder)]
    np.testing.assert_array_equal(other.alpha, saved["alpha"])
    assert other.num_updates == 2 and other.num_selections == saved["num_selections"]


def test_async_rollout_child_process_asks_the_trainer_process() -> None:
    """As AsyncGRPOTrainer runs it: TRL's `_child_main` in a spawned process, with the prompts and
    the reward function pickled into it. The selector stays here; the child asks for prompts and
    reports rewards over the local connection."""
    import multiprocessing as mp
    import pickle
    import time

    pytest.importorskip("trl")
    pytest.importorskip("aiohttp")
    from trl.experimental.async_grpo.async_rollout_worker import _child_main

    from bots_rft.integrations.trl_async import AsyncBOTS

    n = 30
    sel = EventBOTS(n, seed=4, threads=1)
    stream = AsyncBOTS(sel, _pool(n))
    kwargs = _loop_kwargs(stream, stream.recording(pass_fail_or_half))
    assert len(pickle.dumps(kwargs)) < 10**6  # AsyncRolloutWorker.start checks it pickles; it is small
    ctx = mp.get_context("spawn")
    samples, metrics, errors = ctx.Queue(), ctx.Queue(), ctx.Queue(maxsize=1)
    stop, ready, failed = ctx.Event(), ctx.Event(), ctx.Event()
    version, heartbeat = ctx.Value("i", 0), ctx.Value("d", 0.0)  # kept alive until the child has them
    child = ctx.Process(
        target=_child_main,
        args=(FakeVLLMLoop, kwargs, samples, version, stop, ready, heartbeat, failed, errors, metrics),
        daemon=True,
    )
    child.start()
    try:
        waited = 0
        while sel.num_updates < 8 and child.is_alive() and not failed.is_set():
            time.sleep(0.05)
            waited += 1
            assert waited < 6000, "the rollout child made no progress"  # a hang guard, not a timing check
    finally:
        stop.set()
        # Drain as the trainer does: a child exits only once its queues' data is read.
        drained: list[Any] = []
        for _ in range(600):
            drained += _drain(samples)
            _drain(metrics)
            child.join(0.05)
            if not child.is_alive():
                break
        if child.is_alive():
            child.terminate()
    assert not failed.is_set(), errors.get(timeout=5)
    assert child.exitcode == 0 and sel.num_updates >= 8
    _never_picked_while_in_flight(sel.events)
    assert drained and all(s.advantage is not None for s in drained)  # TRL queued the scored samples
    stream.close()


def _drain(q: Any) -> list[Any]:
    import queue

    out = []
    while True:
        try:
            out.append(q.get_nowait())
        except queue.Empty:
            return out


def test_baseline_selectors_checkpoint_without_pickles(tmp_path: Any) -> None:
    """A selector without its own file format (the baselines) is stored in bots-rft's
    checksummed state format, never as a pickle, and restores exactly."""
    from bots_rft.integrations.trl import restore_selector, save_selector
    from bots_rft.selector.static import RandomSelector

    sel = RandomSelector(50, seed=3)
    sel.select(5)
    path = save_selector(sel, tmp_path / "checkpoint-1")
    assert not [p for p in (tmp_path / "checkpoint-1").iterdir() if p.suffix == ".pkl"], path
    twin = RandomSelector(50, seed=0)
    restore_selector(twin, tmp_path / "checkpoint-1")
    assert np.array_equal(twin.select(5), sel.select(5))
