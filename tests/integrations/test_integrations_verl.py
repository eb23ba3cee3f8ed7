"""bots_rft.integrations.verl against verl 0.9.1's V1 trainer, on CPU.

Real here: verl's config (``ppo_trainer`` composed by hydra, plus the entry point's ``bots``
section), the ``PPOTrainerSync`` / ``PPOTrainerColocateAsync`` objects (constructor, data loader
setup, prompt fetching and submission, ``step``, ``_save_checkpoint``/``_load_checkpoint``, and for
the sync trainer ``init()`` and the whole ``fit()`` loop, resume included),
``RLHFDataset`` over a parquet file, ``StatefulDataLoader``, ``ReplayBuffer``/``ReplayBufferAsync``
with DAPO filtering, and TransferQueue 0.1.11 on a local Ray instance.
Faked: what needs a GPU or vLLM. The actor/critic worker groups (a stand-in that saves and loads
nothing), the PPO update inside a step (``_step_once`` keeps only the replay-buffer sampling), in
``init()`` the resource pools, workers, rollout servers and weight sync (``_setup`` keeps the rest),
in ``fit()`` the PPO metrics read from the workers' outputs (``_compute_metrics``), and
the agent loop (a stand-in writes each prompt's ``n`` rollouts to TransferQueue under verl's key
and field layout, with rewards from a fixed per-task table).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl.trainer.ppo.v1.replay_buffer", reason="verl 0.9 is not installed")
warnings.filterwarnings("ignore", message=".*megatron.*")

import pandas as pd  # noqa: E402
import ray  # noqa: E402
import torch  # noqa: E402
import transfer_queue as tq  # noqa: E402
import verl  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.core.config_store import ConfigStore  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl.trainer.ppo.v1 import PPOTrainerColocateAsync, PPOTrainerSync  # noqa: E402
from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY  # noqa: E402

from bots_rft import BOTS, CheckpointError, ConfigError  # noqa: E402
from bots_rft.errors import DataError  # noqa: E402
from bots_rft.integrations import verl as bv  # noqa: E402
from checkpoint_files import is_codec_bytes  # noqa: E402
from packed_state import packed_entry  # noqa: E402

pytestmark = pytest.mark.slow

N_ROLLOUTS = 4
BATCH = 4
# The pool: 8 tasks always solved, 8 never, 8 half the time (ids 0..23, interleaved).
KIND = np.array(["pass", "fail", "mixed"] * 8)


def rewards_of(task: int) -> list[float]:
    return {"pass": [1.0] * N_ROLLOUTS, "fail": [0.0] * N_ROLLOUTS, "mixed": [1.0, 0.0] * (N_ROLLOUTS // 2)}[KIND[task]]


@pytest.fixture(scope="module")
def cluster() -> Any:
    from omegaconf import OmegaConf

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    # TransferQueue's controller and each storage unit hold one CPU: with two CPUs, one unit (its
    # default of two would wait forever for a third CPU).
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield
    tq.close()
    ray.shutdown()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    d = tmp_path_factory.mktemp("verl_data")
    n = len(KIND)
    rows = [
        {
            "prompt": [{"role": "user", "content": f"question {i}"}],
            "data_source": "toy",
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(i)},
            # Rows deliberately not in task-id order: rows and task ids must not be confused.
            "extra_info": {"index": (7 * i) % n, "split": "train"},
            "weak_rate": 0.1,
            "strong_rate": 0.9,
        }
        for i in range(n)
    ]
    pd.DataFrame(rows).to_parquet(d / "train.parquet")
    pd.DataFrame(rows[:4]).to_parquet(d / "val.parquet")
    return str(d)


def make_config(data_dir: str, ckpt_dir: str, *overrides: str) -> Any:
    ConfigStore.instance().store(name="bots_ppo_trainer", node=bv._default_config())
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(
            config_name="bots_ppo_trainer",
            overrides=[
                f"data.train_files={data_dir}/train.parquet",
                f"data.val_files={data_dir}/val.parquet",
                f"data.train_batch_size={BATCH}",
                "data.filter_overlong_prompts=false",
                f"actor_rollout_ref.rollout.n={N_ROLLOUTS}",
                "algorithm.adv_estimator=grpo",
                f"trainer.default_local_dir={ckpt_dir}",
                "bots.seed=3",
                *overrides,
            ],
        )


DAPO = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=reward")


class FakeAgentLoop:
    """Stands in for verl's AgentLoopManagerTQ: each prompt's n sessions are written to
    TransferQueue at once (keys ``{uid}_{session}_0``, fields ``rm_scores`` with the reward on the
    last token and the prompt's ``index``), then the prompt is marked finished."""

    def __init__(self) -> None:
        self.dispatched: list[int] = []  # task ids, in dispatch order
        self.hold: set[int] = set()  # tasks whose groups stay running (async tests)

    def generate_sequences(self, batch: TensorDict) -> None:
        for uid, index in zip(list(batch["uid"]), list(batch["index"]), strict=True):
            task = int(index)
            self.dispatched.append(task)
            if task in self.hold:
                tq.kv_put(key=uid, partition_id="train", tag={"status": "running"})
                continue
            self.finish(uid, task)

    @staticmethod
    def finish(uid: str, task: int) -> None:
        keys = [f"{uid}_{s}_0" for s in range(N_ROLLOUTS)]
        fields = TensorDict(
            {
                "rm_scores": torch.nested.as_nested_tensor(
                    [torch.tensor([0.0, 0.0, r]) for r in rewards_of(task)], layout=torch.jagged
                ),
                "index": torch.tensor([task] * N_ROLLOUTS),
            },
            batch_size=N_ROLLOUTS,
        )
        tags = [{"status": "success", "seq_len": 5, "global_steps": 1} for _ in keys]
        tq.kv_batch_put(keys=keys, partition_id="train", fields=fields, tags=tags)
        tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})


class NoWorkers:
    """The actor worker group: checkpoints of model weights are not what is tested here."""

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        pass

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        pass


class CPUMixin:
    """A real BOTS trainer minus its GPU work: a step samples from the replay buffer (DAPO and
    all) and skips log-probs, advantages and the actor update."""

    replay_buffer: Any
    global_steps: int

    def _step_once(self, metrics: dict[str, Any], timing_raw: dict[str, Any], sample_batch_size: int) -> Any:
        batch, buffer_metrics = self.replay_buffer.sample(self.global_steps, "train", sample_batch_size)
        metrics.update(buffer_metrics)
        return batch


class CPUSyncTrainer(CPUMixin, bv.BOTSPPOTrainerSync):
    pass


class CPUAsyncTrainer(CPUMixin, bv.BOTSPPOTrainerColocateAsync):
    pass


def start(cls: type, config: Any) -> Any:
    trainer = cls(config)
    trainer.tokenizer, trainer.processor = None, None  # RLHFDataset needs neither without length filtering
    trainer._init_dataloader()
    trainer.agent_loop_manager = FakeAgentLoop()
    trainer.actor_rollout_wg = NoWorkers()
    trainer.global_steps = 0
    return trainer


def run_steps(trainer: Any, steps: int) -> list[dict[str, Any]]:
    """What fit() does around step(): count, step, drop the trained batch from TransferQueue."""
    out = []
    for _ in range(steps):
        trainer.global_steps += 1
        metrics: dict[str, Any] = {}
        batch = trainer.step(metrics, {})
        tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
        out.append(metrics)
    return out


# ------------------------------------------------------------------------------ configuration


def test_trainers_registered_and_configs_refused(data_dir: str, tmp_path: Any) -> None:
    bv.register()  # what the entry point and its Ray task runner do (importing registers nothing)
    bv.register()  # idempotent
    for name, cls in bv._TRAINERS.items():
        assert TRAINER_REGISTRY[name] is cls
    with pytest.raises(ConfigError, match="0.9"):
        bv._require_supported_verl("0.7.1")
    bv._require_supported_verl("0.9.1")
    ckpt = str(tmp_path)
    cases = {
        "trainer.use_v1=false": "legacy RayPPOTrainer",
        "trainer.v1.trainer_mode=sync": "not a BOTS trainer",
        "trainer.v1.sampler.custom_sampler.path=pkg://x": "custom_sampler",
        "reward.reward_model.enable=true": "colocated reward model",
        "+bots.lamda=0.2": "unknown keys",
    }
    for override, message in cases.items():
        with pytest.raises(ConfigError, match=message):
            bv.check_config(make_config(data_dir, ckpt, override))
    assert bv.check_config(make_config(data_dir, ckpt)) == "sync"
    assert (
        bv.check_config(make_config(data_dir, ckpt, "trainer.v1.trainer_mode=bots_separate_async")) == "separate_async"
    )
    config = make_config(data_dir, ckpt, "bots.weak_column=weak_rate")
    with pytest.raises(ConfigError, match="go together"):
        start(bv.BOTSPPOTrainerSync, config)


def test_replay_buffer_gets_verls_own_dapo_arguments(cluster: Any, data_dir: str, tmp_path: Any) -> None:
    names = (
        "trainer_mode",
        "max_off_policy_threshold",
        "max_off_policy_strategy",
        "filter_groups_metric",
        "train_batch_size",
        "gen_batch_size",
        "max_inflight_gen_batches",
        "sync_refill_failed_groups",
    )
    for mode, ours, theirs, extra in [
        ("sync", bv.BOTSPPOTrainerSync, PPOTrainerSync, DAPO),
        ("sync", bv.BOTSPPOTrainerSync, PPOTrainerSync, ("algorithm.filter_groups.max_inflight_gen_batches=3", *DAPO)),
        ("sync", bv.BOTSPPOTrainerSync, PPOTrainerSync, ()),
        ("colocate_async", bv.BOTSPPOTrainerColocateAsync, PPOTrainerColocateAsync, DAPO),
    ]:
        bots_trainer = ours(make_config(data_dir, str(tmp_path), f"trainer.v1.trainer_mode=bots_{mode}", *extra))
        verl_trainer = theirs(make_config(data_dir, str(tmp_path), f"trainer.v1.trainer_mode={mode}", *extra))
        ours_rb, theirs_rb = bots_trainer.replay_buffer, verl_trainer.replay_buffer
        assert isinstance(ours_rb, type(theirs_rb)) and type(ours_rb) is not type(theirs_rb)
        assert {n: getattr(ours_rb, n) for n in names} == {n: getattr(theirs_rb, n) for n in names}
        assert ours_rb.refill_fn.__self__ is bots_trainer
        if DAPO[0] in extra:
            assert ours_rb.filter_groups_metric == "reward"  # DAPO is on, not silently off
    # verl's config-only seam alone would show BOTS the rewards but not let it choose: refused.
    config = make_config(
        data_dir,
        str(tmp_path),
        "trainer.v1.trainer_mode=sync",
        "trainer.v1.sampler.custom_sampler.path=pkg://bots_rft.integrations.verl",
        "trainer.v1.sampler.custom_sampler.name=BOTSReplayBuffer",
    )
    with pytest.raises(ConfigError, match="custom_sampler"):
        PPOTrainerSync(config)


# ------------------------------------------------------------------------------ the data path


def test_sampler_chooses_every_prompt_a_chunk_at_a_time(cluster: Any, data_dir: str, tmp_path: Any) -> None:
    trainer = start(CPUSyncTrainer, make_config(data_dir, str(tmp_path), *DAPO))
    loader = trainer.train_dataloader
    assert loader.num_workers == 0 and loader.sampler is trainer.bots_sampler and loader.batch_size == 1
    selections = trainer.bots_sampler.selector.num_selections
    batch = trainer._next_train_batch()  # verl's own fetch: train_batch_size prompts, one at a time
    assert trainer.bots_sampler.selector.num_selections == selections + 1  # one draw for the whole batch
    tasks = [int(t) for t in batch["index"]]
    assert len(set(tasks)) == BATCH
    # each row really is the task BOTS chose (rows are not in task-id order in this dataset)
    assert sorted(trainer.bots_sampler._uid_task.values()) == sorted(tasks)
    assert [
        trainer.train_dataset.dataframe[int(trainer.bots_sampler.rows_of_task[t])]["extra_info"]["index"] for t in tasks
    ] == tasks


def test_inflight_prompts_are_excluded_until_their_evidence_is_folded() -> None:
    sampler = bv.BOTSPromptSampler(BOTS(6, seed=1), list(range(6)), chunk_size=4)
    it = iter(sampler)
    first = [next(it) for _ in range(4)]
    sampler.dispatched([f"u{i}" for i in range(4)])
    more = [next(it) for _ in range(2)]  # a new chunk: only the two tasks not in flight remain
    assert sorted(first + more) == list(range(6))
    sampler.dispatched(["u4", "u5"])
    for i, task in enumerate(first + more):
        sampler.observe(f"u{i}", task, [1.0, 0.0], kept=True)
    assert sampler.inflight_tasks == 6  # finished, but not yet in the posterior: still excluded
    nxt = next(it)  # everything in flight: the exclusion is lifted rather than stalling verl
    assert 0 <= nxt < 6
    metrics = sampler.fold()
    assert metrics["bots/groups"] == 6 and metrics["bots/inflight_tasks"] == 1  # the one just yielded
    with pytest.raises(DataError, match="fetched for task"):
        sampler.dispatched(["u6"])
        sampler.observe("u6", (nxt + 1) % 6, [1.0], kept=True)
    sampler.observe_empty("gone")  # a group whose sessions all failed
    assert sampler.fold()["bots/groups_without_rollouts"] == 1


# ------------------------------------------------------------------------------ evidence


def test_filtered_groups_reach_bots_and_extreme_tasks_stop_being_chosen(
    cluster: Any, data_dir: str, tmp_path: Any
) -> None:
    """The evidence-loss regression: with DAPO filtering on, the all-pass and all-fail groups are
    evicted before the trainer sees them; BOTS must still learn from them (posterior means near 1
    and 0, not decaying to the prior 0.5) and stop choosing those tasks."""
    trainer = start(CPUSyncTrainer, make_config(data_dir, str(tmp_path), *DAPO))
    steps = run_steps(trainer, 8)
    loop: FakeAgentLoop = trainer.agent_loop_manager
    evicted = sum(m.get("training/filter_groups/evicted_samples", 0) for m in steps)
    seen = sum(m["bots/groups"] for m in steps) + sum(m["bots/groups_without_rollouts"] for m in steps)
    assert evicted > 0 and seen == len(loop.dispatched)  # every dispatched group, kept or evicted
    assert sum(m["bots/evicted_groups"] for m in steps) >= evicted
    sel = trainer.bots_sampler.selector
    mean = sel.mean()
    tried = np.zeros(len(KIND), dtype=bool)
    tried[loop.dispatched] = True
    for kind, lo, hi in (("pass", 0.7, 1.0), ("fail", 0.0, 0.3)):
        ids = np.flatnonzero((kind == KIND) & tried)
        assert ids.size >= 4, f"too few {kind} tasks tried: {ids}"
        assert np.all((mean[ids] >= lo) & (mean[ids] <= hi)), (kind, mean[ids])
    # Late steps choose (almost) only the mixed tasks: their first picks are all mixed.
    late_picks = [KIND[t] for t in loop.dispatched[-3 * BATCH :]]
    assert late_picks.count("mixed") >= 0.75 * len(late_picks), late_picks
    assert steps[-1]["bots/etr"] >= steps[0]["bots/etr"]
    for key in (
        "bots/etr",
        "bots/below_one",
        "bots/above_zero",
        "bots/pick_mean_p10",
        "bots/pick_mean_p50",
        "bots/select_ms",
        "bots/update_ms",
        "bots/evicted_groups",
        "bots/kept_groups",
        "bots/inflight_tasks",
    ):
        assert key in steps[-1], key
    assert steps[-1]["bots/inflight_tasks"] == 0  # sync: nothing carried into the next step


def test_interpolation_evidence_reports_capability(cluster: Any, data_dir: str, tmp_path: Any) -> None:
    config = make_config(data_dir, str(tmp_path), "bots.weak_column=weak_rate", "bots.strong_column=strong_rate")
    trainer = start(CPUSyncTrainer, config)
    metrics = run_steps(trainer, 1)[0]
    assert np.isfinite(metrics["bots/capability"])


# ------------------------------------------------------------------------------ checkpoints


def test_checkpoint_round_trip_resumes_exactly(cluster: Any, data_dir: str, tmp_path: Any) -> None:
    ckpt = str(tmp_path / "ckpt")
    first = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto"))
    run_steps(first, 2)
    first._save_checkpoint()  # verl's own: data.pt (with the sampler's state), then our selector file
    folder = os.path.join(ckpt, "global_step_2")
    saved = BOTS.load(os.path.join(folder, bv.SELECTOR_FILE))
    assert saved.num_updates == 2  # the evidence of the saved step is in the checkpoint
    np.testing.assert_array_equal(saved.alpha, first.bots_sampler.selector.alpha)

    resumed = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto"))
    resumed._load_checkpoint()
    assert resumed.global_steps == 2
    np.testing.assert_array_equal(resumed.bots_sampler.selector.alpha, first.bots_sampler.selector.alpha)
    n_first = len(first.agent_loop_manager.dispatched)
    run_steps(first, 2)
    run_steps(resumed, 2)
    assert resumed.agent_loop_manager.dispatched == first.agent_loop_manager.dispatched[n_first:]
    np.testing.assert_array_equal(resumed.bots_sampler.selector.beta, first.bots_sampler.selector.beta)


def test_data_pt_holds_the_selector_in_our_format_and_a_tampered_one_is_refused(
    cluster: Any, data_dir: str, tmp_path: Any
) -> None:
    ckpt = str(tmp_path / "ckpt")
    first = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto"))
    run_steps(first, 1)
    first._save_checkpoint()
    data_pt = os.path.join(ckpt, "global_step_1", "data.pt")
    # weights_only: torch's restricted unpickler, which loads no class of ours (nor any other).
    state = torch.load(data_pt, map_location="cpu", weights_only=True)
    packed = packed_entry(state, "bots-rft/verl-prompt-sampler")
    assert set(packed) == {"format", "checkpoint"}
    blob = packed["checkpoint"]
    assert isinstance(blob, bytes) and is_codec_bytes(blob)

    def resume_with(entry: dict[str, Any]) -> Any:
        packed.clear()
        packed.update(entry)
        torch.save(state, data_pt)
        return start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto"))

    flipped = bytearray(blob)
    flipped[len(flipped) // 2] ^= 0x01
    with pytest.raises(CheckpointError, match="checksum"):
        resume_with({"format": "bots-rft/verl-prompt-sampler", "checkpoint": bytes(flipped)})._load_checkpoint()
    with pytest.raises(CheckpointError, match="not a 'bots-rft/verl-prompt-sampler' state"):
        resume_with({"format": "bots-rft/verl-prompt-sampler-v0", "selector": {}})._load_checkpoint()
    with pytest.raises(CheckpointError, match="must be bytes"):
        resume_with({"format": "bots-rft/verl-prompt-sampler", "checkpoint": {"alpha": [1.0]}})._load_checkpoint()
    resumed = resume_with({"format": "bots-rft/verl-prompt-sampler", "checkpoint": blob})
    resumed._load_checkpoint()
    np.testing.assert_array_equal(resumed.bots_sampler.selector.alpha, first.bots_sampler.selector.alpha)


class NoWeightSync:
    """verl's CheckpointEngineManager: moves weights between the GPU workers and the rollout
    servers (there are neither here)."""

    def update_weights(self, *args: Any, **kwargs: Any) -> None:
        pass

    def sleep_replicas(self, *args: Any, **kwargs: Any) -> None:
        pass


class FitTrainer(CPUMixin, bv.BOTSPPOTrainerSync):
    """verl's own ``init()`` and ``fit()`` around the CPU step. ``_setup`` keeps what needs no GPU,
    in verl's order (data loaders, dump executor, then, after the workers, the checkpoint load)
    and puts stand-ins where GPU workers, rollout servers and weight sync would be;
    ``_compute_metrics`` records the step's metrics instead of reading the PPO fields (log-probs,
    advantages, values) that only the GPU workers write."""

    def _setup(self) -> None:
        self.tokenizer, self.processor = None, None  # RLHFDataset needs neither without length filtering
        self._init_dataloader()
        self._init_dump_executor()
        self.actor_rollout_wg = NoWorkers()
        self.checkpoint_manager = NoWeightSync()
        self.checkpoint_manager.sleep_replicas()
        self._load_checkpoint()
        self.logged: list[dict[str, Any]] = []

    def _compute_metrics(self, batch: Any, metrics: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        self.logged.append(dict(metrics))


FIT = (
    *DAPO,
    "trainer.logger=[console]",
    "trainer.val_before_train=false",
    "trainer.test_freq=-1",
    "trainer.save_freq=2",
)


def fit(config: Any) -> FitTrainer:
    trainer = FitTrainer(config)
    trainer.init()  # verl's: _setup (above), then on_init_end
    trainer.fit(FakeAgentLoop())
    return trainer


def test_fit_runs_verls_loop_and_a_resumed_fit_selects_what_an_uninterrupted_one_does(
    cluster: Any, data_dir: str, tmp_path: Any
) -> None:
    """verl's real fit(): its step loop, checkpoint cadence (``save_freq``), TransferQueue clean-up
    and logging; and its resume (``trainer.resume_mode=auto`` in init's checkpoint load)."""
    whole = fit(make_config(data_dir, str(tmp_path / "whole"), *FIT, "trainer.total_training_steps=4"))
    assert whole.global_steps == 5  # fit counts past the last step
    assert len(whole.logged) == 4 and all("bots/etr" in m and "bots/evicted_groups" in m for m in whole.logged)
    assert sorted(os.listdir(tmp_path / "whole")) == [
        "global_step_2",
        "global_step_4",
        "latest_checkpointed_iteration.txt",
    ]
    assert whole.bots_sampler.selector.num_updates == 4

    ckpt = str(tmp_path / "split")
    first = fit(make_config(data_dir, ckpt, *FIT, "trainer.total_training_steps=2"))
    n_first = len(first.agent_loop_manager.dispatched)
    assert first.agent_loop_manager.dispatched == whole.agent_loop_manager.dispatched[:n_first]
    resumed = fit(make_config(data_dir, ckpt, *FIT, "trainer.total_training_steps=4", "trainer.resume_mode=auto"))
    assert len(resumed.logged) == 2  # steps 3 and 4 only
    assert resumed.agent_loop_manager.dispatched == whole.agent_loop_manager.dispatched[n_first:]
    np.testing.assert_array_equal(resumed.bots_sampler.selector.alpha, whole.bots_sampler.selector.alpha)
    np.testing.assert_array_equal(resumed.bots_sampler.selector.beta, whole.bots_sampler.selector.beta)
    saved = BOTS.load(os.path.join(ckpt, "global_step_4", bv.SELECTOR_FILE))
    np.testing.assert_array_equal(saved.alpha, whole.bots_sampler.selector.alpha)


# ------------------------------------------------------------------------------ async


def test_async_stale_groups_feed_bots_and_running_prompts_stay_excluded(
    cluster: Any, data_dir: str, tmp_path: Any
) -> None:
    config = make_config(
        data_dir,
        str(tmp_path),
        "trainer.v1.trainer_mode=bots_colocate_async",
        "trainer.v1.sampler.max_off_policy_threshold=1",
    )
    trainer = start(CPUAsyncTrainer, config)
    assert isinstance(trainer.replay_buffer, bv.BOTSReplayBufferAsync)
    loop: FakeAgentLoop = trainer.agent_loop_manager
    sampler = trainer.bots_sampler
    trainer.global_steps = 1
    loop.hold = set(range(len(KIND)))  # the first batch keeps running past the step
    trainer._add_prompts_to_generate(BATCH)
    running = list(sampler._uid_task.items())
    loop.hold = set()
    trainer._add_prompts_to_generate(BATCH)  # selected while the first batch runs: disjoint
    assert not {t for _, t in running} & set(loop.dispatched[BATCH:])
    # The first batch finishes two steps later: stale under max_off_policy_threshold=1 and dropped
    # by verl, but BOTS reads it first.
    for uid, task in running:
        FakeAgentLoop.finish(uid, task)
    trainer.global_steps = 3
    trainer.replay_buffer.sample(trainer.global_steps, "train", BATCH)
    metrics = sampler.fold()
    assert metrics["bots/evicted_groups"] == 2 * BATCH  # both stale batches
    assert metrics["bots/kept_groups"] == BATCH  # the refills verl trains on


# ------------------------------------------------------------------------------ task embeddings


def write_task_embeddings(path: Any, ids: list[int], seed: int = 0) -> str:
    """An embeddings file (``bots embed``'s format) keyed by task id, rows in shuffled order: a
    task's kind one-hot, plus a noise column, so a regression on it can learn each kind's rate."""
    from bots_rft.data.embeddings import write_embeddings

    rng = np.random.default_rng(seed)
    order = rng.permutation(ids)
    kinds = np.array(["pass", "fail", "mixed"])
    matrix = np.concatenate(
        [(KIND[order][:, None] == kinds[None, :]).astype(np.float32), rng.standard_normal((len(order), 1))], axis=1
    )
    write_embeddings(path, order, matrix)
    return str(path)


@pytest.fixture(scope="module")
def embeddings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("embeddings")
    ids = list(range(len(KIND)))
    return {
        "good": write_task_embeddings(d / "emb.safetensors", ids),
        "other": write_task_embeddings(d / "other.safetensors", ids, seed=1),
        "missing": write_task_embeddings(d / "missing.safetensors", [t for t in ids if t != 5]),
    }


def frame_of(data_dir: str) -> Any:
    return pd.read_parquet(os.path.join(data_dir, "train.parquet"))


def test_embeddings_build_the_configured_estimator(data_dir: str, embeddings: dict[str, str], tmp_path: Any) -> None:
    from bots_rft.data.embeddings import embeddings_for
    from bots_rft.estimators import EmbeddingRegression, Similarity
    from bots_rft.parameters import LAM, PRIOR_PRECISION

    frame = frame_of(data_dir)
    emb = f"bots.embeddings={embeddings['good']}"
    sel = bv.build_sampler(make_config(data_dir, str(tmp_path), emb), frame).selector
    est = sel.evidence
    assert isinstance(est, EmbeddingRegression)
    # The selector's own λ (BOTS's default here) and the documented prior precision.
    assert est.forgetting == LAM.default == sel.lam and est.prior_precision == PRIOR_PRECISION.default
    np.testing.assert_array_equal(est.embeddings, embeddings_for(embeddings["good"], range(len(KIND))))
    sel = bv.build_sampler(make_config(data_dir, str(tmp_path), emb, "bots.lam=0.3", "bots.prior_precision=2"), frame)
    assert sel.selector.evidence.forgetting == 0.3 == sel.selector.lam
    assert sel.selector.evidence.prior_precision == 2.0
    line = bv.describe_selector(sel.selector, bv._bots_options(make_config(data_dir, str(tmp_path), emb)))
    assert f"embedding-regression evidence from bots.embeddings={embeddings['good']}" in line
    sim = bv.build_sampler(make_config(data_dir, str(tmp_path), emb, "bots.estimator=similarity"), frame).selector
    assert isinstance(sim.evidence, Similarity) and len(sim.evidence) == len(KIND)
    # Ids in range without a row (bots.num_tasks above the largest id) get the mean row, never picked.
    wide = bv.build_sampler(make_config(data_dir, str(tmp_path), emb, "bots.num_tasks=30"), frame)
    rows = wide.selector.evidence.embeddings
    assert rows.shape[0] == 30
    np.testing.assert_allclose(rows[24:], np.broadcast_to(rows[:24].mean(axis=0), (6, rows.shape[1])), rtol=1e-6)
    picked = [t for _ in range(5) for t in wide._select_chunk()]
    assert max(picked) < 24


def test_embeddings_refusals_name_the_key(data_dir: str, embeddings: dict[str, str], tmp_path: Any) -> None:
    frame = frame_of(data_dir)
    emb = f"bots.embeddings={embeddings['good']}"
    cases: list[tuple[tuple[str, ...], type[Exception], str]] = [
        (
            (emb, "bots.weak_column=weak_rate", "bots.strong_column=strong_rate"),
            ConfigError,
            r"^bots\.embeddings and bots\.weak_column / bots\.strong_column: ",
        ),
        (("bots.estimator=similarity",), ConfigError, r"^bots\.estimator: set without bots\.embeddings"),
        (("bots.prior_precision=1",), ConfigError, r"^bots\.prior_precision: set without bots\.embeddings"),
        ((emb, "bots.estimator=knn"), ConfigError, r"^bots\.estimator: must be regression or similarity"),
        ((emb, "bots.prior_precision=-1"), ConfigError, r"^bots\.prior_precision: must lie in"),
        ((emb, "bots.estimator=similarity", "bots.prior_precision=1"), ConfigError, r"^bots\.prior_precision: only"),
        (
            (f"bots.embeddings={embeddings['missing']}",),
            DataError,
            r"^bots\.embeddings: .*missing\.safetensors' has no embedding for task id 5 \(1 of 24",
        ),
        ((f"bots.embeddings={tmp_path / 'nope.safetensors'}",), DataError, r"^bots\.embeddings: .* does not exist"),
    ]
    for overrides, error, message in cases:
        with pytest.raises(error, match=message) as info:
            bv.build_sampler(make_config(data_dir, str(tmp_path), *overrides), frame)
        assert "\n" not in str(info.value)


def test_embeddings_regression_learns_and_changes_the_picks(
    cluster: Any, data_dir: str, embeddings: dict[str, str], tmp_path: Any
) -> None:
    from bots_rft.estimators import EmbeddingRegression

    plain = start(CPUSyncTrainer, make_config(data_dir, str(tmp_path / "plain"), *DAPO))
    trainer = start(
        CPUSyncTrainer, make_config(data_dir, str(tmp_path / "emb"), *DAPO, f"bots.embeddings={embeddings['good']}")
    )
    run_steps(plain, 4)
    steps = run_steps(trainer, 1)
    # After one step, the tasks not rolled out moved from the prior mean toward their kind's rate:
    # implicit evidence from the regression (without it they would sit at exactly 0.5).
    sel = trainer.bots_sampler.selector
    never = np.setdiff1d(np.arange(len(KIND)), trainer.agent_loop_manager.dispatched)
    assert any(KIND[t] != "mixed" for t in never), never
    mean = sel.mean()
    for t in never:
        moved = {"pass": mean[t] > 0.52, "fail": mean[t] < 0.48, "mixed": abs(mean[t] - 0.5) < 0.05}
        assert moved[KIND[t]], (t, KIND[t], mean[t])
    steps += run_steps(trainer, 3)
    est = sel.evidence
    assert isinstance(est, EmbeddingRegression) and est.updates == 4
    picked = trainer.agent_loop_manager.dispatched
    # The first chunk is drawn from the prior, as without embeddings; later ones from the evidence.
    assert picked[:BATCH] == plain.agent_loop_manager.dispatched[:BATCH]
    assert picked != plain.agent_loop_manager.dispatched
    # The regression learnt each kind's rate from the rolled-out tasks, and predicts it for all.
    predicted = est.predict_all()
    assert predicted is not None
    assert predicted[KIND == "pass"].min() > 0.8 and predicted[KIND == "fail"].max() < 0.2
    assert np.all(np.abs(predicted[KIND == "mixed"] - 0.5) < 0.2)
    assert len(steps) == 4 and all("bots/etr" in m for m in steps)


def test_embeddings_checkpoint_round_trip_and_other_embeddings_refused(
    cluster: Any, data_dir: str, embeddings: dict[str, str], tmp_path: Any
) -> None:
    ckpt = str(tmp_path / "ckpt")
    emb, other = f"bots.embeddings={embeddings['good']}", f"bots.embeddings={embeddings['other']}"
    first = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto", emb))
    run_steps(first, 2)
    first._save_checkpoint()
    resumed = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto", emb))
    resumed._load_checkpoint()
    np.testing.assert_array_equal(
        resumed.bots_sampler.selector.evidence.weights, first.bots_sampler.selector.evidence.weights
    )
    n_first = len(first.agent_loop_manager.dispatched)
    run_steps(first, 2)
    run_steps(resumed, 2)
    assert resumed.agent_loop_manager.dispatched == first.agent_loop_manager.dispatched[n_first:]
    np.testing.assert_array_equal(resumed.bots_sampler.selector.alpha, first.bots_sampler.selector.alpha)

    # verl's resume (data.pt) with another embeddings file: refused, naming the key.
    swapped = start(CPUSyncTrainer, make_config(data_dir, ckpt, *DAPO, "trainer.resume_mode=auto", other))
    with pytest.raises(
        CheckpointError, match=r"evidence: embedding-regression .* in the state, set by bots\.embeddings"
    ) as info:
        swapped._load_checkpoint()
    assert "\n" not in str(info.value)

    # bots.checkpoint: the same embeddings resume the regression; others are refused naming the key.
    saved = os.path.join(ckpt, "global_step_2", bv.SELECTOR_FILE)
    frame = frame_of(data_dir)
    again = bv.build_sampler(make_config(data_dir, str(tmp_path), emb, f"bots.checkpoint={saved}"), frame).selector
    assert again.evidence.updates == 2 and again.num_updates == 2
    np.testing.assert_array_equal(again.evidence.weights, BOTS.load(saved).evidence.weights)
    with pytest.raises(
        ConfigError,
        match=r"^bots\.checkpoint: .*\(bots\.embeddings or bots\.weak_column / bots\.strong_column: embedding-regression",
    ) as info:
        bv.build_sampler(make_config(data_dir, str(tmp_path), other, f"bots.checkpoint={saved}"), frame)
    assert "\n" not in str(info.value)


def test_the_documented_embeddings_overrides_build_the_regression(
    data_dir: str, embeddings: dict[str, str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/integrations.md's verl overrides for an embeddings file, as written (the file beside
    the run, as the docs' relative path has it)."""
    import re
    import shutil
    from pathlib import Path

    from bots_rft.estimators import EmbeddingRegression

    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = text[text.index("## Task embeddings instead of reference models") :]
    block = re.search(r"```text\n(.*?)```", section, flags=re.S)
    assert block is not None
    overrides = block.group(1).split()
    assert "bots.embeddings=emb.safetensors" in overrides
    shutil.copy(embeddings["good"], tmp_path / "emb.safetensors")
    monkeypatch.chdir(tmp_path)
    config = make_config(data_dir, str(tmp_path), *overrides)
    sel = bv.build_sampler(config, frame_of(data_dir)).selector
    assert isinstance(sel.evidence, EmbeddingRegression) and sel.evidence.prior_precision == 0.25
    line = bv.describe_selector(sel, bv._bots_options(config))
    assert "embedding-regression evidence from bots.embeddings=emb.safetensors" in line
